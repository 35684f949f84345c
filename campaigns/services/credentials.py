"""The tokens a person's platform login granted (``PlatformCredential``): stored when they submit
an item to be read later, renewed before a call that needs them, dropped as soon as nothing is
left to read.

Why a refresh token at all: TikTok's access token lives a day at most (its ``expires_in``), a
reward's hold lasts days, and a video can only be re-checked, or its views polled, with the
person's own token. So the refresh token is kept too, and ``platform_token_use`` renews the
access token through the platform (``Platform.token_refresh``) when it expires within
``REFRESH_MARGIN``, or when the platform refuses it earlier than it said.

Refresh tokens rotate (TikTok: "the previous refresh token stops working once a new one is
issued"), so a refresh must happen once per pair: the worker that refreshes claims the row by a
conditional UPDATE (``refresh_claimed_until``, over the ``version`` it read), calls the platform
outside any transaction, and records the new pair only over the version it claimed. A worker that
finds the claim taken waits briefly for the new pair, then gives up as an outage (tried again).

Privacy decision: the tokens are kept only while needed. They are deleted once no submission of
the account is still read (``platform_credential_release``: none pending verification, none
whose views are watched, no reward for one waiting for its re-check before maturing; a daily
sweep, ``platform_credentials_prune``, catches any reading that ended elsewhere), when the
platform says the person removed our authorization (``platform_credential_forget``), when a
refresh is refused for good (they no longer work), and on the person's erasure
(``campaigns.privacy``, through the personal-data registry). A plain login claim keeps none.
"""

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from django.db.models import F, Q
from django.utils import timezone

from campaigns.models import (
    CampaignStatus,
    PlatformCredential,
    Reward,
    RewardStatus,
    VideoStatus,
    VideoSubmission,
    reward_recheck_pending,
)
from campaigns.platforms import AccessTokenRefused, AuthorizationRefused, PlatformUnavailable, TokenGrant, platform_get
from campaigns.selectors import withdrawal_account
from recipients import crypto

logger = logging.getLogger(__name__)
T = TypeVar("T")

# An access token expiring sooner than this is renewed before it is used: a re-check run or a
# views poll must not start with a token that dies half-way.
REFRESH_MARGIN = timedelta(minutes=5)
# A refresher's claim on the row: well past any platform call's timeout (TikTok's is 5 s), so a
# live claim is never taken over; a worker that died holding it frees it by then.
REFRESH_LEASE = timedelta(seconds=30)
# How long a worker that found the claim taken waits for the new pair before it counts as an outage.
REFRESH_WAIT_SECONDS = 10.0
# How long a verified item's views are watched (``campaigns.services.videos``).
WATCH_DAYS = 30


def _grant_fields(grant: TokenGrant) -> dict:
    return {
        "access_ciphertext": crypto.encrypt(grant.access_token),
        "access_expires_at": grant.access_expires_at,
        "refresh_ciphertext": crypto.encrypt(grant.refresh_token) if grant.refresh_token else "",
        "refresh_expires_at": grant.refresh_expires_at if grant.refresh_token else None,
    }


def _credentials(*, platform: str, uid: str):
    return PlatformCredential.objects.filter(platform=platform, account=withdrawal_account(platform=platform, uid=uid))


def platform_credential_store(*, platform: str, uid: str, grant: TokenGrant) -> None:
    """Keep what a login of the account ``uid`` granted, replacing any pair held before (the
    newest login's pair is the one that works). In the caller's transaction; a refresh of the old
    pair under way records nothing over it."""
    if not grant.access_token:
        return
    fields = _grant_fields(grant)
    credential, created = PlatformCredential.objects.get_or_create(
        platform=platform, account=withdrawal_account(platform=platform, uid=uid), defaults=fields
    )
    if not created:
        # Only a pair that outlives the one held: an older session's (another device's, say)
        # would bring back a refresh token already spent, later refused.
        newer = (
            Q(access_expires_at__isnull=True) | Q(access_expires_at__lt=grant.access_expires_at)
            if grant.access_expires_at is not None
            else Q()
        )
        PlatformCredential.objects.filter(newer, pk=credential.pk).update(
            **fields, version=F("version") + 1, refresh_claimed_until=None, updated_at=timezone.now()
        )


def platform_grant_fresh(*, expires_at) -> bool:
    """Is an access token expiring at ``expires_at`` (None: not said) good for more than
    ``REFRESH_MARGIN``? One that is not gets renewed before use; a login's that is not no longer
    proves the account (its pair may have been renewed, and its refresh token spent, already)."""
    return expires_at is None or expires_at > timezone.now() + REFRESH_MARGIN


