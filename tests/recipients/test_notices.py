"""The notice outbox (issue 19: "a worker killed right after a payout settles can lose the
person's 'paid' notice for good"): a notice is recorded in the transaction of the change it
announces, then sent at least once per channel by the task or the sweep, whoever comes first,
de-duplicated by a claim per channel, retried with backoff on transient errors, failed for good
on final ones, and never blocks the others."""

import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.db import connections, transaction
from django.utils import timezone

from payouts.models import Payout
from payouts.services import payout_execute, payouts_create_for_payable
from payouts.services.states import payout_lock, step_settled, step_submitted
from payouts.tasks import payouts_tick
from recipients.models import Notice, NoticeDelivery, NoticeKind
from recipients.models_notices import DeliveryState
from recipients.services import notices as notices_service
from recipients.services import person_erase
from recipients.services.notices import NoticeNew, notices_record, notices_send, notices_send_due
from recipients.tasks import notices_send_task
from recipients.whatsapp_cloud import FakeWhatsAppSender, WhatsAppSendError
from tests.payouts.payout_fixtures import *  # noqa: F403 - fixtures
from tests.payouts.payout_fixtures import iban, payable_reward

NUMBER = "+39 347 123 4567"


def settled(brand, *, email: str = "giulia@example.com", whatsapp: str = NUMBER) -> Payout:
    """A person paid: their reward payable, its payout executed (the sandbox settles at once).
    Tasks enqueued on commit do not run here: the worker that would send the notice is 'dead'."""
    payable_reward(brand, account_iban=iban(), email=email, whatsapp=whatsapp)
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    return Payout.objects.get(pk=payout_id)


def time_passes() -> None:
    """What was waiting for a later attempt is due now."""
    NoticeDelivery.objects.filter(status="queued").update(next_attempt_at=timezone.now())
    Notice.objects.filter(status="pending").update(next_attempt_at=timezone.now())


def told(channel: str | None = None) -> int:
    sent = NoticeDelivery.objects.filter(status=DeliveryState.SENT)
    return (sent.filter(channel=channel) if channel else sent).count()


@pytest.fixture
def flaky_whatsapp(monkeypatch):
    """The fake sender, failing with the given errors first (one per call)."""
    errors: list[WhatsAppSendError] = []
    send = FakeWhatsAppSender.send_template

    def maybe_fail(self, message):
        if errors:
            raise errors.pop(0)
        return send(self, message)

    monkeypatch.setattr(FakeWhatsAppSender, "send_template", maybe_fail)
    return errors


def test_the_paid_notice_survives_a_worker_killed_between_the_commit_and_the_send(sandbox, debtor, brand, campaign):
    # given a payout settled and committed, and the task that would tell the person never ran
    payout = settled(brand)
    notice = Notice.objects.get(payout=payout)
    assert (notice.kind, notice.status) == (NoticeKind.PAID, "pending") and mail.outbox == []
    # when the every-minute tick finishes the rewards and the sweep runs
    payouts_tick()
    notices_send_due()
    # then the person is told exactly once on each channel, and the late task changes nothing
    assert [m.to for m in mail.outbox] == [["giulia@example.com"]]
    assert [m.template for m in FakeWhatsAppSender.sent] == ["payout_paid"]
    notices_send_task([notice.key])
    notices_send_due()
    assert len(mail.outbox) == 1 and len(FakeWhatsAppSender.sent) == 1
    notice.refresh_from_db()
    assert notice.status == "done" and notice.done_at is not None and told() == 2


def test_a_settlement_rolled_back_records_no_notice(sandbox, debtor, brand, campaign):
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    with transaction.atomic():
        step_submitted(payout_lock(payout_id), now=timezone.now())
    with pytest.raises(RuntimeError), transaction.atomic():
        step_settled(payout_lock(payout_id), now=timezone.now(), via="test")
        assert Notice.objects.filter(payout_id=payout_id).exists()
        raise RuntimeError("the worker dies before the commit")
    assert not Notice.objects.filter(payout_id=payout_id).exists()
    assert notices_send_due().sent == 0 and mail.outbox == []


