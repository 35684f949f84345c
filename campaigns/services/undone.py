"""Actions undone during their hold (DESIGN §5.3, §7): a reward for a social action is voided when
the person takes the action back before the reward matures, and the money goes back to the
campaign budget.

Two ways in, one way out:

* ``rewards_recheck`` (every minute, ``campaigns.tasks``): a held reward for a first-party action
  (``RECHECKED_TRIGGERS``) whose hold is over is looked at again through its platform
  (``Platform.action_recheck``: the video still there and public, still past the view threshold,
  the TikTok authorization not revoked, the WhatsApp opt-in not withdrawn) before
  ``rewards_mature`` may commit it (``reward_recheck_pending``).
* ``action_withdraw``: a platform tells us at once (TikTok's ``authorization.removed`` webhook,
  a WhatsApp STOP: ``tiktok_authorization_revoke``, ``whatsapp_optin_withdraw``). It is recorded
  (``ActionWithdrawal``, which the re-check also reads, so a void missed here still happens before
  maturing) and the account's pending rewards for that platform's actions are voided. A platform
  refusing for good to renew a stored authorization (``authorization_refused_record``: OAuth's
  ``invalid_grant`` on a refresh) is *not* such a notice: a revocation looks like that, but so
  does our own worker dying between the platform rotating the pair and our saving it. So it voids
  nothing: the account's held rewards that a revocation would void go to review
  (``authorization_unrenewable``), and ops decide.

Either way the void is ``reward_void(undone=…)``: the hold released (the budget has the money
again), the reason code on the reward and its ``reward.voided`` audit row (API, portal, webhook),
the person's ``action_undone`` notice, in one transaction. Only what the campaign's undo settings
name (``POLICY_FIELDS``) voids. A reward already payable or paid is not taken back: the hold was
the promise, and money committed or sent is a matter for ops — it gets a
``reward.undone_noted`` audit row instead.

A platform that does not answer (timeout, 5xx: ``PlatformUnavailable``) never voids. The reward
stays held and is tried again with doubling waits (``RECHECK_BACKOFF``); after
``RECHECK_MAX_FAILURES`` failures (about an hour) it goes to review with the reason
``recheck_unavailable``, so money is never committed for an action nobody could check, and
never held for ever either: ops approve or reject. One reward's failure never stops the others.
Platforms are called outside any transaction; each result is one short transaction.
"""

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from campaigns.models import (
    UNDO_POLICY_FIELDS,
    ActionWithdrawal,
    Reward,
    RewardEvent,
    RewardStatus,
    UndoneReason,
    VideoSubmission,
    reward_recheck_pending,
)
from campaigns.platforms import ActionCheck, AuthorizationRefused, PlatformUnavailable, platform_get
from campaigns.selectors import withdrawal_account
from campaigns.services.credentials import platform_credential_refused_clear, platform_credential_release
from campaigns.services.rewards import _audit, _locked, reward_void
from campaigns.triggers import trigger_spec, trigger_values
from core.exceptions import InvalidTransition
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from recipients.models import Identifier, IdentifierKind, Person

logger = logging.getLogger(__name__)

# Each reason voids only where the campaign's setting of that name is on.
POLICY_FIELDS = {
    UndoneReason.CONTENT_REMOVED: "undo_void_content_removed",
    UndoneReason.VIEWS_DROPPED: "undo_void_views_dropped",
    UndoneReason.AUTHORIZATION_REVOKED: "undo_void_authorization_revoked",
    UndoneReason.OPTIN_WITHDRAWN: "undo_void_optin_withdrawn",
}
if set(POLICY_FIELDS.values()) != set(UNDO_POLICY_FIELDS) or set(POLICY_FIELDS) != set(UndoneReason.values):
    raise ImportError("Every undone reason needs its campaign setting (UNDO_POLICY_FIELDS).")
# Plain words for the audit row and the admin (the brand reads the code and its label).
REASON_TEXT = {
    UndoneReason.CONTENT_REMOVED: "Action undone: the video was deleted or made private",
    UndoneReason.VIEWS_DROPPED: "Action undone: the video's views fell below the threshold",
    UndoneReason.AUTHORIZATION_REVOKED: "Action undone: the TikTok authorization was revoked",
    UndoneReason.OPTIN_WITHDRAWN: "Action undone: the WhatsApp opt-in was withdrawn",
}
NOTED_KIND = "reward.undone_noted"
RECHECK_MAX_FAILURES = 6
RECHECK_BACKOFF = timedelta(minutes=1)  # doubled after each failure: 1, 2, 4 … 32 minutes
RECHECK_REVIEW_REASON = "recheck_unavailable"
# The platform refused for good to renew the account's stored authorization (see the docstring).
REFRESH_REVIEW_REASON = "authorization_unrenewable"
# A re-check run starts no platform call after this: far below the task timeout.
RECHECK_BUDGET_SECONDS = 20.0


