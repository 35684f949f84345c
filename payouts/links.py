"""Links sent to people, all made by ``link_make``:

* the payout form of one reward (``PAYOUT_SALT``), sent to people whose event came from elsewhere
  (a purchase, a WhatsApp opt-in) or whose payout came back. It is not a key to their money: a
  record (``recipients.models_claims.ClaimLink``) lets it give an account for that reward only,
  while the reward is owed and unpaid (``reward_owed``), once (``payout_link_spend``, a
  conditional UPDATE), for ``CLAIM_PAYOUT_LINK_DAYS``. The URL carries 256 random bits; the
  database keeps their SHA-256.
* the status page of one reward or one video submission, and the page where a pending account
  change waits for its code: signed (``django.core.signing``), read-only, carrying nothing but an
  id, expiring after ``CLAIM_LINK_MAX_AGE_DAYS``. A message makes its link when it is sent."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core import signing
from django.db.models import Exists, OuterRef
from django.urls import reverse
from django.utils import timezone

from campaigns.models import Reward, RewardStatus
from payouts.models import PayoutItem, PayoutStatus
from recipients.models_claims import ClaimLink, ClaimLinkPurpose

PAYOUT_SALT = "claim.payout-form"
STATUS_SALT = "claim.status"
VIDEO_SALT = "claim.video"
CHANGE_SALT = "claim.account-change"

# Money is owed while the reward is, and no payout carrying it has left (or is leaving) for a bank.
OWED_STATUSES = (RewardStatus.REVIEW, RewardStatus.HELD, RewardStatus.PAYABLE)
_GONE = (PayoutStatus.SUBMITTING, PayoutStatus.SUBMITTED, PayoutStatus.SETTLED)


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


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def payout_link_issue(*, reward_id: int, now: datetime | None = None) -> str:
    """A fresh payout-form link record for ``reward_id``; returns its token (never stored).
    Joins the caller's transaction."""
    now = now or timezone.now()
    token = secrets.token_urlsafe(32)
    person_id = Reward.objects.filter(pk=reward_id).values_list("person_id", flat=True).get()
    ClaimLink.objects.create(
        token_hash=_token_hash(token),
        purpose=ClaimLinkPurpose.PAYOUT_ACCOUNT,
        person_id=person_id,
        reward_id=reward_id,
        created_at=now,
        expires_at=now + timedelta(days=settings.CLAIM_PAYOUT_LINK_DAYS),
    )
    return token


def payout_link_find(*, token: str) -> ClaimLink | None:
    """The payout-form link of ``token`` whatever its state (the page says why a dead one is
    dead); None for a token nobody was sent."""
    return (
        ClaimLink.objects.select_related("reward__campaign__brand", "reward__event", "reward__person")
        .filter(token_hash=_token_hash(token), purpose=ClaimLinkPurpose.PAYOUT_ACCOUNT)
        .first()
    )


def reward_owed(*, reward_id: int) -> bool:
    """Is the reward's money still owed and unpaid (see ``OWED_STATUSES``)?"""
    gone = PayoutItem.objects.filter(reward_id=OuterRef("pk"), active=True, payout__status__in=_GONE)
    return Reward.objects.filter(pk=reward_id, status__in=OWED_STATUSES).exclude(Exists(gone)).exists()


def payout_link_usable(link: ClaimLink, *, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    return link.used_at is None and link.expires_at > now and reward_owed(reward_id=link.reward_id)


def payout_link_spend(*, link: ClaimLink, now: datetime) -> bool:
    """Spend ``link`` in the caller's transaction: True for the one caller that finds it unused,
    unexpired and its reward still owed; False for everyone else."""
    if not reward_owed(reward_id=link.reward_id):
        return False
    spent = ClaimLink.objects.filter(pk=link.pk, used_at__isnull=True, expires_at__gt=now).update(used_at=now)
    if spent == 1:
        link.used_at = now
    return spent == 1


# The claim pages' prefix (config.urls): a WhatsApp template's URL button is registered as
# "<CLAIM_BASE_URL>/c/{{1}}" and each message fills in the rest of its link.
CLAIM_PREFIX = "/c/"
_VIEWS = {
    PAYOUT_SALT: "claim:payout_form",
    STATUS_SALT: "claim:status",
    VIDEO_SALT: "claim:video_status",
    CHANGE_SALT: "claim:account_change",
}


@dataclass(frozen=True)
class Link:
    url: str  # absolute, from CLAIM_BASE_URL
    suffix: str  # after CLAIM_PREFIX: the URL button's parameter
    path: str  # from the site's root, for a redirect


def link_make(salt: str, object_id: int) -> Link:
    """A fresh link to the page of ``salt`` for ``object_id``: a payout-form link record for
    ``PAYOUT_SALT`` (``payout_link_issue``, written now), a signed token for the others."""
    token = payout_link_issue(reward_id=object_id) if salt == PAYOUT_SALT else token_make(salt, object_id)
    path = reverse(_VIEWS[salt], kwargs={"token": token})
    return Link(url=settings.CLAIM_BASE_URL.rstrip("/") + path, suffix=path.removeprefix(CLAIM_PREFIX), path=path)
