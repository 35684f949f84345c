"""Executing payouts on the sandbox rail: every rail answer leaves a clear status and reason, and
the money where it belongs; crashes and duplicate workers never pay twice."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_q.conf import Conf

from campaigns.models import Campaign, VopAction
from payouts.models import AttemptOutcome, Payout, PayoutItem, PayoutStatus
from payouts.rails.base import FinalRailError, RailStatus, StatusResult
from payouts.rails.sandbox import SandboxRail
from payouts.services import execute as execute_module
from payouts.services import (
    payout_apply_rail_status,
    payout_approve,
    payout_execute,
    payouts_create_for_payable,
    payouts_poll,
    payouts_recover_stale,
)
from recipients.models import Person
from recipients.services import person_set_iban
from reconciliation.models import JournalEntry
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import (
    assert_books_ok,
    bank_minor,
    iban,
    in_transit_minor,
    payable_minor,
    payable_reward,
    staff,
)

pytestmark = pytest.mark.django_db


def one_payout(brand, *, account_iban: str, **fields) -> Payout:
    reward = payable_reward(brand, account_iban=account_iban, **fields)
    created = payouts_create_for_payable().created
    assert len(created) == 1
    payout = Payout.objects.get(pk=created[0])
    assert payout.person_id == reward.person_id
    return payout


def later(minutes: int = 120):
    return timezone.now() + timedelta(minutes=minutes)


def test_instant_payout_settles_and_books_every_step(sandbox, debtor, brand, campaign):
    # given a payable 5.00 reward for a person with an IBAN
    payout = one_payout(brand, account_iban=iban())
    assert payout.status == PayoutStatus.CREATED and len(payout.end_to_end_id) <= 35
    assert (
        payable_minor(payout.person_id) == 500 and not JournalEntry.objects.filter(kind__startswith="payout").exists()
    )
    # when the payout task runs
    outcome = payout_execute(payout_id=payout.pk)
    # then the sandbox made exactly one transfer and the books show payable → in transit → bank
    payout.refresh_from_db()
    assert outcome == AttemptOutcome.SETTLED and payout.status == PayoutStatus.SETTLED
    assert sandbox.transfer_count(payout.end_to_end_id) == 1
    assert payable_minor(payout.person_id) == 0 and in_transit_minor() == 0 and bank_minor(debtor) == -500
    assert payout.sent_entry and payout.settled_entry and payout.settled_via == "rail"
    assert [e.kind for e in payout.events.order_by("id")] == ["payout.created", "payout.submitted", "payout.settled"]
    assert [a.outcome for a in payout.attempt_log.all()] == [AttemptOutcome.SETTLED]
    assert payout.vop_result == "match"
    assert_books_ok()
    # and running the task again does nothing
    assert payout_execute(payout_id=payout.pk) == "not_claimed"
    assert sandbox.submission_count(payout.end_to_end_id) == 1


def test_create_is_idempotent_and_waits_without_an_iban(sandbox, debtor, brand, campaign):
    # given one person with an IBAN and one without
    payable_reward(brand, account_iban=iban())
    waiting = payable_reward(brand)
    # when payouts are created twice
    first = payouts_create_for_payable()
    second = payouts_create_for_payable()
    # then one payout exists; the person without IBAN keeps the money payable
    assert len(first.created) == 1 and second.created == [] and Payout.objects.count() == 1
    assert first.waiting_for_iban == [waiting.person_id] and payable_minor(waiting.person_id) == 500
    # and once they give an IBAN, the sweep pays them
    person_set_iban(person=Person.objects.get(pk=waiting.person_id), iban=iban(), source="claim_page")
    assert len(payouts_create_for_payable().created) == 1


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [("closed_account", "AC04"), ("rejected:AM04", "AM04")],
)
def test_final_rejection_fails_at_once_and_keeps_the_money_payable(
    sandbox, debtor, brand, campaign, settings, behaviour, code
):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: behaviour}
    payout = one_payout(brand, account_iban=account)
    # when the rail refuses the payment
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.FAILED
    # then the payout failed with the ISO reason, nothing was booked, the reward is free again
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.FAILED and payout.reason_code == code and payout.reason_text
    assert payout.sent_entry is None and payable_minor(payout.person_id) == 500 and in_transit_minor() == 0
    assert not PayoutItem.objects.filter(payout=payout, active=True).exists()
    assert payout.attempt_log.get().error_class == "FinalRailError"
    assert_books_ok()


def test_a_refusal_not_about_the_account_is_tried_again_later_not_every_minute(
    sandbox, debtor, brand, campaign, settings
):
    # given a rail that keeps refusing this account for a reason that is not the account's (AG01)
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "rejected:AG01"}
    first = one_payout(brand, account_iban=account)
    payout_execute(payout_id=first.pk)
    first.refresh_from_db()
    # then the every-minute sweep creates no new payout (nor a new "failed" notice) for an hour
    assert payouts_create_for_payable(now=first.failed_at + timedelta(minutes=1)).created == []
    (second_id,) = payouts_create_for_payable(now=first.failed_at + timedelta(minutes=61)).created
    payout_execute(payout_id=second_id)
    second = Payout.objects.get(pk=second_id)
    # and after a second refusal in a row the wait doubles
    assert second.status == PayoutStatus.FAILED
    assert payouts_create_for_payable(now=second.failed_at + timedelta(minutes=61)).created == []
    assert len(payouts_create_for_payable(now=second.failed_at + timedelta(minutes=121)).created) == 1
    assert payable_minor(first.person_id) == 500  # the money stayed the person's throughout
    assert_books_ok()


def test_closed_account_waits_for_a_new_iban_then_pays_it(sandbox, debtor, brand, campaign, settings):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "closed_account"}
    payout = one_payout(brand, account_iban=account)
    payout_execute(payout_id=payout.pk)
    # the same IBAN is not tried again
    assert payouts_create_for_payable().waiting_for_iban == [payout.person_id]
    # a new IBAN gets a new payout that uses it
    new = person_set_iban(person=payout.person, iban=iban(), source="claim_page")
    (second_id,) = payouts_create_for_payable().created
    assert payout_execute(payout_id=second_id) == AttemptOutcome.SETTLED
    second = Payout.objects.get(pk=second_id)
    assert second.bank_account_id == new.pk and second.end_to_end_id != payout.end_to_end_id
    assert payable_minor(payout.person_id) == 0
    assert_books_ok()


def test_timeout_then_success_records_the_one_transfer(sandbox, debtor, brand, campaign, settings):
    # given a rail that takes the transfer but loses the answer once
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "timeout:1"}
    payout = one_payout(brand, account_iban=account)
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.RETRY
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.CREATED and payout.next_attempt_at > timezone.now()
    assert payable_minor(payout.person_id) == 500
    # not due yet: a duplicate task does nothing
    assert payout_execute(payout_id=payout.pk) == "not_claimed"
    # when the retry is due, the engine asks the rail first and records what it already holds
    assert payout_execute(payout_id=payout.pk, now=later()) == AttemptOutcome.SETTLED
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and payout.attempts == 2
    assert sandbox.transfer_count(payout.end_to_end_id) == 1 and sandbox.submission_count(payout.end_to_end_id) == 1
    assert [a.recovered for a in payout.attempt_log.order_by("number")] == [False, True]
    assert_books_ok()


def test_unavailable_forever_fails_after_the_last_attempt(sandbox, debtor, brand, campaign, settings):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "unavailable:*"}
    settings.PAYOUT_MAX_ATTEMPTS = 3
    payout = one_payout(brand, account_iban=account)
    outcomes = [payout_execute(payout_id=payout.pk, now=later(60 * n)) for n in range(3)]
    payout.refresh_from_db()
    assert outcomes == [AttemptOutcome.RETRY, AttemptOutcome.RETRY, AttemptOutcome.FAILED]
    assert payout.status == PayoutStatus.FAILED and payout.reason_code == "NARR" and "3 attempts" in payout.reason_text
    assert sandbox.transfer_count(payout.end_to_end_id) == 0 and payable_minor(payout.person_id) == 500
    assert_books_ok()


def test_pending_transfer_is_polled_until_settled(sandbox, debtor, brand, campaign, settings):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "pending:1"}
    payout = one_payout(brand, account_iban=account)
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.ACCEPTED
    payout.refresh_from_db()
    assert (
        payout.status == PayoutStatus.SUBMITTED and in_transit_minor() == 500 and payable_minor(payout.person_id) == 0
    )
    assert payouts_poll() == 0  # the rail still says submitted
    assert payouts_poll() == 1
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and in_transit_minor() == 0 and bank_minor(debtor) == -500
    assert_books_ok()


def test_a_payout_the_rail_refuses_to_report_on_does_not_stop_the_poll_of_the_others(
    sandbox, debtor, brand, campaign, settings, monkeypatch
):
    # given two payouts in transit, and a rail that refuses (a final error) to report on the first
    first_account, second_account = iban(), iban()
    settings.SANDBOX_FAILING_IBANS = {first_account: "pending:1", second_account: "pending:1"}
    first = one_payout(brand, account_iban=first_account)
    second = one_payout(brand, account_iban=second_account)
    for payout in (first, second):
        assert payout_execute(payout_id=payout.pk) == AttemptOutcome.ACCEPTED
    answer = SandboxRail.status

    def status(self, end_to_end_id, *, rail_reference=None):
        if end_to_end_id == first.end_to_end_id:
            raise FinalRailError("not yours", reason_code="NARR")
        return answer(self, end_to_end_id, rail_reference=rail_reference)

    monkeypatch.setattr(SandboxRail, "status", status)
    # when the poll runs (the first one, oldest, comes first every time: review finding)
    payouts_poll()
    payouts_poll()
    # then the second payout is still settled; the first waits as it was
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (PayoutStatus.SUBMITTED, PayoutStatus.SETTLED)
    assert_books_ok()


def test_a_rail_report_of_failure_after_acceptance_brings_the_money_back(sandbox, debtor, brand, campaign, settings):
    # given a payout the rail accepted but has not settled (money in transit)
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "pending:5"}
    payout = one_payout(brand, account_iban=account)
    payout_execute(payout_id=payout.pk)
    assert in_transit_minor() == 500
    # when the rail reports (poll or webhook) that it failed
    report = StatusResult(status=RailStatus.FAILED, reason_code="AC06", reason_text="blocked")
    assert payout_apply_rail_status(payout_id=payout.pk, known=report)
    # then the money goes from in transit back to payable, and a repeat report changes nothing
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.FAILED and payout.reason_code == "AC06" and payout.back_entry
    assert in_transit_minor() == 0 and payable_minor(payout.person_id) == 500
    assert not payout_apply_rail_status(payout_id=payout.pk, known=report)
    assert_books_ok()


def test_return_after_settlement_puts_the_money_back_and_the_next_payout_uses_the_new_iban(
    sandbox, debtor, brand, campaign, settings
):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "return:AC04"}
    payout = one_payout(brand, account_iban=account)
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.SETTLED
    # when the poller learns of the return
    assert payouts_poll() == 1
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.RETURNED and payout.reason_code == "AC04" and payout.returned_via == "rail"
    assert payable_minor(payout.person_id) == 500 and bank_minor(debtor) == 0 and in_transit_minor() == 0
    assert_books_ok()
    # the returned IBAN is not paid again; a new one is
    assert payouts_create_for_payable().created == []
    new = person_set_iban(person=payout.person, iban=iban(), source="claim_page")
    (second_id,) = payouts_create_for_payable().created
    assert Payout.objects.get(pk=second_id).bank_account_id == new.pk
    assert payout_execute(payout_id=second_id) == AttemptOutcome.SETTLED
    assert payable_minor(payout.person_id) == 0
    assert_books_ok()


def test_crash_between_rail_accept_and_record_is_recovered_without_a_second_transfer(
    sandbox, debtor, brand, campaign, monkeypatch
):
    payout = one_payout(brand, account_iban=iban())
    real = execute_module._record_rail_result
    calls = []

    def crash_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("worker killed after the rail accepted")
        return real(*args, **kwargs)

    monkeypatch.setattr(execute_module, "_record_rail_result", crash_once)
    # when the worker dies after the rail took the money order
    with pytest.raises(RuntimeError):
        payout_execute(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SUBMITTING and payable_minor(payout.person_id) == 500
    # a duplicate task delivery cannot take it; a fresh claim is not stale yet
    assert payout_execute(payout_id=payout.pk) == "not_claimed"
    assert payouts_recover_stale() == 0
    # then recovery asks the rail and records the transfer it already made
    assert payouts_recover_stale(now=later(10)) == 1
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED
    assert sandbox.transfer_count(payout.end_to_end_id) == 1 and sandbox.submission_count(payout.end_to_end_id) == 1
    assert payable_minor(payout.person_id) == 0 and bank_minor(debtor) == -500
    # the attempt the dead worker left is closed, not "running" for ever in the admin's log
    assert [(a.outcome, a.recovered) for a in payout.attempt_log.order_by("number")] == [
        (AttemptOutcome.SUPERSEDED, False),
        (AttemptOutcome.SETTLED, True),
    ]
    assert_books_ok()


def test_verification_of_payee_no_match_holds_for_review_then_staff_release(sandbox, debtor, brand, campaign, settings):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "vop_no_match"}
    payout = one_payout(brand, account_iban=account)
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.REVIEW
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.CREATED and payout.needs_review and payout.vop_result == "no_match"
    assert sandbox.transfer_count(payout.end_to_end_id) == 0 and payable_minor(payout.person_id) == 500
    assert payout_execute(payout_id=payout.pk, now=later()) == "not_claimed"
    # when a reviewer releases it, it is paid (the IBAN's check is recorded, not asked again)
    payout_approve(payout=payout, approver=staff("rita", "approve_payout"))
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.SETTLED
    assert sandbox.transfer_count(payout.end_to_end_id) == 1


def test_verification_of_payee_close_match_pays_and_flags_where_the_campaign_says_pay(
    sandbox, debtor, brand, campaign, settings
):
    Campaign.objects.filter(pk=campaign.pk).update(vop_close_match=VopAction.PAY)
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "vop_close_match:G. ROSSI"}
    payout = one_payout(brand, account_iban=account)
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.SETTLED
    payout.refresh_from_db()
    assert payout.vop_result == "close_match" and payout.vop_suggested_name == "G. ROSSI"
    assert payout.events.filter(kind="payout.vop_paid_anyway").exists()
    assert payout.bank_account.payee_check_result == "close_match"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_workers_on_one_payout_make_one_transfer(sandbox, debtor, brand, campaign, monkeypatch):
    # Tasks go to the ORM queue with no cluster running: the two threads are the only workers.
    monkeypatch.setattr(Conf, "SYNC", False)
    payout = one_payout(brand, account_iban=iban())
    barrier = threading.Barrier(2)
    outcomes = []

    def worker():
        try:
            barrier.wait()
            outcomes.append(payout_execute(payout_id=payout.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == sorted([AttemptOutcome.SETTLED, "not_claimed"])
    assert sandbox.transfer_count(payout.end_to_end_id) == 1
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and payout.attempts == 1
    assert_books_ok()
