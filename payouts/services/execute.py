"""Executing payouts on instant and API rails: claim, call the rail outside any transaction,
record. File rails (pain.001) go through ``payouts.services.batches`` instead.

Never pay twice:
* the claim is one conditional UPDATE (``created`` and due → ``submitting``, attempts + 1): two
  workers or a duplicated task cannot both win it;
* the rail is called with the ``end_to_end_id`` stored at creation, and every attempt after the
  first asks the rail for that id's status *before* submitting, so a transfer the rail accepted
  while we crashed or lost the answer is recorded, never sent again;
* the result is recorded in one short transaction that re-checks the claim (status and attempt
  number) under the row lock; a stale claim's result is dropped.
"""

import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from campaigns.models import VopAction
from core.exceptions import InvalidTransition
from payouts import conf
from payouts.models import AttemptOutcome, Payout, PayoutAttempt, PayoutStatus
from payouts.rails import get_rail
from payouts.rails.base import (
    FinalRailError,
    InstantUnreachableError,
    Rail,
    RailPayment,
    RailStatus,
    RetryableRailError,
    StatusResult,
    SubmitResult,
    SubmitStatus,
    VerifyPayeeResult,
)
from payouts.services.payee import payee_ask, payee_check_record, payout_vop_action, payouts_payee_verify
from payouts.services.states import drive, event_record, payout_lock, payouts_execute_enqueue
from payouts.services.test_mode import REFUSED_REASON, payout_rail_refusal
from recipients.normalise import BANK, IBAN, PAYPAL, destination_kind

logger = logging.getLogger(__name__)

_RAIL_TO_TARGET = {
    RailStatus.PENDING: PayoutStatus.SUBMITTED,
    RailStatus.SUBMITTED: PayoutStatus.SUBMITTED,
    RailStatus.SETTLED: PayoutStatus.SETTLED,
    RailStatus.FAILED: PayoutStatus.FAILED,
    RailStatus.RETURNED: PayoutStatus.RETURNED,
}


@dataclass(frozen=True)
class _Claim:
    payout_id: int
    attempt: int


