"""Rewards after ingestion: review decisions, maturing, voids, claw-backs, paid, expired.

Every transition is lock-then-check on the reward row (``SELECT … FOR UPDATE``), then the ledger
operation, the status update and a RewardEvent, in one durable transaction. Lock order: reward
row → ledger accounts (the ledger's ascending-id rule) → rule counters; nothing here but
``reward_expire`` takes the campaign tally, so these never wait on ingestion for longer than one
reservation (``campaigns.locks``). ``reward_expire`` takes the person's root row, then the tally
(with its budget account), then the reward row: the classes in ingestion's order.

Ledger flows (DESIGN §4):
* maturing commits the hold: budget −(amount+fee) → ``recipient:<person>:payable`` +amount and
  ``platform:fees`` +fee;
* void / reject releases the hold (the money is available on the budget again);
* claw-back reverses the commit entry (the money goes back to the budget and the fee is returned);
* expiry (unclaimed money) moves the amount from payable back to the budget, or to the brand's
  funds once the campaign is closed; the fee stays earned.
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import BigIntegerField, Case, F, Value, When
from django.utils import timezone

from campaigns.evaluation import counter_periods, periods_for
from campaigns.locks import lock_campaign_tally
from campaigns.models import (
    Campaign,
    CampaignStatus,
    Reward,
    RewardEvent,
    RewardStatus,
    RuleCounter,
    UndoneReason,
    reward_recheck_pending,
)
from campaigns.services.brands import brand_funds_account
from core.bulk import rows_insert
from core.exceptions import ApplicationError, InvalidInput, InvalidTransition, NotFound
from core.hooks import AUDIT_ROWS_WRITTEN, REWARD_CHANGED, hook_fire
from recipients.models import NoticeKind
from recipients.selectors import person_current_bank_account
from recipients.services import person_root_lock
from recipients.services.notices import NoticeNew, notices_record
from reconciliation.models import Account, AccountKind
from reconciliation.services import (
    HoldCommit,
    Leg,
    account_get_or_create,
    ledger_entry_post,
    ledger_entry_reverse,
    ledger_hold_void,
    ledger_holds_commit,
)
from reconciliation.test_books import trial_fees_account

logger = logging.getLogger(__name__)

# A maturing run starts no batch after this long: far below the 60 s task timeout (Q_CLUSTER).
MATURE_BUDGET_SECONDS = 10.0


@dataclass
class BulkOutcome:
    done: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)  # reward id → error code


def recipient_payable_account(*, person_id: int, currency: str):
    return account_get_or_create(
        code=f"recipient:{person_id}:payable:{currency}",
        name=f"Payable to person {person_id} {currency}",
        kind=AccountKind.LIABILITY,
        currency=currency,
        owner_type="person",
        owner_id=str(person_id),
    )


def trial_campaign_ids(*, campaign_ids: set[int]) -> set[int]:
    """Which of ``campaign_ids`` belong to a test tenant: their fees go to the test books."""
    if not campaign_ids:
        return set()
    return set(Campaign.objects.filter(pk__in=campaign_ids, brand__livemode=False).values_list("pk", flat=True))


def platform_fees_account(*, currency: str):
    return account_get_or_create(
        code=f"platform:fees:{currency}", name=f"Platform fees {currency}", kind=AccountKind.INCOME, currency=currency
    )


def _locked(reward: Reward) -> Reward:
    """The reward row, after its campaign's tally and budget account (``core.locks``: 4 before 5):
    a transition may post to the budget, and ``reward_expire`` holds the tally while it waits for
    the reward — taken the other way round, the two deadlock."""
    # A reward never changes campaign, so its id may be read before any lock.
    campaign_id = reward.campaign_id or Reward.objects.values_list("campaign_id", flat=True).get(pk=reward.pk)
    lock_campaign_tally(campaign_id=campaign_id)
    return Reward.objects.select_for_update(of=("self",)).select_related("hold", "campaign", "rule").get(pk=reward.pk)


def _audit(
    reward: Reward, *, kind: str, from_status: str, actor=None, reason: str = "", data=None, now=None, announce=True
) -> None:
    """The audit row of a status change, and its announcement (``core.hooks``). Without
    ``announce`` the caller fires ``REWARD_CHANGED`` itself, once for its whole batch: its
    in-transaction receiver enqueues a task per fire."""
    if announce:
        hook_fire(REWARD_CHANGED, reward)
    hook_fire(AUDIT_ROWS_WRITTEN)
    RewardEvent.objects.create(
        reward=reward,
        kind=kind,
        from_status=from_status,
        to_status=reward.status,
        actor=actor,
        reason=reason[:200],
        data=data or {},
        created_at=now or timezone.now(),
    )


def _require(reward: Reward, allowed: tuple[str, ...], action: str) -> None:
    if reward.status not in allowed:
        raise InvalidTransition(
            f"A {reward.status} reward cannot be {action}.",
            details={"reward_id": reward.pk, "status": reward.status},
        )


def _counters_release(reward: Reward) -> None:
    """The reward no longer counts against the rule's campaign-wide caps."""
    # Every period it may have counted in, whatever caps the rule has now.
    periods = counter_periods(periods_for(reward.occurred_at, reward.campaign.tz).day_key)
    RuleCounter.objects.filter(rule_id=reward.rule_id, period__in=periods, rewards_count__gt=0).update(
        rewards_count=F("rewards_count") - 1
    )