def platform_token_use(*, platform: str, uid: str, call: Callable[[str], T]) -> T | None:
    """``call(access_token)`` with a usable token of the account ``uid``: the stored one, renewed
    first when it expires within ``REFRESH_MARGIN``, and renewed once more when the platform
    refuses it anyway (``AccessTokenRefused``: it expired or was cut short early). Returns None
    when no token is held for the account (never stored, or dropped): the caller cannot read.

    Raises AuthorizationRefused when the platform refused the refresh for good (revoked, or the
    refresh token expired): the tokens are dropped, the caller decides what it means.
    AccessTokenRefused when even a fresh token is refused; PlatformUnavailable for an outage
    (nothing changed, try again later). Never call it inside a transaction: it calls the platform."""
    credential = _not_refused(_credentials(platform=platform, uid=uid).first())
    if credential is None:
        return None
    if not platform_grant_fresh(expires_at=credential.access_expires_at):
        credential = _not_refused(_refreshed(credential))
        if credential is None:
            return None
    try:
        return call(crypto.decrypt(credential.access_ciphertext))
    except AccessTokenRefused:
        renewed = _not_refused(_refreshed(credential))
        if renewed is None:
            raise
    return call(crypto.decrypt(renewed.access_ciphertext))


def _not_refused(credential: PlatformCredential | None) -> PlatformCredential | None:
    """``credential``, unless it is what a refused renewal left (both tokens blanked, until
    ``platform_credential_refused_clear``): then AuthorizationRefused, for every reader alike, so
    none takes the account for one with no token (and its reward for standing) meanwhile."""
    if credential is not None and not credential.access_ciphertext and not credential.refresh_ciphertext:
        raise AuthorizationRefused(
            f"{credential.platform} refused to renew the authorization.",
            code="authorization_refused",
            details={"ref": f"{credential.account}:refresh:{credential.version}"},
        )
    return credential


def _refreshed(stale: PlatformCredential) -> PlatformCredential | None:
    """The credential after renewing the pair read as ``stale`` (or after another worker renewed
    it); None when no refresh token is held or the tokens were dropped meanwhile."""
    if not stale.refresh_ciphertext:
        return None
    now = timezone.now()
    claimed = (
        PlatformCredential.objects.filter(pk=stale.pk, version=stale.version)
        .filter(Q(refresh_claimed_until__isnull=True) | Q(refresh_claimed_until__lt=now))
        .update(refresh_claimed_until=now + REFRESH_LEASE)
    )
    if not claimed:
        return _renewed_by_another(stale)
    ours = PlatformCredential.objects.filter(pk=stale.pk, version=stale.version)
    try:
        grant = platform_get(stale.platform).token_refresh(refresh_token=crypto.decrypt(stale.refresh_ciphertext))
    except AuthorizationRefused as exc:
        # They no longer work: both tokens blanked at once, the row kept as the refusal's mark
        # until its caller recorded it (``platform_credential_refused_clear``): a reader meanwhile
        # meets the same refusal, not "no token".
        ours.update(access_ciphertext="", refresh_ciphertext="", refresh_expires_at=None, refresh_claimed_until=None)
        exc.details = {**exc.details, "ref": f"{stale.account}:refresh:{stale.version}"}
        logger.info("%s refused to renew credential %s: %s", stale.platform, stale.pk, exc.code)
        raise
    except Exception:
        ours.update(refresh_claimed_until=None)
        raise
    if not grant.refresh_token:  # a platform that does not rotate: the refresh token stays
        grant = TokenGrant(
            access_token=grant.access_token,
            access_expires_at=grant.access_expires_at,
            refresh_token=crypto.decrypt(stale.refresh_ciphertext),
            refresh_expires_at=stale.refresh_expires_at,
        )
    ours.update(**_grant_fields(grant), version=F("version") + 1, refresh_claimed_until=None, updated_at=timezone.now())
    # Recorded, or a new login replaced the pair meanwhile (its pair wins): either way the row holds
    # the freshest pair now; None when the tokens were deleted meanwhile.
    return PlatformCredential.objects.filter(pk=stale.pk).first()