def test_recording_the_same_notice_twice_keeps_one(sandbox, debtor, brand, campaign):
    reward = payable_reward(brand)
    new = NoticeNew(person_id=reward.person_id, kind=NoticeKind.CLAIM_LINK, key="k:1", reward_id=reward.pk)
    with transaction.atomic():
        notices_record(notices=[new, new])
    with transaction.atomic():
        notices_record(notices=[new])
    assert Notice.objects.filter(key="k:1").count() == 1
    assert notices_send_due().sent == 1


def test_a_transient_whatsapp_error_is_retried_with_backoff_and_the_email_is_not_sent_again(
    sandbox, debtor, brand, campaign, flaky_whatsapp, settings
):
    settings.NOTICE_BACKOFF_BASE_SECONDS = 60
    flaky_whatsapp.append(WhatsAppSendError("(#130429) Rate limit hit", code="130429", retryable=True))
    payout = settled(brand)
    notices_send_due()
    whatsapp = NoticeDelivery.objects.get(notice__payout=payout, channel="whatsapp")
    assert (whatsapp.status, whatsapp.attempts, whatsapp.error_code) == ("queued", 1, "130429")
    assert whatsapp.next_attempt_at > timezone.now() + timedelta(seconds=50)
    # not yet due: nothing happens
    assert notices_send_due().sent == 0
    notice = Notice.objects.get(payout=payout)
    assert notice.status == "pending" and notice.next_attempt_at == whatsapp.next_attempt_at
    # due: WhatsApp goes, the e-mail (sent the first time) does not go again
    time_passes()
    assert notices_send_due().sent == 1
    assert len(mail.outbox) == 1 and [m.template for m in FakeWhatsAppSender.sent] == ["payout_paid"]
    whatsapp.refresh_from_db()
    assert (whatsapp.status, whatsapp.attempts, whatsapp.error_code) == ("sent", 2, "")
    assert Notice.objects.get(pk=notice.pk).status == "done"


def test_a_final_refusal_fails_that_channel_only(sandbox, debtor, brand, campaign, flaky_whatsapp):
    flaky_whatsapp.append(WhatsAppSendError("(#131026) Message undeliverable", code="131026", retryable=False))
    payout = settled(brand)
    notices_send_due()
    deliveries = dict(NoticeDelivery.objects.filter(notice__payout=payout).values_list("channel", "status"))
    assert deliveries == {"email": "sent", "whatsapp": "failed"}
    assert Notice.objects.get(payout=payout).status == "done"
    assert notices_send_due().sent == 0 and FakeWhatsAppSender.sent == []


def test_after_the_last_attempt_a_transient_error_is_final(sandbox, debtor, brand, campaign, flaky_whatsapp, settings):
    settings.NOTICE_MAX_ATTEMPTS = 2
    flaky_whatsapp.extend(WhatsAppSendError("down", code="131000", retryable=True) for _ in range(3))
    payout = settled(brand)
    for _ in range(3):
        notices_send_due()
        time_passes()
    whatsapp = NoticeDelivery.objects.get(notice__payout=payout, channel="whatsapp")
    assert (whatsapp.status, whatsapp.attempts) == ("failed", 2) and FakeWhatsAppSender.sent == []
    assert Notice.objects.get(payout=payout).status == "done"


def test_a_claim_whose_worker_died_is_sent_again_once_stale(sandbox, debtor, brand, campaign):
    payout = settled(brand)
    notice = Notice.objects.get(payout=payout)
    # a worker claimed the WhatsApp delivery, called the provider (maybe) and died
    claimed_at = timezone.now() - timedelta(minutes=1)
    NoticeDelivery.objects.create(
        notice=notice, channel="whatsapp", status="sending", attempts=1, claimed_at=claimed_at
    )
    notices_send_due()
    assert FakeWhatsAppSender.sent == [] and len(mail.outbox) == 1  # the claim is fresh: left alone
    notice.refresh_from_db()
    assert notice.status == "pending" and notice.next_attempt_at > timezone.now()
    # five minutes later the claim is stale: the message goes (again: at least once)
    NoticeDelivery.objects.filter(notice=notice, channel="whatsapp").update(
        claimed_at=claimed_at - timedelta(minutes=5)
    )
    time_passes()
    notices_send_due()
    assert [m.template for m in FakeWhatsAppSender.sent] == ["payout_paid"] and len(mail.outbox) == 1
    assert NoticeDelivery.objects.get(notice=notice, channel="whatsapp").attempts == 2