@dataclass
class WithdrawOutcome:
    recorded: bool  # False: this notice was recorded before (a redelivery)
    voided: list[int] = field(default_factory=list)
    noted: list[int] = field(default_factory=list)  # payable or paid: noted, not voided


@dataclass
class RecheckOutcome:
    standing: list[int] = field(default_factory=list)
    voided: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)  # left held, tried again later
    to_review: list[int] = field(default_factory=list)


def undo_voids(*, campaign, reason: str) -> bool:
    """Does ``campaign`` void a reward whose action was undone for ``reason``?"""
    return bool(getattr(campaign, POLICY_FIELDS[reason]))


# --- the platforms' notices ----------------------------------------------------------------------


def _account_people(*, platform: str, uid: str) -> list[int]:
    """Every person row (any brand, merged rows too) reached through the account ``uid``."""
    if platform == "whatsapp":
        found = Identifier.objects.filter(kind=IdentifierKind.WHATSAPP, value=uid)
    else:
        found = Identifier.objects.filter(kind=IdentifierKind.SOCIAL, value=f"{platform}:{uid}")
    ids = set(found.values_list("person_id", flat=True))
    if ids:
        ids |= set(Person.objects.filter(Q(merged_into__in=ids)).values_list("pk", flat=True))
    return sorted(ids)


def _account_rewards(*, platform: str, uid: str, before: datetime):
    """The account's rewards for that platform's first-party actions done at or before ``before``."""
    if platform == "whatsapp":
        same_account = Q(event__whatsapp=uid)
    else:
        same_account = Q(event__social_provider=platform, event__social_uid=uid)
    return (
        Reward.objects.filter(
            same_account,
            person_id__in=_account_people(platform=platform, uid=uid),
            rule__trigger__in=trigger_values(platform=platform, first_party=True),
            # Platforms stamp their notices to the second: one in the action's second counts as after it.
            event__occurred_at__lt=before.replace(microsecond=0) + timedelta(seconds=1),
        )
        .select_related("campaign")
        .order_by("id")
    )


def action_withdraw(
    *, platform: str, uid: str, kind: str, occurred_at: datetime, ref: str, data: dict | None = None
) -> WithdrawOutcome:
    """The account ``uid`` on ``platform`` took back (``kind``, an ``UndoneReason``) at
    ``occurred_at`` what it had given: record it (``ActionWithdrawal``, unique by ``ref``, the
    platform's reference of the notice), then void each of the account's rewards for that
    platform's first-party actions done before it that is still reserved (review or held), where
    the campaign's undo settings say so; note (``reward.undone_noted``) the ones already payable
    or paid. A reward earned after the withdrawal (a new opt-in) is untouched.

    Idempotent: the same ``ref`` records nothing new, a voided reward stays voided, a note is
    written once per reward and ``ref``. Transactions: the record, then one per reward; a crash in
    between leaves the rest to the re-check before maturing, which reads the record. Raises
    nothing of its own (a reward that changed status meanwhile is skipped)."""
    with transaction.atomic(durable=True):
        _, recorded = ActionWithdrawal.objects.get_or_create(
            platform=platform,
            kind=kind,
            ref=ref[:200],
            defaults={
                "account": withdrawal_account(platform=platform, uid=uid),
                "occurred_at": occurred_at,
                "data": data or {},
            },
        )
    outcome = WithdrawOutcome(recorded=recorded)
    for reward in _account_rewards(platform=platform, uid=uid, before=occurred_at):
        if not undo_voids(campaign=reward.campaign, reason=kind):
            continue
        if reward.status in (RewardStatus.REVIEW, RewardStatus.HELD):
            try:
                reward_void(reward=reward, reason=REASON_TEXT[kind], undone=kind)
            except InvalidTransition:
                continue  # it matured or was decided meanwhile: the note below is for the next replay
            outcome.voided.append(reward.pk)
        elif reward.status in (RewardStatus.PAYABLE, RewardStatus.PAID) and _note(reward=reward, kind=kind, ref=ref):
            outcome.noted.append(reward.pk)
    logger.info(
        "action withdrawn on %s (%s): %d voided, %d noted", platform, kind, len(outcome.voided), len(outcome.noted)
    )
    return outcome


