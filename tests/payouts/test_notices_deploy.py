"""The deploy that brought the notices outbox loses no message: a payout the version before it
settled still gets its paid notice, and the tasks that version queued still tell the person —
once, also when that version had told them already (its message was copied into the outbox)."""

import pytest

from payouts import tasks
from payouts.models import Payout, PayoutStatus
from payouts.services import payout_execute, payout_mark_returned, payouts_create_for_payable
from recipients.models import Notice, NoticeKind, PersonEvent, PersonEventKind
from recipients.models_notices import NoticeStatus
from recipients.services import person_set_iban
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


def test_a_queued_old_payout_notice_is_recorded_once(sandbox, debtor, brand, campaign):
    payout = settled_by_the_old_version(brand)
    payout_mark_returned(payout=payout, reason_code="AC04", source="test")
    Notice.objects.filter(payout=payout).delete()  # the old version recorded none

    tasks.payout_notify_task(payout.pk, "returned")
    tasks.payout_notify_task(payout.pk, "returned")  # delivered twice

    (notice,) = Notice.objects.filter(payout=payout)
    assert (notice.kind, notice.key, notice.data) == (
        "returned",
        f"payout:{payout.pk}:returned:1",
        {"reason_code": "AC04"},
    )


def test_an_old_task_whose_message_was_sent_before_the_deploy_sends_nothing(sandbox, debtor, brand, campaign):
    payout = settled_by_the_old_version(brand)
    payout_mark_returned(payout=payout, reason_code="AC04", source="test")
    Notice.objects.filter(payout=payout).delete()
    # what payouts 0006 copied in: the message the old version sent, under the key it claimed
    Notice.objects.create(
        key=f"payout:{payout.pk}:returned:1",
        person_id=payout.person_id,
        kind=NoticeKind.RETURNED,
        payout=payout,
        status=NoticeStatus.DONE,
        done_at=payout.updated_at,
        next_attempt_at=payout.updated_at,
        created_at=payout.updated_at,
    )

    tasks.payout_notify_task(payout.pk, "returned")  # the same task, delivered again after the deploy

    assert Notice.objects.filter(payout=payout).count() == 1


def test_queued_old_account_and_iban_notices_are_recorded_once(sandbox, debtor, brand, campaign):
    reward = payable_reward(brand, account_iban=iban())
    person = reward.person
    person_set_iban(person=person, iban=iban(), source="api")
    event = PersonEvent.objects.filter(person=person, kind=PersonEventKind.IBAN_SET).latest("id")
    Notice.objects.filter(person=person).delete()

    for _ in range(2):
        tasks.person_notify_account_changed_task(person.pk, event.pk)
        tasks.person_notify_iban_needed_task(person.pk, f"iban_needed:{person.pk}:{reward.pk}")

    notices = sorted(Notice.objects.filter(person=person).values_list("kind", "key", "data"))
    assert notices == [
        (NoticeKind.ACCOUNT_CHANGED, f"account_changed:{event.pk}", {"bank_account": event.detail["bank_account"]}),
        (
            NoticeKind.IBAN_NEEDED,
            f"iban_needed:{person.pk}:{reward.pk}:EUR",
            {"amount_minor": reward.amount_minor, "currency": "EUR"},
        ),
    ]