def _commit(rewards: list[Reward], *, now: datetime, actor=None, announce: bool = True) -> None:
    """held → payable for all of ``rewards`` (each locked by the caller), all or nothing: each
    hold is committed to its person's payable and the platform's fees, with one key per reward
    (``reward:<id>:commit``). The payable accounts are found (or opened) first; then ONE ledger
    call commits the holds (``ledger_holds_commit``), so each campaign's budget row is locked
    once, after everything else is ready, until the commit a few statements later. Each reward
    keeps its own audit row. Raises what ``ledger_holds_commit`` raises; nothing written."""
    payables = _payable_accounts(rewards)
    test_campaigns = trial_campaign_ids(campaign_ids={r.campaign_id for r in rewards if r.fee_minor})
    fees = {
        (currency, test): trial_fees_account(currency=currency) if test else platform_fees_account(currency=currency)
        for currency, test in {(r.currency, r.campaign_id in test_campaigns) for r in rewards if r.fee_minor}
    }
    # ONE ledger call for the whole batch, whatever its campaigns: it locks every hold, then every
    # account (budgets, payables, fees) once, in ascending id. A call per campaign locked budget B
    # after campaign A's payable and fee accounts, a cycle with a batch locking B then those.
    results = ledger_holds_commit(
        commits=[
            _hold_commit(
                reward,
                budget=reward.campaign.budget_account,
                payable=payables[reward.pk],
                fees=fees.get((reward.currency, reward.campaign_id in test_campaigns)),
            )
            for reward in rewards
        ]
    )
    entries = {reward.pk: result.entry.pk for reward, result in zip(rewards, results, strict=True)}
    previous = {reward.pk: reward.status for reward in rewards}
    Reward.objects.filter(pk__in=entries).update(
        status=RewardStatus.PAYABLE,
        updated_at=now,
        commit_entry_id=Case(
            *(When(pk=pk, then=Value(e)) for pk, e in entries.items()), output_field=BigIntegerField()
        ),
    )
    for reward in rewards:
        reward.status = RewardStatus.PAYABLE
        reward.commit_entry_id = entries[reward.pk]
        reward.updated_at = now
    if announce:
        hook_fire(REWARD_CHANGED, *rewards)
    hook_fire(AUDIT_ROWS_WRITTEN)
    rows_insert(
        RewardEvent,
        [
            RewardEvent(
                reward=reward,
                kind="reward.payable",
                from_status=previous[reward.pk],
                to_status=reward.status,
                actor=actor,
                data={"entry_id": entries[reward.pk]},
                created_at=now,
            )
            for reward in rewards
        ],
        keys=False,
    )


def _hold_commit(reward: Reward, *, budget: Account, payable: Account, fees: Account | None) -> HoldCommit:
    """budget −(amount+fee) → the person's payable +amount and the platform's fees +fee."""
    legs = [Leg.debit(budget, reward.amount_minor + reward.fee_minor), Leg.credit(payable, reward.amount_minor)]
    if reward.fee_minor:
        legs.append(Leg.credit(fees, reward.fee_minor))
    return HoldCommit(
        hold=reward.hold,
        idempotency_key=f"reward:{reward.pk}:commit",
        kind="reward_payable",
        legs=legs,
        memo=f"Reward #{reward.pk} payable",
        reference_type="reward",
        reference_id=str(reward.pk),
    )


