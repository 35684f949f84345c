"""Signed links (``django.core.signing``): the payout form of one reward (sent to people whose
event came from elsewhere: a purchase, a WhatsApp opt-in) and the status page of one reward or
one video submission. The signature is the only credential, so links carry nothing but an id
and expire after ``CLAIM_LINK_MAX_AGE_DAYS``: a message makes its link when it is sent."""

from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.urls import reverse

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


# The claim pages' prefix (config.urls): a WhatsApp template's URL button is registered as
# "<CLAIM_BASE_URL>/c/{{1}}" and each message fills in the rest of its link.
CLAIM_PREFIX = "/c/"
_VIEWS = {PAYOUT_SALT: "claim:payout_form", STATUS_SALT: "claim:status", VIDEO_SALT: "claim:video_status"}


@dataclass(frozen=True)
class Link:
    url: str  # absolute, from CLAIM_BASE_URL
    suffix: str  # after CLAIM_PREFIX: the URL button's parameter


def link_make(salt: str, object_id: int) -> Link:
    """A fresh signed link to the page of ``salt`` for ``object_id``."""
    path = reverse(_VIEWS[salt], kwargs={"token": token_make(salt, object_id)})
    return Link(url=settings.CLAIM_BASE_URL.rstrip("/") + path, suffix=path.removeprefix(CLAIM_PREFIX))