def backoff_seconds(attempt: int) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, so retries of many
    payouts after one outage spread out instead of hitting the rail together."""
    ceiling = min(conf.backoff_max_seconds(), conf.backoff_base_seconds() * 2 ** max(0, attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _is_file_rail(name: str) -> bool:
    return get_rail(name).capabilities().file_based


def payout_execute(*, payout_id: int, now: datetime | None = None) -> str:
    """Claim a due payout and send it. Returns what happened: ``not_claimed`` (someone else has
    it, it is not due, needs approval or review, or is final), ``waits_for_batch`` (file rail),
    else the attempt's outcome. At-least-once safe. Must not run inside a transaction: the rail
    is called between two short transactions of its own."""
    payout = Payout.objects.filter(pk=payout_id).only("rail", "status").first()
    if payout is None or payout.status != PayoutStatus.CREATED:
        return "not_claimed"
    if _is_file_rail(payout.rail):
        Payout.objects.filter(pk=payout_id, queued_at__isnull=False).update(queued_at=None)
        payouts_payee_verify(payout_ids=[payout_id])
        return "waits_for_batch"
    now = now or timezone.now()
    with transaction.atomic(durable=True):
        claimed = (
            Payout.objects.filter(pk=payout_id, status=PayoutStatus.CREATED, needs_review=False, batch__isnull=True)
            .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
            .filter(Q(requires_approval=False) | Q(approved_at__isnull=False))
            .update(
                status=PayoutStatus.SUBMITTING,
                attempts=F("attempts") + 1,
                claimed_at=now,
                queued_at=None,
                updated_at=now,
            )
        )
        if claimed != 1:
            # Not due, waiting for approval or review, or taken: this task no longer waits in the
            # queue, so the sweep may enqueue the payout again once it is due.
            Payout.objects.filter(pk=payout_id, status=PayoutStatus.CREATED).update(queued_at=None)
            return "not_claimed"
        attempts = Payout.objects.values_list("attempts", flat=True).get(pk=payout_id)
        PayoutAttempt.objects.create(payout_id=payout_id, number=attempts, started_at=now, recovered=attempts > 1)
    return _attempt(_Claim(payout_id, attempts), recovered=attempts > 1)


def payouts_recover_stale(*, now: datetime | None = None, deadline: float | None = None) -> int:
    """Re-claim payouts left in ``submitting`` longer than ``PAYOUT_STALE_CLAIM_SECONDS`` (their
    worker died or its record step failed) and finish them by asking the rail first; none is
    started after ``deadline`` (``time.monotonic()``: the next run finds the rest). Returns how
    many were recovered."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=conf.stale_claim_seconds())
    recovered = 0
    for payout_id, attempts, claimed_at in Payout.objects.filter(
        status=PayoutStatus.SUBMITTING, claimed_at__lt=cutoff
    ).values_list("id", "attempts", "claimed_at"):
        if deadline is not None and time.monotonic() >= deadline:
            break
        with transaction.atomic(durable=True):
            won = Payout.objects.filter(
                pk=payout_id, status=PayoutStatus.SUBMITTING, attempts=attempts, claimed_at=claimed_at
            ).update(attempts=F("attempts") + 1, claimed_at=now, updated_at=now)
            if won != 1:
                continue
            # The abandoned attempt gets its final state: it no longer reads "running" in the log.
            PayoutAttempt.objects.filter(payout_id=payout_id, number=attempts, outcome=AttemptOutcome.RUNNING).update(
                finished_at=now, outcome=AttemptOutcome.SUPERSEDED, error_class="stale claim: worker lost"
            )
            PayoutAttempt.objects.create(payout_id=payout_id, number=attempts + 1, started_at=now, recovered=True)
        _attempt(_Claim(payout_id, attempts + 1), recovered=True)
        recovered += 1
    return recovered


def rail_payment_for(payout: Payout, *, iban: str | None = None) -> RailPayment:
    """What the rail sees: the IBAN, a local account's type and fields, or a PayPal account's
    e-mail; ``iban`` saves a decryption when the caller already has it."""
    bank = payout.bank_account
    if bank.kind == PAYPAL:
        return RailPayment(
            end_to_end_id=payout.end_to_end_id,
            amount_minor=payout.amount_minor,
            currency=payout.currency,
            creditor_name=payout.creditor_name,
            creditor_country=payout.creditor_country,
            creditor_email=bank.details().get("email", ""),
            remittance=f"JoyBack {payout.end_to_end_id}",
            debtor_account_code=payout.debtor_account_code,
        )
    local = bank.kind != IBAN
    return RailPayment(
        end_to_end_id=payout.end_to_end_id,
        amount_minor=payout.amount_minor,
        currency=payout.currency,
        creditor_name=payout.creditor_name,
        creditor_country=payout.creditor_country,
        creditor_iban=None if local else iban or bank.iban(),
        creditor_account={"type": bank.kind, **bank.details()} if local else None,
        creditor_bic=bank.bic or None,
        remittance=f"JoyBack {payout.end_to_end_id}",
        debtor_account_code=payout.debtor_account_code,
    )


@dataclass(frozen=True)
class _PayeeCheck:
    vop: VerifyPayeeResult
    action: VopAction


