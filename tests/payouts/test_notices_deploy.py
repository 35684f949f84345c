"""The deploy that brought the notices outbox loses no message: a payout the version before it
settled still gets its paid notice, once. (The tasks that version queued were served by shims
until the queues had long drained; they are gone, and an upgrade from before the outbox drains
its queue first — README, Production.)"""

import pytest

from payouts import tasks
from payouts.models import Payout, PayoutStatus
from payouts.services import payout_execute, payouts_create_for_payable
from recipients.models import Notice, NoticeKind
from tests.payouts.payout_fixtures import *  # noqa: F403 - fixtures
from tests.payouts.payout_fixtures import iban, payable_reward

pytestmark = pytest.mark.django_db


def settled_by_the_old_version(brand) -> Payout:
    """A settled payout whose rewards are not marked paid yet and that has no paid notice: what
    the version before the outbox left when its follow-up task was lost."""
    reward = payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    Notice.objects.filter(payout_id=payout_id).delete()
    reward.__class__.objects.filter(pk=reward.pk).update(status="payable")
    return Payout.objects.get(pk=payout_id)


def test_the_tick_tells_a_person_paid_by_the_old_version_once(sandbox, debtor, brand, campaign):
    payout = settled_by_the_old_version(brand)
    assert payout.status == PayoutStatus.SETTLED and not Notice.objects.filter(payout=payout).exists()

    tasks.payouts_tick()
    tasks.payouts_tick()
    tasks.payout_settled_followup_task(payout.pk)  # a follow-up the old version queued, run late

    assert list(Notice.objects.filter(payout=payout).values_list("kind", "key")) == [
        (NoticeKind.PAID, f"payout:{payout.pk}:paid")
    ]
