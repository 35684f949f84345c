"""A pain.001 file built but never downloaded does not keep its payouts (and its payees' data) in
limbo: after ``PAYOUT_BATCH_EXPIRE_DAYS`` it expires, can no longer reach a bank, and its money is
owed again and paid in a new file — never dropped, never paid twice (issue 18)."""

from datetime import timedelta

import pytest
from django_q.models import Schedule

from core.exceptions import InvalidTransition
from payouts.models import BatchStatus, Payout, PayoutBatch, PayoutBatchEvent, PayoutStatus, RouteRule
from payouts.pain002 import parse_pain002
from payouts.services import (
    payout_batch_apply_pain002,
    payout_batch_approve,
    payout_batch_create,
    payout_batch_download,
    payout_batches_expire,
    payouts_create_for_payable,
)
from payouts.tasks import payout_batches_expire_task
from recipients.models import Notice
from recipients.services import person_erase
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import (
    assert_books_ok,
    iban,
    in_transit_minor,
    payable_minor,
    payable_reward,
    staff,
)
from tests.payouts.test_payout_batches import pain002

pytestmark = pytest.mark.django_db
NAME = "Zoë Stale"


@pytest.fixture
def built(sandbox, debtor, brand, campaign, settings):
    """Two payouts in a file that was built and then forgotten."""
    settings.PAYOUT_BATCH_EXPIRE_DAYS = 7
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    payable_reward(brand, account_iban=iban(), name=NAME)
    payable_reward(brand, account_iban=iban())
    assert len(payouts_create_for_payable().created) == 2
    batch = payout_batch_create(actor=staff("olga"))
    return batch, list(Payout.objects.filter(batch=batch).order_by("id"))


def test_a_file_never_downloaded_expires_and_its_money_is_paid_again(built, django_capture_on_commit_callbacks):
    batch, payouts = built
    assert in_transit_minor() == 1_000
    later = batch.created_at + timedelta(days=7, minutes=1)

    with django_capture_on_commit_callbacks(execute=True):
        assert payout_batches_expire(now=later) == [batch.pk]

    batch.refresh_from_db()
    assert batch.status == BatchStatus.EXPIRED
    for payout in Payout.objects.filter(pk__in=[p.pk for p in payouts]):
        assert (payout.status, payout.reason_code) == (PayoutStatus.FAILED, "DS02")
        assert payable_minor(payout.person_id) == 500  # owed again
    assert in_transit_minor() == 0
    assert not Notice.objects.filter(payout__in=payouts).exists()  # nobody is told to check their IBAN
    event = PayoutBatchEvent.objects.get(batch=batch, kind="batch.expired")
    assert event.actor_id is None and event.data["payouts_failed"] == 2 and "Never downloaded" in event.reason
    assert_books_ok()
    # the money goes out again: new payouts, new EndToEndIds, a new file
    again = payouts_create_for_payable().created
    assert len(again) == 2
    fresh = payout_batch_create(actor=staff("ugo"))
    assert set(Payout.objects.filter(batch=fresh).values_list("id", flat=True)) == set(again)
    new_ids = set(Payout.objects.filter(batch=fresh).values_list("end_to_end_id", flat=True))
    assert not {p.end_to_end_id for p in payouts} & new_ids
    assert in_transit_minor() == 1_000
    assert_books_ok()


def test_an_expired_file_can_never_reach_a_bank(built):
    batch, payouts = built
    payout_batches_expire(now=batch.created_at + timedelta(days=8))

    with pytest.raises(InvalidTransition) as refused:
        payout_batch_download(batch=batch, actor=staff("dora", "download_payoutbatch"))
    assert refused.value.code == "batch_expired"
    with pytest.raises(InvalidTransition):
        payout_batch_approve(batch=batch, approver=staff("piero", "approve_payoutbatch"))
    with pytest.raises(InvalidTransition):
        payout_batch_apply_pain002(batch=batch, report=parse_pain002(pain002(batch, group="ACCP")))
    assert PayoutBatch.objects.get(pk=batch.pk).downloaded_at is None


def test_a_downloaded_or_young_file_is_left_alone_and_a_second_run_does_nothing(built):
    batch, _ = built
    assert payout_batches_expire(now=batch.created_at + timedelta(days=6)) == []  # young
    payout_batch_download(batch=batch, actor=staff("dora", "download_payoutbatch"))

    assert payout_batches_expire(now=batch.created_at + timedelta(days=30)) == []  # downloaded: the bank has it

    assert PayoutBatch.objects.get(pk=batch.pk).status == BatchStatus.DOWNLOADED
    assert set(Payout.objects.filter(batch=batch).values_list("status", flat=True)) == {PayoutStatus.SUBMITTED}


def test_an_erased_payee_is_out_of_the_expired_file(built):
    batch, payouts = built
    person_erase(person=payouts[0].person)
    assert NAME.replace("ë", "e") in PayoutBatch.objects.get(pk=batch.pk).file  # still an instruction: whole

    payout_batches_expire(now=batch.created_at + timedelta(days=8))

    stored = PayoutBatch.objects.get(pk=batch.pk).file
    assert NAME.replace("ë", "e") not in stored and "(erased)" in stored


def test_the_daily_task_expires_what_is_due(built, settings):
    batch, _ = built
    settings.PAYOUT_BATCH_EXPIRE_DAYS = 0

    assert payout_batches_expire_task() == "1 payout batches expired"
    assert PayoutBatch.objects.get(pk=batch.pk).status == BatchStatus.EXPIRED
    assert Schedule.objects.filter(func="payouts.tasks.payout_batches_expire_task", schedule_type="D").exists()
