"""django-q2 tasks. Thin: each calls services; all are idempotent (at-least-once delivery)."""

import logging
import time
from datetime import timedelta

from django.utils import timezone

from campaigns.models import RewardStatus
from campaigns.services import rewards_mature
from core.queue import enqueue, tick
from payouts.hooks import paying_now
from payouts.models import AttemptOutcome, PayoutItem, PayoutStatus
from payouts.services import (
    payout_batches_expire,
    payout_execute,
    payout_rewards_mark_paid,
    payouts_create_for_payable,
    payouts_enqueue_due,
    payouts_payee_recheck_moved,
    payouts_poll,
    payouts_recover_stale,
    rewards_unclaimed_process,
)
from payouts.services.states import finishing_here
from recipients.models import Person

TICK_SCHEDULE_NAME = "payouts.tick"
BATCH_EXPIRY_SCHEDULE_NAME = "payouts.batches_expire"
UNCLAIMED_SCHEDULE_NAME = "payouts.unclaimed"
UNCLAIMED_TASK = "payouts.tasks.rewards_unclaimed_task"
# The tick starts no step after this: far below the task timeout, so copies never pile up.
TICK_BUDGET_SECONDS = 10.0
# What the tick leaves to the task a change enqueued: that task should have run by then.
SWEEP_GRACE = timedelta(minutes=2)
logger = logging.getLogger(__name__)


def payout_execute_task(payout_id: int) -> str:
    return _execute_and_finish(payout_id)


def _execute_and_finish(payout_id: int) -> str:
    """Send the payout and, when the rail settled it at once, mark its rewards paid here: one task
    for the whole way, rather than a follow-up task per payout behind the queue."""
    with finishing_here():
        outcome = payout_execute(payout_id=payout_id)
    if outcome == AttemptOutcome.SETTLED:
        payout_rewards_mark_paid(payout_id=payout_id)
    return outcome


def payouts_create_task(person_id: int, *, here: bool = True) -> int:
    """Money became payable (or an IBAN arrived) for this person: create their payout and run it
    here, without another trip through the queue (``here=False``: enqueue its execution).
    Returns how many payouts were created."""
    created = payouts_create_for_payable(person=Person.objects.get(pk=person_id), enqueue=not here).created
    if here:
        for payout_id in created:
            _execute_and_finish(payout_id)
    return len(created)


def people_rewards_ready_task(person_ids: list[int]) -> int:
    """Rewards with no hold period were accepted: mature these people's rewards now rather than
    at the next sweep (only theirs: each such task maturing everyone's made every one of them
    fight over a hot campaign's budget row, past the task timeout), then create and run their
    payouts here. Returns how many payouts were created."""
    with paying_now(person_ids):
        rewards_mature(person_ids=person_ids)
    return people_payouts_create_task(person_ids)


def people_payouts_create_task(person_ids: list[int]) -> int:
    """``payouts_create_task`` for one person (paid here, no second trip through the queue). For
    several, their payouts are created here and each one's execution is enqueued: up to fifty
    bank calls in a row would outlive the task's timeout, and other workers can take them. One
    person's failure does not hold up the others; it is raised at the end (the task shows failed,
    the sweep tries that person again)."""
    created, failures = 0, []
    for person_id in person_ids:
        try:
            created += payouts_create_task(person_id, here=len(person_ids) == 1)
        except Exception as exc:
            logger.exception("payouts for person %s failed", person_id)
            failures.append(exc)
    if failures:
        raise failures[0]
    return created


def people_payee_recheck_task(person_ids: list[int]) -> None:
    """Their account changed while a payout waited for them: that payout is replaced by one to
    the new account, checked again (``payouts_payee_recheck_moved``)."""
    for person in Person.objects.filter(pk__in=person_ids):
        payouts_payee_recheck_moved(person=person)


def payout_settled_followup_task(payout_id: int) -> None:
    """After settlement the rewards become paid (the person's notice was recorded with the
    settlement itself; the every-minute tick finishes this too if the task is lost)."""
    payout_rewards_mark_paid(payout_id=payout_id)


def payouts_settled_followup_task(payout_ids: list[int]) -> None:
    """The follow-up of a statement that settled many payouts at once; each one is idempotent."""
    for payout_id in payout_ids:
        payout_settled_followup_task(payout_id)


@tick
def payouts_tick() -> dict[str, int]:
    """Every minute, on the ticks cluster (payouts 0013): recover stale claims first, finish settled
    payouts whose rewards are not yet paid, then recheck payouts waiting for a person whose account
    changed, create payouts for payable rewards, enqueue due ones, and poll rails. It is
    the safety net of the tasks those changes enqueued, so it leaves them their time
    (``SWEEP_GRACE``) rather than race them, and it starts nothing after ``TICK_BUDGET_SECONDS``:
    the next minute goes on, and no run comes near the task timeout however large the backlog."""
    deadline = time.monotonic() + TICK_BUDGET_SECONDS
    before = timezone.now() - SWEEP_GRACE
    recovered = payouts_recover_stale(deadline=deadline)
    # Database work before the rail calls: settled payouts whose rewards are still payable (their
    # worker died between the two) are finished even when polling would use up the budget.
    unfinished = (
        PayoutItem.objects.filter(
            active=True,
            payout__status=PayoutStatus.SETTLED,
            payout__settled_at__lt=before,
            reward__status=RewardStatus.PAYABLE,
        )
        .values_list("payout_id", flat=True)
        .distinct()[:500]
    )
    finished = 0
    for payout_id in unfinished:
        if time.monotonic() >= deadline:
            break
        payout_rewards_mark_paid(payout_id=payout_id)
        finished += 1
    rechecked = payouts_payee_recheck_moved(deadline=deadline)
    created = len(payouts_create_for_payable(payable_before=before, deadline=deadline).created)
    enqueued = payouts_enqueue_due()
    polled = payouts_poll(deadline=deadline)
    return {
        "recovered": recovered,
        "rechecked": rechecked,
        "created": created,
        "enqueued": enqueued,
        "polled": polled,
        "finished": finished,
    }


def payout_batches_expire_task() -> str:
    """Daily (migration 0004): pain.001 files never downloaded within ``PAYOUT_BATCH_EXPIRE_DAYS``
    expire and their payouts are paid again (``payout_batches_expire``)."""
    expired = payout_batches_expire()
    return f"{len(expired)} payout batches expired"


def rewards_unclaimed_task(after_id: int = 0) -> str:
    """Daily (migration 0007): remind people who have not given an account, and return the money
    of those whose claim window is over (``rewards_unclaimed_process``); what its time budget did
    not reach goes to a follow-up task."""
    result = rewards_unclaimed_process(after_id=after_id)
    if not result.done:
        enqueue(UNCLAIMED_TASK, result.last_id)
    return f"{result.reminded} reminded, {result.expired} expired"