def _payable_accounts(rewards: list[Reward]) -> dict[int, Account]:
    """Each reward's ``recipient:<person>:payable`` account (reward id → account): the existing
    ones in one read, the missing ones opened."""
    codes = {reward.pk: f"recipient:{reward.person_id}:payable:{reward.currency}" for reward in rewards}
    found = {a.code: a for a in Account.objects.filter(code__in=set(codes.values()), kind=AccountKind.LIABILITY)}
    by_reward = {}
    for reward in rewards:
        account = found.get(codes[reward.pk])  # the code names the currency
        if account is None:
            account = found[codes[reward.pk]] = recipient_payable_account(
                person_id=reward.person_id, currency=reward.currency
            )
        by_reward[reward.pk] = account
    return by_reward


def reward_approve(*, reward: Reward, actor) -> Reward:
    """review → held (→ payable at once if its hold period is already over). The money was
    reserved at ingestion, so approval cannot fail for lack of budget. Raises InvalidTransition."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        reward = _locked(reward)
        _require(reward, (RewardStatus.REVIEW,), "approved")
        reward.status = RewardStatus.HELD
        reward.decided_by = actor
        reward.decided_at = now
        reward.updated_at = now
        reward.save(update_fields=["status", "decided_by", "decided_at", "updated_at"])
        _audit(reward, kind="reward.approved", from_status=RewardStatus.REVIEW, actor=actor, now=now)
        if reward.matures_at <= now:
            _commit([reward], now=now, actor=actor)
    return reward


def _brand_reviewable(*, brand, reward_id: int) -> Reward:
    """The reward, if it belongs to a campaign of ``brand`` that lets the brand decide its
    reviews; NotFound otherwise — the same answer for another brand's reward as for none."""
    reward = (
        Reward.objects.select_related("campaign")
        .filter(pk=reward_id, campaign__brand=brand, campaign__brand_reviews=True)
        .first()
    )
    if reward is None:
        raise NotFound("No such reward.", code="reward_not_found")
    return reward


def reward_brand_approve(*, brand, reward_id: int, actor) -> Reward:
    """The brand's approval of its reward in review (``reward_approve``), allowed only on a
    campaign with ``brand_reviews``. A reward this brand's people approved before is returned
    unchanged (a replayed form changes nothing). Raises NotFound (another brand's reward, or a
    campaign our reviewers decide), InvalidTransition (decided otherwise meanwhile)."""
    reward = _brand_reviewable(brand=brand, reward_id=reward_id)
    if (
        reward.status != RewardStatus.REVIEW
        and RewardEvent.objects.filter(reward=reward, kind="reward.approved").exists()
    ):
        return reward
    return reward_approve(reward=reward, actor=actor)


def reward_brand_reject(*, brand, reward_id: int, actor, reason: str) -> Reward:
    """The brand's rejection of its reward in review (``reward_reject``: voided, the
    reservation back on the budget), only on a campaign with ``brand_reviews``. A voided reward
    is returned unchanged. Raises NotFound, InvalidInput (``reason_required``),
    InvalidTransition (approved meanwhile)."""
    reward = _brand_reviewable(brand=brand, reward_id=reward_id)
    return reward_reject(reward=reward, actor=actor, reason=reason)


def reward_reject(*, reward: Reward, actor, reason: str) -> Reward:
    """review → voided with the reviewer's reason; the reservation returns to the budget."""
    if not reason.strip():
        raise InvalidInput("Say why the reward is rejected.", code="reason_required")
    return _void(reward=reward, actor=actor, reason=reason, allowed=(RewardStatus.REVIEW,), kind="reward.rejected")


def reward_void(*, reward: Reward, actor=None, reason: str, undone: str = "") -> Reward:
    """review | held → voided (a refunded purchase, an undone action): the hold is released and
    the money is available on the budget again. Voiding a voided reward is a no-op.
    A payable reward needs ``reward_claw_back``. Raises InvalidTransition.

    ``undone`` (an ``UndoneReason``) voids it because the person undid the action: the code is
    kept on the reward and its audit row (the brand's API, portal and ``reward.voided`` webhook
    show it), and the person is told, in the same transaction (``action_undone`` notice; not on
    WhatsApp when that opt-in is what they withdrew)."""
    return _void(
        reward=reward,
        actor=actor,
        reason=reason,
        allowed=(RewardStatus.REVIEW, RewardStatus.HELD),
        kind="reward.voided",
        undone=undone,
    )