def _attempt(claim: _Claim, *, recovered: bool) -> str:
    """One attempt for a payout this worker has claimed. Every rail call happens here, outside
    any transaction; each branch ends in exactly one ``_record_*`` transaction. The payee is
    checked once, before the first submit; a hold ends the attempt without one."""
    payout = Payout.objects.select_related("bank_account").get(pk=claim.payout_id)
    rail = get_rail(payout.rail)
    check: _PayeeCheck | None = None
    try:
        refusal = payout_rail_refusal(payout, rail)
        if refusal:
            raise FinalRailError(refusal, reason_code=REFUSED_REASON, reason_text=refusal)
        # A rail that finds payments only by its own reference is asked once it gave one; before
        # that, its submit is the look-up (idempotent on end_to_end_id at the rail).
        if recovered and (payout.rail_reference or not rail.finds_by_reference_only):
            known = rail.status(payout.end_to_end_id, rail_reference=payout.rail_reference or None)
            if known.status != RailStatus.UNKNOWN:
                return _record_status(claim, known, via="rail")
        # Verification of Payee checks a name against a bank account: a PayPal account has none.
        if payout.vop_checked_at is None and destination_kind(payout.bank_account.kind) == BANK:
            vop = payee_ask(rail, payout)
            check = _PayeeCheck(vop, payout_vop_action(payout_id=payout.pk, outcome=vop.outcome))
            if check.action != VopAction.PAY:
                return _record_hold(claim, check)
        answer = rail.submit(rail_payment_for(payout))
    except InstantUnreachableError as exc:
        if not payout.fallback_rail:
            return _record_failure(claim, exc, check=check)
        return _to_fallback_rail(claim, rail, payout, exc, check=check)
    except FinalRailError as exc:
        if recovered or _last_outcome_unknown(claim):
            # The rail may still hold the earlier try's transfer (a refusal of a key still being
            # processed looks like any other): failing would pay the rewards again under a new id.
            return _record_review(claim, check=check, reason=f"Refused after an unknown outcome: {exc}")
        return _record_failure(claim, exc, check=check)
    except RetryableRailError as exc:
        return _after_retryable(claim, rail, payout, exc, check=check)
    return _record_rail_result(claim, answer, check=check)


def _last_outcome_unknown(claim: _Claim) -> bool:
    """Whether this payout's previous attempt ended without knowing what the rail did."""
    return PayoutAttempt.objects.filter(
        payout_id=claim.payout_id,
        number=claim.attempt - 1,
        outcome__in=[AttemptOutcome.RETRY, AttemptOutcome.SUPERSEDED],
    ).exists()


def _after_retryable(claim: _Claim, rail: Rail, payout: Payout, exc: RetryableRailError, *, check) -> str:
    if claim.attempt < conf.max_attempts():
        return _record_retry(claim, exc, check=check)
    # Out of attempts. Failing releases the money for a new payout, which is only safe if the
    # rail holds no transfer under this id: ask once more (a rail that cannot be asked without
    # its reference goes to staff instead).
    if rail.finds_by_reference_only and not payout.rail_reference:
        return _record_review(claim, check=check, reason=f"Rail unreachable after {claim.attempt} attempts: {exc}")
    try:
        known = rail.status(payout.end_to_end_id, rail_reference=payout.rail_reference or None)
    except RetryableRailError:
        return _record_review(claim, check=check, reason=f"Rail unreachable after {claim.attempt} attempts: {exc}")
    if known.status != RailStatus.UNKNOWN:
        return _record_status(claim, known, via="rail")
    failure = FinalRailError(
        f"The rail did not take the payment after {claim.attempt} attempts: {exc}",
        reason_code="NARR",
        reason_text=f"The payment rail was unavailable after {claim.attempt} attempts ({exc}).",
    )
    return _record_failure(claim, failure, check=check)


