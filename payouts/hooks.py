"""Reacting at once when money becomes payable or a person gives a new IBAN.

Campaigns and recipients expose no hook of their own, so payouts listens to their rows being
saved. The receivers only enqueue a task after the transaction commits (no domain logic here);
the every-minute ``payouts.tick`` sweep does the same work, so a lost enqueue only costs time.
Controlled by ``PAYOUT_ENQUEUE_ON_PAYABLE`` (see ``payouts.conf``).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from campaigns.models import RewardStatus
from payouts import conf
from payouts.selectors import rewards_awaiting_payout
from recipients.selectors import person_cluster_ids

_paying_now: ContextVar[int | None] = ContextVar("payouts_paying_now", default=None)


@contextmanager
def paying_now(person_id: int) -> Iterator[None]:
    """The caller creates and executes this person's payouts itself: their rewards made payable
    meanwhile need no task of their own (other people's still get one)."""
    token = _paying_now.set(person_id)
    try:
        yield
    finally:
        _paying_now.reset(token)


def _enqueue(func: str, *args) -> None:
    transaction.on_commit(lambda: async_task(func, *args))


def reward_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if not conf.enqueue_on_payable():
        return
    became_payable = instance.status == RewardStatus.PAYABLE and (update_fields is None or "status" in update_fields)
    if became_payable and _paying_now.get() != instance.person_id:
        _enqueue("payouts.tasks.payouts_create_task", instance.person_id)
    elif created and instance.status == RewardStatus.HELD and instance.matures_at <= timezone.now():
        _enqueue("payouts.tasks.reward_ready_task", instance.person_id)


def bank_account_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if not (conf.enqueue_on_payable() and instance.is_current):
        return
    # Most new IBANs arrive with a person's first event: nothing is owed yet, no task needed.
    if rewards_awaiting_payout().filter(person_id__in=person_cluster_ids(person=instance.person)).exists():
        _enqueue("payouts.tasks.payouts_create_task", instance.person_id)
