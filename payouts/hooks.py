"""Reacting at once when money becomes payable or a person gives a new bank account.

Campaigns and recipients announce those facts as domain hooks (``core.hooks``); these receivers
only enqueue tasks (no domain logic here). ``rewards_changed`` runs in the transaction that
changed the rewards, so their task commits with them (``core.queue``); ``bank_account_changed``
runs after the commit, as it reads what is owed. The every-minute ``payouts.tick`` sweep does the
same work, so a task that is never run only costs time. Controlled by ``PAYOUT_ENQUEUE_ON_PAYABLE``
(see ``payouts.conf``).

A fire's people are enqueued together, ``PEOPLE_PER_TASK`` to a task: a task per reward was a
queue INSERT per reward — for a 1,000-event bulk call, a third of the API worker's time. One more
task than needed is harmless (every task is idempotent); one fewer only waits for the sweep.
"""

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.utils import timezone

from campaigns.models import RewardStatus
from core.queue import enqueue
from payouts import conf
from payouts.selectors import rewards_awaiting_payout
from payouts.services import payouts_waiting_for_person
from recipients.selectors import person_cluster_ids

PEOPLE_PER_TASK = 50
READY_TASK = "payouts.tasks.people_rewards_ready_task"
CREATE_TASK = "payouts.tasks.people_payouts_create_task"
RECHECK_TASK = "payouts.tasks.people_payee_recheck_task"

_paying_now: ContextVar[frozenset[int]] = ContextVar("payouts_paying_now", default=frozenset())


@contextmanager
def paying_now(person_ids: Iterable[int]) -> Iterator[None]:
    """The caller creates and executes these people's payouts itself: their rewards made payable
    meanwhile need no task of their own (other people's still get one)."""
    token = _paying_now.set(frozenset(person_ids))
    try:
        yield
    finally:
        _paying_now.reset(token)


def rewards_changed(rewards: list) -> None:
    """``core.hooks.REWARD_CHANGED``: a payable reward gets its payout, a held one already due
    (no hold period) is matured first."""
    if not conf.enqueue_on_payable():
        return
    now, paying = timezone.now(), _paying_now.get()
    _enqueue(
        {
            CREATE_TASK: {r.person_id for r in rewards if r.status == RewardStatus.PAYABLE} - paying,
            READY_TASK: {r.person_id for r in rewards if r.status == RewardStatus.HELD and r.matures_at <= now},
        }
    )


def bank_account_changed(events: list) -> None:
    """``core.hooks.BANK_ACCOUNT_CHANGED``: money already owed goes to the new account (the
    person's ``account_changed`` notice was recorded with the change), and a payout that waited
    for the person about the old account is replaced (``payouts_payee_recheck``)."""
    if not conf.enqueue_on_payable():
        return
    # Most new accounts arrive with a person's first event: nothing is owed yet, no task needed.
    owed, waiting = set(), set()
    for person in {e.person_id: e.person for e in events}.values():  # a person once, however many changes
        cluster = person_cluster_ids(person=person)
        if payouts_waiting_for_person().filter(person_id__in=cluster).exists():
            waiting.add(person.pk)
        if rewards_awaiting_payout().filter(person_id__in=cluster).exists():
            owed.add(person.pk)
    _enqueue({CREATE_TASK: owed, RECHECK_TASK: waiting})


def _enqueue(people_by_task: dict[str, set[int]]) -> None:
    for func, people in people_by_task.items():
        ids = sorted(people)
        for start in range(0, len(ids), PEOPLE_PER_TASK):
            enqueue(func, ids[start : start + PEOPLE_PER_TASK])