def test_an_erased_person_is_told_nothing(sandbox, debtor, brand, campaign):
    payout = settled(brand)
    person_erase(person=payout.person)
    notices_send_due()
    assert mail.outbox == [] and FakeWhatsAppSender.sent == []
    assert Notice.objects.get(payout=payout).status == "done" and not NoticeDelivery.objects.exists()


def test_a_channel_the_person_no_longer_has_fails_instead_of_waiting_for_ever(
    sandbox, debtor, brand, campaign, flaky_whatsapp
):
    flaky_whatsapp.append(WhatsAppSendError("(#130429) Rate limit hit", code="130429", retryable=True))
    payout = settled(brand)
    notices_send_due()  # the e-mail goes, WhatsApp waits for its next attempt
    person_erase(person=payout.person)
    time_passes()
    notices_send_due()
    whatsapp = NoticeDelivery.objects.get(notice__payout=payout, channel="whatsapp")
    assert (whatsapp.status, whatsapp.error_code) == ("failed", "no_address") and FakeWhatsAppSender.sent == []
    assert Notice.objects.get(payout=payout).status == "done"


def test_one_notice_that_cannot_be_worded_does_not_hold_up_the_others(
    sandbox, debtor, brand, campaign, monkeypatch, settings
):
    first, second = settled(brand), settled(brand, email="marco@example.com", whatsapp="+39 347 765 4321")
    render = notices_service._renderer[0]

    def broken_for_first(notice, person):
        if notice.payout_id == first.pk:
            raise KeyError("amount")
        return render(notice, person)

    monkeypatch.setattr(notices_service, "_renderer", [broken_for_first])
    notices_send_due()
    assert Notice.objects.get(payout=second).status == "done"
    stuck = Notice.objects.get(payout=first)
    assert stuck.status == "pending" and stuck.next_attempt_at > timezone.now()
    assert len(FakeWhatsAppSender.sent) == 1
    # it is not retried for ever: after the last attempt its channels have failed
    settings.NOTICE_MAX_ATTEMPTS = 2
    time_passes()
    notices_send_due()
    stuck.refresh_from_db()
    assert stuck.status == "done" and set(stuck.deliveries.values_list("status", "error_code")) == {
        ("failed", "render_error")
    }


def test_the_send_task_hands_what_its_budget_did_not_reach_to_a_follow_up(
    sandbox, debtor, brand, campaign, monkeypatch
):
    from recipients import tasks

    keys = [
        Notice.objects.get(payout=settled(brand, email=f"p{n}@example.com", whatsapp=f"+39 347 000 000{n}")).key
        for n in range(3)
    ]
    follow_ups = []
    monkeypatch.setattr(tasks, "enqueue", lambda func, left: follow_ups.append((func, left)))
    monkeypatch.setattr(tasks, "notices_send", lambda keys: notices_send(keys=keys, budget_seconds=0))
    assert notices_send_task(keys) == 0
    assert follow_ups == [("recipients.tasks.notices_send_task", keys)]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_task_and_sweep_at_the_same_moment_send_once_per_channel(sandbox, debtor, brand, campaign):
    payout = settled(brand)
    key = Notice.objects.get(payout=payout).key
    start = threading.Barrier(2)

    def run(send):
        try:
            start.wait()
            send()
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=run, args=(lambda: notices_send(keys=[key]),)),
        threading.Thread(target=run, args=(notices_send_due,)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(mail.outbox) == 1 and len(FakeWhatsAppSender.sent) == 1
    assert dict(NoticeDelivery.objects.values_list("channel", "attempts")) == {"email": 1, "whatsapp": 1}