def _void(*, reward: Reward, actor, reason: str, allowed: tuple[str, ...], kind: str, undone: str = "") -> Reward:
    now = timezone.now()
    with transaction.atomic(durable=True):
        reward = _locked(reward)
        if reward.status == RewardStatus.VOIDED:
            return reward
        _require(reward, allowed, "voided")
        previous = reward.status
        ledger_hold_void(hold=reward.hold)
        _counters_release(reward)
        reward.status = RewardStatus.VOIDED
        reward.decision_reason = reason[:200]
        reward.updated_at = now
        fields = ["status", "decision_reason", "updated_at"]
        if previous == RewardStatus.REVIEW:
            reward.decided_by, reward.decided_at = actor, now
            fields += ["decided_by", "decided_at"]
        if undone:
            reward.undone_reason = undone
            fields.append("undone_reason")
        reward.save(update_fields=fields)
        _audit(
            reward,
            kind=kind,
            from_status=previous,
            actor=actor,
            reason=reason,
            data={"undone": undone} if undone else None,
            now=now,
        )
        if undone:
            # Someone who sent STOP on WhatsApp is not written to there again.
            channels = ["email"] if undone == UndoneReason.OPTIN_WITHDRAWN else []
            notices_record(
                notices=[
                    NoticeNew(
                        person_id=reward.person_id,
                        kind=NoticeKind.ACTION_UNDONE,
                        key=f"reward:{reward.pk}:undone",
                        reward_id=reward.pk,
                        data={"undone": undone, **({"channels": channels} if channels else {})},
                    )
                ],
                now=now,
            )
    return reward


def reward_reduce(
    *, reward: Reward, amount_minor: int, fee_minor: int, key: str, actor=None, reason: str, note: dict | None = None
) -> Reward:
    """review | held → the same status with a smaller amount and fee (a partial refund while the
    money is still only reserved): maturing then commits the smaller sum and releases the rest of
    the hold (``ledger_holds_commit`` takes between 1 and the hold). Idempotent by ``key`` (kept
    on the audit row with ``note``): a reduction with a key seen before on this reward changes
    nothing.
    Raises InvalidInput (not smaller, not positive), InvalidTransition (another status)."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        reward = _locked(reward)
        if RewardEvent.objects.filter(reward=reward, kind="reward.reduced", data__key=key).exists():
            return reward
        _require(reward, (RewardStatus.REVIEW, RewardStatus.HELD), "reduced")
        if not 0 < amount_minor <= reward.amount_minor or not 0 <= fee_minor <= reward.fee_minor:
            raise InvalidInput("A reduction keeps a positive, not larger amount.", code="invalid_reduction")
        before = (reward.amount_minor, reward.fee_minor)
        reward.amount_minor, reward.fee_minor, reward.updated_at = amount_minor, fee_minor, now
        reward.save(update_fields=["amount_minor", "fee_minor", "updated_at"])
        _audit(
            reward,
            kind="reward.reduced",
            from_status=reward.status,
            actor=actor,
            reason=reason,
            data={
                **(note or {}),
                "key": key,
                "amount_before": before[0],
                "fee_before": before[1],
                "amount_minor": amount_minor,
            },
            now=now,
        )
    return reward


def reward_claw_back(*, reward: Reward, actor=None, reason: str) -> Reward:
    """payable → clawed_back: the commit entry is reversed (payable and fee back to the budget;
    on to the brand's funds when the campaign is closed, as an expiry's).
    A paid reward raises InvalidTransition: recovering money already sent is a payouts matter.
    So does a payable reward in a live payout (``reward_in_payout``): the payout would go on to
    send money the claw-back took back — cancel the payout first, or wait for it to fail or
    come back. Payout creation locks the rewards it takes, so the two cannot interleave."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        reward = _locked(reward)
        _require(reward, (RewardStatus.PAYABLE,), "clawed back")
        if reward.payout_items.filter(active=True).exists():
            raise InvalidTransition(
                "This reward is being paid out: cancel its payout first, or wait until it fails or comes back.",
                code="reward_in_payout",
            )
        result = ledger_entry_reverse(
            entry=reward.commit_entry, idempotency_key=f"reward:{reward.pk}:clawback", memo=f"Claw-back: {reason}"[:500]
        )
        if reward.campaign.status == CampaignStatus.CLOSED:
            # A closed campaign's budget takes nothing back and lets nothing out: what the
            # claw-back returned to it goes on to the brand's funds, in the same transaction.
            back = reward.amount_minor + reward.fee_minor
            ledger_entry_post(
                idempotency_key=f"reward:{reward.pk}:clawback:closed",
                kind="reward_clawed_back_closed",
                legs=[
                    Leg.debit(Account.objects.get(pk=reward.campaign.budget_account_id), back),
                    Leg.credit(brand_funds_account(brand=reward.campaign.brand, currency=reward.currency), back),
                ],
                memo=f"Reward #{reward.pk} clawed back after its campaign closed: back to the brand",
                reference_type="reward",
                reference_id=str(reward.pk),
            )
        _counters_release(reward)
        reward.status = RewardStatus.CLAWED_BACK
        reward.clawback_entry = result.entry
        reward.decision_reason = reason[:200]
        reward.updated_at = now
        reward.save(update_fields=["status", "clawback_entry", "decision_reason", "updated_at"])
        _audit(reward, kind="reward.clawed_back", from_status=RewardStatus.PAYABLE, actor=actor, reason=reason, now=now)
    return reward


