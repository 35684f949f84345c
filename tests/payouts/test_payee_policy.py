"""Verification of Payee with the campaign's policy: each answer pays, waits for staff, asks the
person to confirm their bank's name, or waits for corrected details — and in every case the money
stays the person's until it is paid, nothing is sent twice, and doing a step twice changes
nothing. On the instant rail (Adyen fake) with the EPC VoP fake, and on the pain.001 file rail."""

import pytest
from django.core import mail

from campaigns.models import Campaign, VopAction
from core.exceptions import InvalidTransition
from payouts.models import AttemptOutcome, Payout, PayoutStatus, RouteRule
from payouts.rails.base import PayeeMatch, VerifyPayeeResult
from payouts.services import payee, payout_approve, payout_batch_create, payout_execute, payouts_create_for_payable
from payouts.services.payee import (
    payout_payee_confirm,
    payout_waits_for_person,
    payouts_payee_recheck,
    payouts_payee_recheck_moved,
    payouts_payee_verify,
)
from payouts.tasks import payouts_tick
from recipients.models import BankAccount
from recipients.selectors import iban_fingerprint
from recipients.services import bank_account_holder_name_set, person_set_iban
from tests.campaigns.factories import funded_campaign
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import LOGIN_500, assert_books_ok, iban, payable_minor, payable_reward, staff

pytestmark = pytest.mark.django_db

