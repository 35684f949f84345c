"""Reacting at once when money becomes payable or a person gives a new IBAN, and telling a
person whose payout account changed.

Campaigns and recipients expose no hook of their own, so payouts listens to their rows being
saved. The receivers only enqueue a task after the transaction commits (no domain logic here);
the every-minute ``payouts.tick`` sweep does the same work, so a lost enqueue only costs time.
Controlled by ``PAYOUT_ENQUEUE_ON_PAYABLE`` (see ``payouts.conf``).

A transaction's people are enqueued together, ``PEOPLE_PER_TASK`` to a task, by one callback at
its commit: a task per reward was a queue INSERT (its own commit) per reward — for a 1,000-event
bulk call, a third of the API worker's time. One more task than needed is harmless (every task is
idempotent); one fewer only waits for the sweep.
"""

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import transaction
from django.utils import timezone

from campaigns.models import RewardStatus
from core.queue import enqueue, enqueue_on_commit
from payouts import conf
from payouts.selectors import rewards_awaiting_payout
from recipients.models import PersonEventKind
from recipients.selectors import person_cluster_ids

logger = logging.getLogger(__name__)

PEOPLE_PER_TASK = 50
READY_TASK = "payouts.tasks.people_rewards_ready_task"
CREATE_TASK = "payouts.tasks.people_payouts_create_task"

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


def _enqueue(func: str, person_id: int) -> None:
    """Have ``func`` run for ``person_id`` once the current transaction commits, together with
    the transaction's other people."""
    conn = transaction.get_connection()
    if not conn.in_atomic_block:
        _enqueue_now({func: {person_id}})
        return
    # The batch belongs to this transaction's list of on-commit callbacks: Django replaces that
    # list when a transaction ends (and when a savepoint rolls back), so a batch whose callback
    # was discarded is never added to — the next row starts a new one.
    batch = getattr(conn, "_payouts_batch", None)
    if batch is None or batch[0] is not conn.run_on_commit:
        pending: dict[str, set[int]] = {}
        # robust: a failed enqueue is logged, never raised into a caller whose data committed.
        transaction.on_commit(lambda: _enqueue_now(pending), robust=True)
        batch = conn._payouts_batch = (conn.run_on_commit, pending)
    batch[1].setdefault(func, set()).add(person_id)


def _enqueue_now(pending: dict[str, set[int]]) -> None:
    for func, people in pending.items():
        ids = sorted(people)
        for start in range(0, len(ids), PEOPLE_PER_TASK):
            chunk = ids[start : start + PEOPLE_PER_TASK]
            try:
                enqueue(func, chunk)  # core.queue: the connection stays open
            except Exception:  # one lost task must not lose the others' (the sweep has it)
                logger.exception("could not enqueue %s for %d people", func, len(chunk))


def reward_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if not conf.enqueue_on_payable():
        return
    became_payable = instance.status == RewardStatus.PAYABLE and (update_fields is None or "status" in update_fields)
    if became_payable and instance.person_id not in _paying_now.get():
        _enqueue(CREATE_TASK, instance.person_id)
    elif created and instance.status == RewardStatus.HELD and instance.matures_at <= timezone.now():
        _enqueue(READY_TASK, instance.person_id)


def bank_account_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if not (conf.enqueue_on_payable() and instance.is_current):
        return
    # Most new IBANs arrive with a person's first event: nothing is owed yet, no task needed.
    if rewards_awaiting_payout().filter(person_id__in=person_cluster_ids(person=instance.person)).exists():
        _enqueue(CREATE_TASK, instance.person_id)


def person_event_saved(sender, instance, created, **kwargs) -> None:
    # Someone who did not make the change must learn of it before the money moves: the notice
    # goes to the channels the person gave (a task after commit, never inside the transaction).
    if created and instance.kind == PersonEventKind.IBAN_SET and instance.detail.get("previous_bank_account"):
        enqueue_on_commit("payouts.tasks.person_notify_account_changed_task", instance.person_id, instance.pk)