def _to_fallback_rail(claim: _Claim, rail: Rail, payout: Payout, exc: InstantUnreachableError, *, check) -> str:
    """The instant-only rail cannot reach the person's bank: the payout moves to its route's
    fallback rail and runs there with the same end_to_end_id — only once this rail confirms it
    holds nothing under that id, so the money can never leave twice."""
    try:
        known = rail.status(payout.end_to_end_id, rail_reference=payout.rail_reference or None)
    except RetryableRailError as lookup:
        return _after_retryable(claim, rail, payout, lookup, check=check)
    if known.status != RailStatus.UNKNOWN:
        return _record_status(claim, known, via="rail")
    now = timezone.now()
    with transaction.atomic(durable=True):
        locked = _locked_claim(claim)
        if locked is None:
            return AttemptOutcome.SUPERSEDED
        _store_check(locked, check, now)
        previous = locked.rail
        locked.rail, locked.fallback_rail = locked.fallback_rail, ""
        locked.status = PayoutStatus.CREATED
        locked.next_attempt_at = None
        locked.reason_text = f"{previous}: {exc.reason_text}"[:500]
        locked.updated_at = now
        locked.save(update_fields=["rail", "fallback_rail", "status", "next_attempt_at", "reason_text", "updated_at"])
        event_record(
            locked,
            kind="payout.rail_fallback",
            from_status=PayoutStatus.SUBMITTING,
            data={"from": previous, "to": locked.rail, "reason_code": exc.reason_code},
            now=now,
        )
        _finish_attempt(claim, AttemptOutcome.FALLBACK, now=now, exc=exc, response=exc.rail_code)
        payouts_execute_enqueue(payout_ids=[locked.pk], now=now)
    return AttemptOutcome.FALLBACK


def _locked_claim(claim: _Claim) -> Payout | None:
    """The payout, locked, if this worker's claim still holds; else None (someone recovered it)."""
    payout = payout_lock(claim.payout_id)
    if payout.status != PayoutStatus.SUBMITTING or payout.attempts != claim.attempt:
        return None
    return payout


def _finish_attempt(claim: _Claim, outcome: str, *, now, exc=None, response: str = "") -> None:
    PayoutAttempt.objects.filter(payout_id=claim.payout_id, number=claim.attempt).update(
        finished_at=now,
        outcome=outcome,
        error_class=type(exc).__name__ if exc else "",
        reason_code=(getattr(exc, "reason_code", None) or "")[:8],
        reason_text=(getattr(exc, "reason_text", None) or (str(exc) if exc else ""))[:500],
        rail_response=response[:500],
    )


def _store_check(payout: Payout, check: _PayeeCheck | None, now) -> None:
    if check is not None:
        payee_check_record(payout, vop=check.vop, action=check.action, now=now)


def _record_rail_result(claim: _Claim, answer: SubmitResult, *, check=None) -> str:
    """The rail accepted: submitted (payable → in transit), and settled too on an instant rail."""
    now = timezone.now()
    target = PayoutStatus.SETTLED if answer.status == SubmitStatus.SETTLED else PayoutStatus.SUBMITTED
    with transaction.atomic(durable=True):
        payout = _locked_claim(claim)
        if payout is None:
            _finish_attempt(
                claim, AttemptOutcome.SUPERSEDED, now=now, response=f"{answer.status} {answer.rail_reference}"
            )
            return AttemptOutcome.SUPERSEDED
        _store_check(payout, check, now)
        drive(
            payout,
            target=target,
            now=now,
            via="rail",
            rail_reference=answer.rail_reference,
            service_level=answer.service_level or "",
        )
        outcome = AttemptOutcome.SETTLED if target == PayoutStatus.SETTLED else AttemptOutcome.ACCEPTED
        _finish_attempt(claim, outcome, now=now, response=f"{answer.status} {answer.rail_reference}")
    return outcome


def _record_status(claim: _Claim, known: StatusResult, *, via: str) -> str:
    """Recovery: the rail already knows this payment; record what it says."""
    now = timezone.now()
    target = _RAIL_TO_TARGET[known.status]
    with transaction.atomic(durable=True):
        payout = _locked_claim(claim)
        if payout is None:
            _finish_attempt(claim, AttemptOutcome.SUPERSEDED, now=now, response=str(known.status))
            return AttemptOutcome.SUPERSEDED
        drive(
            payout,
            target=target,
            now=now,
            via=via,
            reason_code=known.reason_code or "",
            reason_text=known.reason_text or "",
            rail_reference=known.rail_reference or "",
            service_level=known.service_level or "",
        )
        outcome = {
            PayoutStatus.SETTLED: AttemptOutcome.SETTLED,
            PayoutStatus.SUBMITTED: AttemptOutcome.ACCEPTED,
        }.get(target, AttemptOutcome.FAILED)
        _finish_attempt(claim, outcome, now=now, response=f"status {known.status} {known.rail_reference or ''}")
    return outcome