HOLDER = "Giulia Rossi"


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    """Runs what services enqueue on commit (notifications, execution), as a worker would."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def held_payout(brand, fake_vop, capture, *, name: str, holder: str = HOLDER, account: str | None = None) -> Payout:
    account = account or iban()
    fake_vop.holder(account, holder)
    reward = payable_reward(brand, account_iban=account, name=name)
    (payout_id,) = payouts_create_for_payable().created
    with capture():
        payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    assert payout.person_id == reward.person_id
    return payout


def test_a_match_pays_at_once(sandbox, instant, fake_vop, debtor, brand, campaign, capture):
    payout = held_payout(brand, fake_vop, capture, name=HOLDER)

    assert payout.status == PayoutStatus.SETTLED and payout.vop_result == "match" and payout.vop_action == "pay"
    assert payout.vop_checked_at is not None and len(instant.transfers_for(payout.end_to_end_id)) == 1


def test_a_close_match_waits_for_the_person_with_the_banks_name(
    sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    payout = held_payout(brand, fake_vop, capture, name="G. Rossi")

    assert payout.status == PayoutStatus.CREATED and payout.needs_review
    assert (payout.vop_result, payout.vop_action, payout.vop_suggested_name) == ("close_match", "ask", HOLDER)
    assert [a.outcome for a in payout.attempt_log.all()] == [AttemptOutcome.PAYEE]
    assert instant.transfers_for(payout.end_to_end_id) == []
    assert payable_minor(payout.person_id) == 500  # still the person's, nothing moved
    assert payout.items.filter(active=True).count() == 1
    assert any("confirm or correct" in m.body for m in mail.outbox)  # they are told to act
    assert payout_execute(payout_id=payout.pk) == "not_claimed"  # a duplicated task sends nothing


def test_confirming_the_banks_name_pays_it_once(sandbox, instant, fake_vop, debtor, brand, campaign, capture):
    payout = held_payout(brand, fake_vop, capture, name="G. Rossi")

    with capture():
        confirmed = payout_payee_confirm(payout=payout, name=HOLDER)
    with capture():
        again = payout_payee_confirm(payout=payout, name=HOLDER)

    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and payout.creditor_name == HOLDER
    assert confirmed.pk == again.pk == payout.pk
    (transfer,) = instant.transfers_for(payout.end_to_end_id)
    assert transfer["counterparty"]["bankAccount"]["accountHolder"]["fullName"] == HOLDER
    assert payout.events.filter(kind="payout.payee_confirmed").count() == 1
    # the confirmed name is the account's from now on: the next payout matches at once
    assert BankAccount.objects.get(pk=payout.bank_account_id).holder_name == HOLDER
    assert_books_ok()


def test_confirming_a_name_the_page_did_not_show_changes_nothing(
    sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    payout = held_payout(brand, fake_vop, capture, name="G. Rossi")

    with pytest.raises(InvalidTransition) as refused:
        payout_payee_confirm(payout=payout, name="Someone Else")

    assert refused.value.code == "payee_name_changed"
    payout.refresh_from_db()
    assert payout.needs_review and payout.creditor_name == "G. Rossi"
    assert instant.transfers_for(payout.end_to_end_id) == []


def test_a_payout_that_does_not_wait_cannot_be_confirmed(sandbox, instant, fake_vop, debtor, brand, campaign, capture):
    payout = held_payout(brand, fake_vop, capture, name=HOLDER)

    with pytest.raises(InvalidTransition) as refused:
        payout_payee_confirm(payout=payout, name=HOLDER)

    assert refused.value.code == "payee_confirm_not_waiting"


def test_correcting_the_name_replaces_the_waiting_payout_and_pays_once(
    sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    account = iban()
    payout = held_payout(brand, fake_vop, capture, name="G. Rossi", account=account)

    bank_account_holder_name_set(person=payout.person, fingerprint=iban_fingerprint(account), name="Giulia  Rossi")
    with capture():
        created = payouts_payee_recheck(person=payout.person)
    assert payouts_payee_recheck(person=payout.person) is None  # nothing waits any more

    payout.refresh_from_db()
    assert payout.status == PayoutStatus.CANCELLED and not payout.items.filter(active=True).exists()
    (new_id,) = created.created
    new = Payout.objects.get(pk=new_id)
    assert new.creditor_name == HOLDER and new.status == PayoutStatus.SETTLED and new.vop_result == "match"
    assert instant.transfers_for(payout.end_to_end_id) == [] and len(instant.transfers_for(new.end_to_end_id)) == 1
    assert payable_minor(payout.person_id) == 0
    assert_books_ok()


def test_a_mismatch_blocked_by_policy_waits_for_new_details_and_keeps_the_money(
    sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    Campaign.objects.filter(pk=campaign.pk).update(vop_no_match=VopAction.BLOCK)
    payout = held_payout(brand, fake_vop, capture, name="Mario Bianchi")

    assert (payout.vop_result, payout.vop_action, payout.needs_review) == ("no_match", "block", True)
    assert payable_minor(payout.person_id) == 500 and instant.transfers_for(payout.end_to_end_id) == []
    # the person gives their own account
    own = iban()
    fake_vop.holder(own, "Mario Bianchi")
    person_set_iban(person=payout.person, iban=own, source="claim_page")
    with capture():
        (new_id,) = payouts_payee_recheck(person=payout.person).created

    new = Payout.objects.get(pk=new_id)
    assert new.status == PayoutStatus.SETTLED and new.bank_account.iban() == own
    assert payable_minor(payout.person_id) == 0
    assert_books_ok()


def test_a_mismatch_is_reviewed_by_default_and_staff_release_it(
    sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    payout = held_payout(brand, fake_vop, capture, name="Mario Bianchi")
    assert (payout.vop_action, payout.needs_review) == ("review", True)
    assert payout.events.filter(kind="payout.review").exists()

    with capture():
        payout_approve(payout=payout, approver=staff("rita", "approve_payout"))

    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and len(instant.transfers_for(payout.end_to_end_id)) == 1
    assert fake_vop.calls("POST") == 1  # the check is not asked again


def test_no_check_possible_pays_by_default(sandbox, instant, fake_vop, debtor, brand, campaign, capture):
    account = iban()
    reward = payable_reward(brand, account_iban=account)  # a bank outside the VoP scheme: NOAP
    (payout_id,) = payouts_create_for_payable().created

    assert payout_execute(payout_id=payout_id) == AttemptOutcome.SETTLED
    payout = Payout.objects.get(pk=payout_id)
    assert (payout.vop_result, payout.vop_action) == ("not_possible", "pay") and payout.person_id == reward.person_id


def test_the_strictest_campaign_of_a_payout_decides(sandbox, instant, fake_vop, debtor, brand, campaign, capture):
    lenient = funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500], slug="lenient")
    Campaign.objects.filter(pk=lenient.pk).update(vop_no_match=VopAction.PAY)
    Campaign.objects.filter(pk=campaign.pk).update(vop_no_match=VopAction.BLOCK)
    account = iban()
    fake_vop.holder(account, HOLDER)
    payable_reward(brand, account_iban=account, name="Mario Bianchi", email="both@example.com")
    payable_reward(brand, account_iban=account, name="Mario Bianchi", email="both@example.com", campaign="lenient")
    (payout_id,) = payouts_create_for_payable().created

    payout_execute(payout_id=payout_id)

    payout = Payout.objects.get(pk=payout_id)
    assert payout.items.count() == 2 and (payout.vop_action, payout.needs_review) == ("block", True)


def test_file_rail_payees_are_checked_before_the_file_and_a_close_match_stays_out(
    sandbox, fake_vop, debtor, brand, campaign, capture
):
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    fake_vop.holder(first := iban(), HOLDER)
    fake_vop.holder(second := iban(), "Marco Verdi")
    payable_reward(brand, account_iban=first, name="G. Rossi")
    payable_reward(brand, account_iban=second, name="Marco Verdi")
    payouts_create_for_payable()

    olga = staff("olga")
    batch = payout_batch_create(actor=olga)

    waiting = Payout.objects.get(creditor_name="G. Rossi")
    assert batch.count == 1 and waiting.batch_id is None and waiting.vop_action == "ask"
    # confirmed, it goes in the next file under the bank's name
    with capture():
        payout_payee_confirm(payout=waiting, name=HOLDER)
    nxt = payout_batch_create(actor=olga)
    assert nxt.count == 1 and f"<Nm>{HOLDER}</Nm>" in nxt.file
    assert fake_vop.calls("POST") == 2  # each payee checked once


def test_a_name_checked_for_an_account_since_replaced_cannot_be_confirmed(
    sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    payout = held_payout(brand, fake_vop, capture, name="G. Rossi")
    person_set_iban(person=payout.person, iban=iban(), source="api")  # the brand's API, not the claim page

    with pytest.raises(InvalidTransition) as refused:
        payout_payee_confirm(payout=payout, name=HOLDER)

    assert refused.value.code == "payee_account_changed"
    payout.refresh_from_db()
    assert payout.needs_review and payout.creditor_name == "G. Rossi"
    assert instant.transfers_for(payout.end_to_end_id) == []


@pytest.mark.parametrize("way", ["hook", "sweep"])
def test_an_account_the_brand_replaces_replaces_the_payout_waiting_on_the_old_one(
    way, settings, sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    """The brand's API gives the person a new account while a payout waits for them about the old
    one: that payout is cancelled (no money left) and one to the new account is checked and paid,
    once — by the account-change hook, or by the every-minute sweep when the hook's task is lost."""
    payout = held_payout(brand, fake_vop, capture, name="G. Rossi")
    new_iban = iban()
    fake_vop.holder(new_iban, "G. Rossi")
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = way == "hook"
    with capture():
        person_set_iban(person=payout.person, iban=new_iban, source="api")
    if way == "sweep":
        assert Payout.objects.get(pk=payout.pk).status == PayoutStatus.CREATED  # nothing heard yet
        with capture():
            assert payouts_tick()["rechecked"] == 1
    with capture():
        assert payouts_tick()["rechecked"] == 0  # a second sweep finds nothing left to do

    payout.refresh_from_db()
    assert payout.status == PayoutStatus.CANCELLED and instant.transfers_for(payout.end_to_end_id) == []
    new = Payout.objects.exclude(pk=payout.pk).get(person=payout.person)
    assert new.bank_account.iban_fingerprint == iban_fingerprint(new_iban)
    assert new.status == PayoutStatus.SETTLED and new.vop_result == "match"
    assert len(instant.transfers_for(new.end_to_end_id)) == 1
    assert payable_minor(payout.person_id) == 0
    assert_books_ok()