def authorization_refused_record(*, platform: str, uid: str, refused: AuthorizationRefused) -> list[int]:
    """The platform refused for good to renew the account's stored authorization (revoked, or
    its refresh token expired or lost: ``campaigns.services.credentials``). Not proof of a
    revocation (see the module docstring), so nothing is voided: each held reward of the account
    that ``undo_void_authorization_revoked`` would void goes to review (``REFRESH_REVIEW_REASON``,
    the refusal in its audit row). Idempotent: a reward no longer held is left as it is. Returns
    the rewards sent to review."""
    now = timezone.now()
    sent = []
    for reward in _account_rewards(platform=platform, uid=uid, before=now):
        if reward.status != RewardStatus.HELD:
            continue
        if not undo_voids(campaign=reward.campaign, reason=UndoneReason.AUTHORIZATION_REVOKED):
            continue
        data = {"error": refused.code, "ref": refused.details.get("ref", "")}
        if _to_review(reward, now=now, reason=REFRESH_REVIEW_REASON, data=data):
            sent.append(reward.pk)
    platform_credential_refused_clear(platform=platform, uid=uid)  # recorded: the mark may go
    logger.info("%s refused to renew an authorization: %d rewards to review", platform, len(sent))
    return sent


def _note(*, reward: Reward, kind: str, ref: str) -> bool:
    """An audit row saying the action was undone after the money was committed. Once per
    (reward, ref). True when written."""
    with transaction.atomic(durable=True):
        reward = _locked(reward)
        if RewardEvent.objects.filter(reward=reward, kind=NOTED_KIND, data__ref=ref[:200]).exists():
            return False
        hook_fire(AUDIT_ROWS_WRITTEN)
        RewardEvent.objects.create(
            reward=reward,
            kind=NOTED_KIND,
            from_status=reward.status,
            to_status=reward.status,
            reason=f"{REASON_TEXT[kind]} (after it matured: not voided)"[:200],
            data={"undone": kind, "ref": ref[:200]},
            created_at=timezone.now(),
        )
    return True


# --- the re-check before maturing ----------------------------------------------------------------


def _due(now: datetime):
    return (
        Reward.objects.filter(reward_recheck_pending(), status=RewardStatus.HELD, matures_at__lte=now)
        .filter(Q(recheck_after__isnull=True) | Q(recheck_after__lte=now))
        .select_related("event", "rule", "campaign")
        .order_by("matures_at", "id")
    )


def _submission(reward: Reward) -> VideoSubmission | None:
    spec = trigger_spec(reward.rule.trigger)
    video_id = (reward.event.evidence or {}).get("video_id", "")
    if not (spec and spec.content and video_id):
        return None
    return VideoSubmission.objects.filter(
        campaign_id=reward.campaign_id, platform=spec.platform, video_id=video_id
    ).first()


def _action(reward: Reward, submission: VideoSubmission | None) -> ActionCheck:
    spec = trigger_spec(reward.rule.trigger)
    event = reward.event
    if spec.platform == "whatsapp":
        uid = event.whatsapp
    else:
        uid = event.social_uid if event.social_provider == spec.platform else ""
    return ActionCheck(
        trigger=spec.value,
        uid=uid or (submission.social_uid if submission else ""),
        occurred_at=event.occurred_at,
        item_id=submission.video_id if submission else "",
        view_threshold=reward.rule.view_threshold if spec.content == "views" else None,
    )


def _standing(reward: Reward, *, now: datetime) -> bool:
    return bool(
        Reward.objects.filter(pk=reward.pk, status=RewardStatus.HELD, rechecked_at__isnull=True).update(
            rechecked_at=now, recheck_after=None
        )
    )


def _token_drop(submission: VideoSubmission | None) -> None:
    """The account's key to the person's videos is dropped once nothing of theirs is left to read."""
    if submission is not None:
        platform_credential_release(platform=submission.platform, uid=submission.social_uid)