def _record_failure(claim: _Claim, exc: FinalRailError, *, check=None) -> str:
    now = timezone.now()
    with transaction.atomic(durable=True):
        payout = _locked_claim(claim)
        if payout is None:
            return AttemptOutcome.SUPERSEDED
        _store_check(payout, check, now)
        drive(
            payout,
            target=PayoutStatus.FAILED,
            now=now,
            via="rail",
            reason_code=exc.reason_code,
            reason_text=exc.reason_text,
        )
        _finish_attempt(claim, AttemptOutcome.FAILED, now=now, exc=exc, response=exc.rail_code)
    return AttemptOutcome.FAILED


def _record_retry(claim: _Claim, exc: RetryableRailError, *, check=None) -> str:
    now = timezone.now()
    with transaction.atomic(durable=True):
        payout = _locked_claim(claim)
        if payout is None:
            return AttemptOutcome.SUPERSEDED
        _store_check(payout, check, now)
        payout.status = PayoutStatus.CREATED
        payout.next_attempt_at = now + timedelta(seconds=backoff_seconds(claim.attempt))
        payout.reason_text = f"Attempt {claim.attempt}: {exc}"[:500]
        payout.updated_at = now
        payout.save(update_fields=["status", "next_attempt_at", "reason_text", "updated_at"])
        event_record(
            payout,
            kind="payout.retry",
            from_status=PayoutStatus.SUBMITTING,
            data={"attempt": claim.attempt, "next_attempt_at": payout.next_attempt_at.isoformat()},
            now=now,
        )
        _finish_attempt(claim, AttemptOutcome.RETRY, now=now, exc=exc, response=exc.rail_code)
    return AttemptOutcome.RETRY


def _record_hold(claim: _Claim, check: _PayeeCheck) -> str:
    """The payee check's policy holds the payout (back to ``created``): for staff (review) or for
    the person (ask, block). Nothing was sent."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        payout = _locked_claim(claim)
        if payout is None:
            return AttemptOutcome.SUPERSEDED
        payee_check_record(payout, vop=check.vop, action=check.action, now=now)
        outcome = AttemptOutcome.REVIEW if check.action == VopAction.REVIEW else AttemptOutcome.PAYEE
        _finish_attempt(claim, outcome, now=now, response=payout.review_reason)
    return outcome


def _record_review(claim: _Claim, *, check, reason: str) -> str:
    """Hold the payout (back to ``created``, flagged) until staff release or cancel it."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        payout = _locked_claim(claim)
        if payout is None:
            return AttemptOutcome.SUPERSEDED
        _store_check(payout, check, now)
        payout.status = PayoutStatus.CREATED
        payout.needs_review = True
        payout.review_reason = reason[:200]
        payout.updated_at = now
        payout.save(update_fields=["status", "needs_review", "review_reason", "updated_at"])
        event_record(
            payout, kind="payout.review", from_status=PayoutStatus.SUBMITTING, data={"reason": reason}, now=now
        )
        _finish_attempt(claim, AttemptOutcome.REVIEW, now=now, response=reason)
    return AttemptOutcome.REVIEW


