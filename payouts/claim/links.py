"""Signed links (``django.core.signing``): the payout form of one reward (sent to people whose
event came from elsewhere: a purchase, a WhatsApp opt-in) and the status page of one reward or
one video submission. The signature is the only credential, so links carry nothing but an id
and expire after ``CLAIM_LINK_MAX_AGE_DAYS``."""

from django.conf import settings
from django.core import signing

PAYOUT_SALT = "claim.payout-form"
STATUS_SALT = "claim.status"
VIDEO_SALT = "claim.video"


def _max_age() -> int:
    return settings.CLAIM_LINK_MAX_AGE_DAYS * 86400


def token_make(salt: str, object_id: int) -> str:
    return signing.dumps(object_id, salt=salt, compress=False)


def token_read(salt: str, token: str) -> int | None:
    """The id inside a valid, unexpired token; None for anything else (tampered, expired, junk)."""
    try:
        value = signing.loads(token, salt=salt, max_age=_max_age())
    except signing.BadSignature:
        return None
    return value if isinstance(value, int) else None