def _failed(reward: Reward, *, now: datetime, error: str) -> bool:
    """A transient failure: the reward stays held and is tried again after a doubling wait; the
    last allowed failure sends it to review. True when it went to review."""
    failures = reward.recheck_failures + 1
    if failures < RECHECK_MAX_FAILURES:
        Reward.objects.filter(pk=reward.pk, status=RewardStatus.HELD).update(
            recheck_failures=failures, recheck_after=now + RECHECK_BACKOFF * 2 ** (failures - 1)
        )
        return False
    return _to_review(
        reward,
        now=now,
        reason=RECHECK_REVIEW_REASON,
        data={"error": error[:200], "failures": failures},
        failures=failures,
    )


def _to_review(reward: Reward, *, now: datetime, reason: str, data: dict, failures: int | None = None) -> bool:
    """A held reward whose action nobody could check goes to review with ``reason`` (ops approve
    or reject it). One durable transaction; False when it was no longer held and unchecked."""
    with transaction.atomic(durable=True):
        reward = _locked(reward)
        if reward.status != RewardStatus.HELD or reward.rechecked_at is not None:
            return False
        reward.status = RewardStatus.REVIEW
        if failures is not None:
            reward.recheck_failures = failures
        reward.review_reasons = [*reward.review_reasons, reason]
        reward.updated_at = now
        reward.save(update_fields=["status", "recheck_failures", "review_reasons", "updated_at"])
        _audit(reward, kind="reward.review", from_status=RewardStatus.HELD, reason=reason, data=data, now=now)
    return True


def reward_recheck(*, reward: Reward, now: datetime | None = None) -> str:
    """Re-check one held reward's action through its platform and record the answer: ``standing``
    (it may mature), ``voided`` (undone, and the campaign voids for that reason), ``failed`` (the
    platform did not answer: held, tried again later) or ``review`` (it did not answer too often).
    The platform is called outside any transaction. Raises nothing for the platform's failures."""
    now = now or timezone.now()
    campaign = reward.campaign
    submission = _submission(reward)
    if not any(undo_voids(campaign=campaign, reason=r) for r in POLICY_FIELDS):
        reasons: list[str] = []  # the campaign voids for nothing: no need to ask
    else:
        spec = trigger_spec(reward.rule.trigger)
        try:
            reasons = platform_get(spec.platform).action_recheck(action=_action(reward, submission))
        except PlatformUnavailable as exc:
            logger.warning("re-check of reward %s: %s unavailable (%s)", reward.pk, spec.platform, exc.code)
            return "review" if _failed(reward, now=now, error=str(exc)) else "failed"
    voiding = [r for r in reasons if undo_voids(campaign=campaign, reason=r)]
    if voiding:
        try:
            reward_void(reward=reward, reason=REASON_TEXT[voiding[0]], undone=voiding[0])
        except InvalidTransition:
            # Decided meanwhile (ops, or a platform notice that voided it first).
            reward.refresh_from_db(fields=["status", "undone_reason"])
            _token_drop(submission)
            return "voided" if reward.status == RewardStatus.VOIDED and reward.undone_reason else "skipped"
        _token_drop(submission)
        return "voided"
    standing = _standing(reward, now=now)
    _token_drop(submission)
    if standing:
        return "standing"
    # Decided meanwhile: sent to review by a refused renewal met during this re-check, or by ops.
    reward.refresh_from_db(fields=["status"])
    return "review" if reward.status == RewardStatus.REVIEW else "skipped"


def rewards_recheck(
    *, now: datetime | None = None, limit: int = 200, budget_seconds: float = RECHECK_BUDGET_SECONDS
) -> RecheckOutcome:
    """Re-check the held rewards whose hold is over and whose action waits for it (oldest due
    first, at most ``limit``, none started after ``budget_seconds``), each on its own
    (``reward_recheck``): one reward's failure — a platform down, a bug — never stops the others.
    Safe to run concurrently and repeatedly. Returns what became of each."""
    now = now or timezone.now()
    deadline = time.monotonic() + budget_seconds
    outcome = RecheckOutcome()
    lists = {
        "standing": outcome.standing,
        "voided": outcome.voided,
        "failed": outcome.failed,
        "review": outcome.to_review,
    }
    for reward in list(_due(now)[:limit]):
        if time.monotonic() >= deadline:
            break
        try:
            result = reward_recheck(reward=reward, now=now)
        except Exception as exc:
            # Not the platform's transient failure: our bug or bad data. Logged, counted as a failed
            # attempt (bounded, then review) and the run goes on with the others.
            logger.exception("re-check of reward %s failed", reward.pk)
            result = "review" if _failed(reward, now=now, error=exc.__class__.__name__) else "failed"
        if result in lists:
            lists[result].append(reward.pk)
    return outcome