def reward_expire(*, reward: Reward, account_seen: int | None, now: datetime | None = None) -> Reward:
    """payable (or paid, its payout came back) → expired: the person gave no usable account
    within the campaign's ``claim_window_days`` (the payouts app decides that and reminds them
    first). One durable transaction: one balanced entry (key ``reward:<id>:expire``) moving the
    amount from ``recipient:<person>:payable`` to the campaign budget, or to the brand's funds
    once the campaign is closed; the status; the ``reward.expired`` RewardEvent (a webhook); the
    person's ``expired`` notice. The fee is not returned: the action was rewarded.

    ``account_seen`` is the id of the person's current bank account the caller found unusable
    (None: they had none). The person's root row is locked first — the lock giving an account
    takes — so either the account comes first and is seen here (InvalidTransition
    ``account_given``, nothing written: the payout sweep pays them), or this comes first and the
    reward is no longer payable when payouts look. Never both.

    Raises InvalidTransition: another status, a reward in a live payout (``reward_in_payout``),
    ``account_given``. An expired reward is returned unchanged (a replay)."""
    now = now or timezone.now()
    with transaction.atomic(durable=True):
        person_root_lock(person=reward.person)
        # _locked takes the tally first: the campaign it then reads shows a close that committed first.
        reward = _locked(reward)
        closed = reward.campaign.status == CampaignStatus.CLOSED
        if reward.status == RewardStatus.EXPIRED:
            return reward
        _require(reward, (RewardStatus.PAYABLE, RewardStatus.PAID), "expired")
        if reward.payout_items.filter(active=True).exists():
            raise InvalidTransition("This reward is being paid out.", code="reward_in_payout")
        current = person_current_bank_account(person=reward.person)
        if (current.pk if current else None) != account_seen:
            raise InvalidTransition("The person has given an account meanwhile.", code="account_given")
        if closed:
            back_to = brand_funds_account(brand=reward.campaign.brand, currency=reward.currency)
        else:
            back_to = Account.objects.get(pk=reward.campaign.budget_account_id)
        payable = recipient_payable_account(person_id=reward.person_id, currency=reward.currency)
        entry = ledger_entry_post(
            idempotency_key=f"reward:{reward.pk}:expire",
            kind="reward_expired",
            legs=[Leg.debit(payable, reward.amount_minor), Leg.credit(back_to, reward.amount_minor)],
            memo=f"Reward #{reward.pk} unclaimed: back to the {'brand' if closed else 'campaign'}",
            reference_type="reward",
            reference_id=str(reward.pk),
        ).entry
        previous = reward.status
        reward.status = RewardStatus.EXPIRED
        reward.expiry_entry = entry
        reward.decision_reason = "unclaimed"
        reward.updated_at = now
        reward.save(update_fields=["status", "expiry_entry", "decision_reason", "updated_at"])
        _audit(
            reward,
            kind="reward.expired",
            from_status=previous,
            reason="unclaimed",
            data={"entry_id": entry.pk, "returned_to": "brand_funds" if closed else "campaign_budget"},
            now=now,
        )
        notices_record(
            notices=[
                NoticeNew(
                    person_id=reward.person_id,
                    kind=NoticeKind.EXPIRED,
                    key=f"reward:{reward.pk}:expired",
                    reward_id=reward.pk,
                )
            ]
        )
    return reward