def _renewed_by_another(stale: PlatformCredential) -> PlatformCredential | None:
    """Another worker holds the claim on the pair read as ``stale``: wait for what it records.
    Raises PlatformUnavailable when it takes longer than ``REFRESH_WAIT_SECONDS``."""
    deadline = time.monotonic() + REFRESH_WAIT_SECONDS
    while True:
        current = PlatformCredential.objects.filter(pk=stale.pk).first()
        if current is None:
            return None
        if current.version != stale.version:
            return current
        if current.refresh_claimed_until is None or current.refresh_claimed_until < timezone.now():
            return _refreshed(current)  # the claim was given up (an outage) or its worker died
        if time.monotonic() >= deadline:
            raise PlatformUnavailable(
                f"A renewal of the {stale.platform} token is under way.", code="token_refresh_under_way"
            )
        time.sleep(0.05)


def _watched() -> Q:
    """Submissions still read, younger than ``WATCH_DAYS``: pending verification (retried no
    longer than that), or verified with views still watched (below the threshold, on a campaign
    that is live or may resume: the poll reads active campaigns only)."""
    young = Q(created_at__gte=timezone.now() - timedelta(days=WATCH_DAYS))
    return young & (
        Q(status=VideoStatus.PENDING)
        | Q(
            status=VideoStatus.VERIFIED,
            threshold_done=False,
            campaign__status__in=(CampaignStatus.ACTIVE, CampaignStatus.PAUSED),
        )
    )


def _rechecks_waiting():
    """Rewards for a submitted item still waiting, in review or held, for their re-check."""
    return Reward.objects.filter(
        reward_recheck_pending(),
        status__in=(RewardStatus.REVIEW, RewardStatus.HELD),
        event__evidence__has_key="video_id",
    )


def platform_credential_needed(*, platform: str, uid: str) -> bool:
    """Is a submission of the account ``uid`` still read? Pending verification, its views still
    watched, or a reward for one of its items still waiting for its re-check before maturing."""
    if VideoSubmission.objects.filter(_watched(), platform=platform, social_uid=uid).exists():
        return True
    return _rechecks_waiting().filter(event__social_provider=platform, event__social_uid=uid).exists()


def platform_credential_release(*, platform: str, uid: str) -> bool:
    """Delete the account's tokens unless a submission of it is still read
    (``platform_credential_needed``). Called wherever a reading ends: a submission rejected, its
    views' watch over, a re-check done. The row is read before the need is: a login storing a new
    pair meanwhile (with its new submission, in one transaction) changes its ``version``, and the
    delete, conditional on the version read, leaves it. True when deleted."""
    credential = _credentials(platform=platform, uid=uid).first() if uid else None
    if credential is None or platform_credential_needed(platform=platform, uid=uid):
        return False
    deleted, _ = PlatformCredential.objects.filter(pk=credential.pk, version=credential.version).delete()
    return bool(deleted)


def platform_credentials_prune() -> int:
    """The daily backstop of ``platform_credential_release``: delete every credential no
    submission still needs, however its reading ended (a reward rejected or voided by ops, a
    campaign closed, a watch past ``WATCH_DAYS``). Each row is deleted only at the version read
    before the needs were, as in ``platform_credential_release``. Returns how many went."""
    held = list(PlatformCredential.objects.values_list("pk", "version", "account"))
    accounts = set(VideoSubmission.objects.filter(_watched()).values_list("platform", "social_uid"))
    accounts |= set(_rechecks_waiting().values_list("event__social_provider", "event__social_uid"))
    needed = {withdrawal_account(platform=platform, uid=uid) for platform, uid in accounts}
    pruned = 0
    for pk, version, account in held:
        if account not in needed:
            pruned += PlatformCredential.objects.filter(pk=pk, version=version).delete()[0]
    return pruned


def platform_credential_refused_clear(*, platform: str, uid: str) -> int:
    """Delete the mark a refused renewal left on the account (``_not_refused``), once the refusal
    was recorded; a pair a new login stored meanwhile is kept. Returns how many rows went."""
    deleted, _ = _credentials(platform=platform, uid=uid).filter(access_ciphertext="", refresh_ciphertext="").delete()
    return deleted


def platform_credential_forget(*, platform: str, uid: str, before: datetime | None = None) -> int:
    """Delete the account's tokens whatever they are still needed for: the platform told us the
    person removed our authorization (at ``before``). A pair stored after that moment comes from
    a login since, which authorized us again: it is kept. Returns how many rows went."""
    rows = _credentials(platform=platform, uid=uid)
    if before is not None:
        rows = rows.filter(updated_at__lt=before)
    deleted, _ = rows.delete()
    return deleted