def payouts_poll(*, now: datetime | None = None, limit: int = 500, deadline: float | None = None) -> int:
    """Ask instant/API rails about submitted payouts (until final) and about recently settled ones
    (a return can follow settlement), the longest unchanged first, none after ``deadline``
    (``time.monotonic()``). File rails are not polled: their status comes with the pain.002
    report or the bank statement. Returns how many payouts changed."""
    now = now or timezone.now()
    watch_from = now - timedelta(hours=conf.return_watch_hours())
    candidates = list(
        Payout.objects.filter(
            Q(status=PayoutStatus.SUBMITTED)
            | Q(status=PayoutStatus.SETTLED, settled_via="rail", settled_at__gte=watch_from)
        )
        .order_by("updated_at")
        .values_list("id", "rail", "status", "end_to_end_id", "rail_reference")[:limit]
    )
    changed = 0
    rails: dict[str, Rail] = {}
    for payout_id, rail_name, status, e2e, reference in candidates:
        if deadline is not None and time.monotonic() >= deadline:
            break
        rail = rails.setdefault(rail_name, get_rail(rail_name))
        if rail.capabilities().file_based:
            continue
        try:
            known = rail.status(e2e, rail_reference=reference or None)
        except RetryableRailError:
            logger.info("payout %s: status look-up failed, will ask again", payout_id)
            continue
        except Exception:
            # One payout the rail cannot answer about must not stop the poll of every other one.
            logger.exception("payout %s: status look-up refused; the others are polled", payout_id)
            continue
        target = _RAIL_TO_TARGET.get(known.status)
        if target is None or target == status or (status == PayoutStatus.SETTLED and target == PayoutStatus.SUBMITTED):
            continue  # nothing new: no transaction needed
        changed += int(payout_apply_rail_status(payout_id=payout_id, known=known, expected_status=status, now=now))
    return changed


def payout_apply_rail_status(
    *, payout_id: int, known: StatusResult, expected_status: str | None = None, now: datetime | None = None
) -> bool:
    """Record what a rail reports about a sent payout (a poll, or a verified webhook such as
    Wise's ``transfers#state-change``): settled, failed or returned, with the ledger entries.
    ``expected_status`` makes it conditional (the poller read the row before asking the rail).
    Returns whether the payout changed; a report that does not follow the payout's state (e.g.
    "failed" for a returned payout) is logged and ignored. Runs its own short transaction."""
    now = now or timezone.now()
    target = _RAIL_TO_TARGET.get(known.status)
    if target is None:
        return False
    with transaction.atomic(durable=True):
        payout = payout_lock(payout_id)
        if payout.status not in (PayoutStatus.SUBMITTED, PayoutStatus.SETTLED) or (
            expected_status is not None and payout.status != expected_status
        ):
            return False
        if payout.status == PayoutStatus.SETTLED and target in (PayoutStatus.SUBMITTED, PayoutStatus.SETTLED):
            return False
        try:
            return drive(
                payout,
                target=target,
                now=now,
                via="rail",
                reason_code=known.reason_code or "",
                reason_text=known.reason_text or "",
                rail_reference=known.rail_reference or "",
            )
        except InvalidTransition:
            logger.warning("payout %s: rail says %s, which does not follow %s", payout_id, known.status, payout.status)
            return False


def payouts_enqueue_due(*, now: datetime | None = None, limit: int = 1000) -> int:
    """Enqueue execution for created payouts that are due (new, retry time reached, approved) and
    have no execute task waiting: a payout's task is enqueued once while it waits, however deep the
    queue and however often this runs. One whose task was enqueued more than
    ``PAYOUT_REQUEUE_AFTER_SECONDS`` ago and never claimed it lost the task (it failed before its
    claim) and gets another. File rails wait for a batch instead. Returns how many were enqueued."""
    now = now or timezone.now()
    lost = now - timedelta(seconds=conf.requeue_after_seconds())
    due = (
        Payout.objects.filter(status=PayoutStatus.CREATED, needs_review=False, batch__isnull=True)
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .filter(Q(requires_approval=False) | Q(approved_at__isnull=False))
        .filter(Q(queued_at__isnull=True) | Q(queued_at__lt=lost))
    )
    file_rails = [name for name in due.values_list("rail", flat=True).distinct() if _is_file_rail(name)]
    with transaction.atomic():
        ids = list(
            due.exclude(rail__in=file_rails)
            .select_for_update(skip_locked=True)
            .order_by("id")
            .values_list("id", flat=True)[:limit]
        )
        payouts_execute_enqueue(payout_ids=ids, now=now)
    return len(ids)