def reward_mark_paid(*, reward_ids: list[int], payout_ref: str) -> int:
    """payable → paid for all of ``reward_ids`` (the payouts app moved the money). All or nothing:
    InvalidTransition if any is not payable (replaying with the same ``payout_ref`` is a no-op
    for the ones already paid by it). Returns how many changed."""
    if not payout_ref:
        raise InvalidInput("A payout reference is required.", code="payout_ref_required")
    now = timezone.now()
    with transaction.atomic(durable=True):
        rewards = list(Reward.objects.select_for_update().filter(pk__in=reward_ids).order_by("pk"))
        if len(rewards) != len(set(reward_ids)):
            raise InvalidInput("Unknown reward ids.", code="not_found")
        paid: list[Reward] = []
        for reward in rewards:
            if reward.status == RewardStatus.PAID and reward.payout_ref == payout_ref:
                continue
            _require(reward, (RewardStatus.PAYABLE,), "marked paid")
            reward.status = RewardStatus.PAID
            reward.payout_ref = payout_ref
            reward.updated_at = now
            reward.save(update_fields=["status", "payout_ref", "updated_at"])
            _audit(
                reward,
                kind="reward.paid",
                from_status=RewardStatus.PAYABLE,
                data={"payout_ref": payout_ref},
                now=now,
                announce=False,
            )
            paid.append(reward)
        if paid:
            hook_fire(REWARD_CHANGED, *paid)
    return len(paid)


def rewards_mature(
    *,
    now: datetime | None = None,
    person_ids: Sequence[int] | None = None,
    batch_size: int = 200,
    budget_seconds: float = MATURE_BUDGET_SECONDS,
) -> int:
    """Make held rewards whose ``matures_at`` has passed payable, once an action to re-check was
    found still standing (``reward_recheck_pending``) — every such reward, or only
    those of ``person_ids`` — in durable transactions of up to ``batch_size`` (``_commit``: one
    ledger call per batch, so a hot campaign's budget row is locked briefly, once a batch).
    Safe to run concurrently and repeatedly (rows are claimed with SKIP LOCKED and re-checked; the
    commit is idempotent by key). A reward the books refuse (an inactive account, say) is logged
    and skipped: its batch falls back to one savepoint per reward, so one bad row never blocks
    the others. Bounded: no batch starts after ``budget_seconds``, far below the task timeout;
    what is left waits for the next run (the sweep runs every minute). Returns how many matured."""
    now = now or timezone.now()
    deadline = time.monotonic() + budget_seconds
    total = 0
    failed: set[int] = set()
    # An action still to re-check (``campaigns.services.undone``) waits for it.
    due = Reward.objects.filter(status=RewardStatus.HELD, matures_at__lte=now).exclude(reward_recheck_pending())
    if person_ids is not None:
        due = due.filter(person_id__in=sorted(set(person_ids)))
    while True:
        with transaction.atomic(durable=True):
            rewards = list(
                due.select_for_update(skip_locked=True, of=("self",))
                .select_related("hold", "campaign__budget_account")
                .exclude(pk__in=failed)
                .order_by("id")[:batch_size]
            )
            matured = _commit_or_skip(rewards, now=now, failed=failed)
            if matured:
                hook_fire(REWARD_CHANGED, *matured)
            total += len(matured)
        if len(rewards) < batch_size or time.monotonic() >= deadline:
            return total


def _commit_or_skip(rewards: list[Reward], *, now: datetime, failed: set[int]) -> list[Reward]:
    """``_commit`` the batch in one savepoint; if the books refuse it, each reward in a savepoint
    of its own, the refused ones logged and added to ``failed``. Returns the ones committed."""
    if not rewards:
        return []
    try:
        with transaction.atomic():
            _commit(rewards, now=now, announce=False)
    except ApplicationError:
        pass
    else:
        return rewards
    matured = []
    for reward in rewards:
        try:
            with transaction.atomic():
                _commit([reward], now=now, announce=False)
        except ApplicationError as exc:
            failed.add(reward.pk)
            logger.error("reward did not mature", extra={"reward_id": reward.pk, "code": exc.code})
        else:
            matured.append(reward)
    return matured


def _bulk(reward_ids: list[int], action) -> BulkOutcome:
    outcome = BulkOutcome()
    for reward_id in reward_ids:
        try:
            action(Reward(pk=reward_id))
        except (ApplicationError, Reward.DoesNotExist) as exc:
            outcome.failed[reward_id] = getattr(exc, "code", "not_found")
        else:
            outcome.done.append(reward_id)
    return outcome


def rewards_approve_bulk(*, reward_ids: list[int], actor) -> BulkOutcome:
    """Approve each reward in its own transaction; one that cannot be approved is reported."""
    return _bulk(reward_ids, lambda r: reward_approve(reward=r, actor=actor))


def rewards_reject_bulk(*, reward_ids: list[int], actor, reason: str) -> BulkOutcome:
    return _bulk(reward_ids, lambda r: reward_reject(reward=r, actor=actor, reason=reason))