def test_a_waiting_payout_whose_account_did_not_change_keeps_waiting(
    sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    payout = held_payout(brand, fake_vop, capture, name="G. Rossi")
    with capture():
        assert payouts_tick()["rechecked"] == 0
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.CREATED and payout.needs_review and payout.vop_action == "ask"


def test_a_late_account_change_task_leaves_the_payout_made_for_the_new_account_alone(
    sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    """The person corrected their account on their claim page, which replaced the waiting payout
    at once; the account-change hook's task, run late, must not cancel the new payout — which
    waits for them again — nor check anyone twice."""
    payout = held_payout(brand, fake_vop, capture, name="G. Rossi")
    new_iban = iban()
    fake_vop.holder(new_iban, HOLDER)  # a close match again: the new payout waits too
    with capture():
        person_set_iban(person=payout.person, iban=new_iban, source="claim")
        payouts_payee_recheck(person=payout.person)
    new = Payout.objects.exclude(pk=payout.pk).get(person=payout.person)
    assert payout_waits_for_person(new)
    checks = fake_vop.calls("POST")

    with capture():
        assert payouts_payee_recheck_moved(person=payout.person) == 0  # the task, late
        assert payouts_tick()["rechecked"] == 0

    new.refresh_from_db()
    assert payout_waits_for_person(new) and new.status == PayoutStatus.CREATED
    assert fake_vop.calls("POST") == checks
    assert Payout.objects.filter(person=payout.person).count() == 2


def test_staff_cannot_release_a_payout_its_campaign_blocks(
    sandbox, instant, fake_vop, debtor, brand, campaign, capture
):
    Campaign.objects.filter(pk=campaign.pk).update(vop_no_match=VopAction.BLOCK)
    payout = held_payout(brand, fake_vop, capture, name="Mario Bianchi")
    assert (payout.vop_action, payout.needs_review) == ("block", True)

    with pytest.raises(InvalidTransition) as refused, capture():
        payout_approve(payout=payout, approver=staff("rita", "approve_payout"))

    assert refused.value.code == "payee_blocked"
    payout.refresh_from_db()
    assert payout.needs_review and instant.transfers_for(payout.end_to_end_id) == []


def test_a_mismatch_paid_by_policy_before_a_file_leaves_its_audit_event(
    sandbox, fake_vop, debtor, brand, campaign, monkeypatch
):
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    Campaign.objects.filter(pk=campaign.pk).update(vop_close_match=VopAction.PAY)
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    # a bank that answers "close match" without the holder's name
    monkeypatch.setattr(payee, "payee_ask", lambda rail, payout: VerifyPayeeResult(outcome=PayeeMatch.CLOSE_MATCH))

    assert payouts_payee_verify(payout_ids=[payout_id]) == {payout_id: VopAction.PAY}

    payout = Payout.objects.get(pk=payout_id)
    assert (payout.vop_result, payout.vop_action) == ("close_match", "pay")
    assert payout.events.filter(kind="payout.vop_paid_anyway").count() == 1
