"""A brand withdraws its unspent funds to its own verified bank account: a payout on the one
execution path, four-eyes by ops above the threshold, matched on the bank statement by its
EndToEndId, and the books verify."""

import importlib

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from campaigns.models import Brand, BrandStatus, PlanCharge, VopAction
from campaigns.selectors import brand_plan_current
from campaigns.services import brand_funds_account, brand_topup_record
from core.exceptions import InsufficientFunds, InvalidInput, InvalidTransition, NotFound, PermissionDenied
from payouts.models import BrandBankAccount, BrandBankAccountStatus, Payout, PayoutStatus, Withdrawal
from payouts.rails.base import PayeeMatch, normalise_iban
from payouts.services import (
    payout_approve,
    payout_cancel,
    payout_execute,
    payout_mark_returned,
    payouts_create_for_payable,
)
from payouts.services.payee import payout_vop_action, payout_waits_for_person, payouts_payee_recheck_moved
from payouts.services.withdrawals import (
    WithdrawalRequest,
    brand_bank_account_decide,
    brand_bank_account_register,
    withdrawal_create,
    withdrawal_refund,
)
from payouts.tasks import payouts_tick
from recipients.models import Notice, NoticeKind
from recipients.selectors import person_current_bank_account
from reconciliation.models import JournalEntry
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import statement_import
from tests.campaigns.factories import BrandFactory
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import (
    DEBTOR_IBAN,
    assert_books_ok,
    bank_minor,
    iban,
    payable_minor,
    payable_reward,
    staff,
)
from tests.portal.conftest import member
from tests.reconciliation.crafted import Booking, camt053, statement

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

KEY = "0123456789abcdef0123456789abcdef"


def _funded(brand, minor: int) -> None:
    brand_topup_record(
        brand=brand,
        amount_minor=minor,
        currency="EUR",
        bank_account_code=DEBTOR_IBAN,
        idempotency_key=f"topup:{brand.pk}",
        reference=brand.funding_reference,
    )


def _statement(bookings: list[Booking], *, statement_id: str, opening: str) -> None:
    data = camt053(
        statement(bookings, statement_id=statement_id, account=f"<IBAN>{DEBTOR_IBAN}</IBAN>", opening=opening)
    )
    statement_import(source=data, filename=f"{statement_id}.xml", origin="command", match=False)
    statement_lines_match()


def _funds(brand) -> int:
    return brand_funds_account(brand=brand, currency="EUR").available_minor


@pytest.fixture
def owner(brand):
    return member(brand, "owner", "owner@joy.example")


@pytest.fixture
def verified(brand, owner):
    account = brand_bank_account_register(brand=brand, iban=iban(), holder_name="Joy Shoes S.r.l.", actor=owner)
    return brand_bank_account_decide(
        account=account, approver=staff("verifier", "verify_brandbankaccount"), verified=True
    )


def test_withdraw_then_payout_then_statement_match_then_the_books_verify(sandbox, debtor, brand, owner, verified):
    # given 300.00 of unallocated funds: a top-up the bank statement shows with the brand's reference
    topup = Booking("300.00", details=f"<RmtInf><Ustrd>Top-up {brand.funding_reference}</Ustrd></RmtInf>")
    _statement([topup], statement_id="STMT-W0", opening="0.00")
    assert _funds(brand) == 30_000

    # when the owner withdraws 120.00 to the verified account, twice with the same key
    request = WithdrawalRequest(bank_account_id=verified.pk, amount_minor=12_000, idempotency_key=KEY)
    withdrawal = withdrawal_create(brand=brand, request=request, actor=owner)
    assert withdrawal_create(brand=brand, request=request, actor=owner).pk == withdrawal.pk

    # then one payout to the brand's payee, below the threshold: straight to the rail
    payout = withdrawal.payout
    assert Withdrawal.objects.count() == 1 and Payout.objects.count() == 1
    assert (payout.amount_minor, payout.requires_approval, payout.person_id) == (12_000, False, verified.payee_id)
    assert payout.creditor_name == "Joy Shoes S.r.l."
    assert _funds(brand) == 18_000
    payout_execute(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED

    # when the bank statement shows the debit by its EndToEndId
    debit = Booking("120.00", direction="DBIT", details=f"<Refs><EndToEndId>{payout.end_to_end_id}</EndToEndId></Refs>")
    _statement([debit], statement_id="STMT-W1", opening="300.00")

    # then it is that payout's line, and the books verify
    payout.refresh_from_db()
    assert payout.bank_debit_line_id is not None
    assert bank_minor(debtor) == 30_000 - 12_000
    assert_books_ok()
    call_command("ledger_verify")


def test_above_the_threshold_ops_approve_before_it_is_sent(sandbox, debtor, brand, owner, verified, settings):
    settings.WITHDRAWAL_APPROVAL_THRESHOLD_MINOR = 10_000
    _funded(brand, 30_000)
    withdrawal = withdrawal_create(
        brand=brand,
        request=WithdrawalRequest(bank_account_id=verified.pk, amount_minor=20_000, idempotency_key=KEY),
        actor=owner,
    )
    payout = withdrawal.payout
    assert payout.requires_approval and payout.queued_at is None
    payout_execute(payout_id=payout.pk)  # not approved: nothing is sent
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.CREATED

    payout_approve(payout=payout, approver=staff("approver", "approve_payout"))
    payout_execute(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED
    assert_books_ok()


def test_an_unverified_or_another_brands_account_gets_nothing(sandbox, debtor, brand, owner, verified):
    _funded(brand, 30_000)
    pending = brand_bank_account_register(brand=brand, iban=iban(), holder_name="Joy Shoes", actor=owner)
    other = BrandFactory(name="Other", slug="other")
    _funded(other, 30_000)
    entries = JournalEntry.objects.count()

    with pytest.raises(InvalidTransition) as exc:
        withdrawal_create(
            brand=brand,
            request=WithdrawalRequest(bank_account_id=pending.pk, amount_minor=100, idempotency_key=KEY),
            actor=owner,
        )
    assert exc.value.code == "bank_account_unverified"
    with pytest.raises(NotFound):  # brand B naming brand A's account
        withdrawal_create(
            brand=other,
            request=WithdrawalRequest(bank_account_id=verified.pk, amount_minor=100, idempotency_key=KEY),
            actor=member(other),
        )
    with pytest.raises(InsufficientFunds):
        withdrawal_create(
            brand=brand,
            request=WithdrawalRequest(bank_account_id=verified.pk, amount_minor=30_001, idempotency_key=KEY),
            actor=owner,
        )
    for bad in (0, -1, 1.5):
        with pytest.raises(InvalidInput):
            withdrawal_create(
                brand=brand,
                request=WithdrawalRequest(bank_account_id=verified.pk, amount_minor=bad, idempotency_key=KEY),
                actor=owner,
            )
    assert JournalEntry.objects.count() == entries
    assert not Payout.objects.exists() and not Withdrawal.objects.exists()
    assert _funds(brand) == _funds(other) == 30_000


def test_registration_checks_the_iban_and_verification_needs_a_second_person(brand, owner):
    with pytest.raises(InvalidInput) as exc:
        brand_bank_account_register(brand=brand, iban="IT60X0542811101000000123457", holder_name="Joy", actor=owner)
    assert exc.value.code == "invalid_iban"
    with pytest.raises(InvalidInput):
        brand_bank_account_register(brand=brand, iban=iban(), holder_name="  ", actor=owner)
    assert not BrandBankAccount.objects.exists()

    same = iban()
    account = brand_bank_account_register(brand=brand, iban=same, holder_name="Joy", actor=owner)
    assert brand_bank_account_register(brand=brand, iban=same, holder_name="Joy", actor=owner).pk == account.pk
    with pytest.raises(PermissionDenied):
        brand_bank_account_decide(account=account, approver=owner, verified=True)
    assert BrandBankAccount.objects.get(pk=account.pk).status == BrandBankAccountStatus.PENDING


def test_an_account_a_withdrawal_bounced_from_takes_no_more(sandbox, debtor, brand, owner, verified):
    _funded(brand, 30_000)
    first = withdrawal_create(
        brand=brand,
        request=WithdrawalRequest(bank_account_id=verified.pk, amount_minor=1_000, idempotency_key=KEY),
        actor=owner,
    )
    payout_execute(payout_id=first.payout_id)
    payout_mark_returned(payout=Payout.objects.get(pk=first.payout_id), reason_code="AC04", source="test")

    with pytest.raises(InvalidTransition) as exc:
        withdrawal_create(
            brand=brand,
            request=WithdrawalRequest(bank_account_id=verified.pk, amount_minor=1_000, idempotency_key="f" * 32),
            actor=owner,
        )
    assert exc.value.code == "bank_account_bounced"
    assert Withdrawal.objects.count() == 1
    assert_books_ok()


def test_a_withdrawal_that_came_back_is_refunded_to_the_funds_once(sandbox, debtor, brand, owner, verified):
    _funded(brand, 30_000)
    withdrawal = withdrawal_create(
        brand=brand,
        request=WithdrawalRequest(bank_account_id=verified.pk, amount_minor=10_000, idempotency_key=KEY),
        actor=owner,
    )
    ops = staff("refunder", "refund_withdrawal")
    with pytest.raises(InvalidTransition):  # still on its way
        withdrawal_refund(withdrawal=withdrawal, actor=ops)
    with pytest.raises(PermissionDenied):
        withdrawal_refund(withdrawal=withdrawal, actor=owner)
    payout_execute(payout_id=withdrawal.payout_id)
    payout_mark_returned(payout=Payout.objects.get(pk=withdrawal.payout_id), reason_code="AC04", source="test")
    assert _funds(brand) == 20_000

    withdrawal_refund(withdrawal=withdrawal, actor=ops)
    withdrawal_refund(withdrawal=withdrawal, actor=ops)

    assert _funds(brand) == 30_000
    assert JournalEntry.objects.filter(kind="brand_withdrawal_back").count() == 1
    assert_books_ok()


def test_withdrawals_in_one_day_add_up_for_the_four_eyes(sandbox, debtor, brand, owner, verified, settings):
    """Splitting a large sum into several below the threshold still waits for ops."""
    settings.WITHDRAWAL_APPROVAL_THRESHOLD_MINOR = 10_000
    _funded(brand, 30_000)
    first, second = (
        withdrawal_create(
            brand=brand,
            request=WithdrawalRequest(bank_account_id=verified.pk, amount_minor=6_000, idempotency_key=key * 32),
            actor=owner,
        )
        for key in "ab"
    )
    assert first.payout.requires_approval is False
    assert second.payout.requires_approval is True  # 12,000 in a day: over the threshold together


def test_a_due_plan_fee_and_a_suspended_or_test_brand_keep_the_money(sandbox, debtor, brand, owner, verified):
    _funded(brand, 10_000)
    PlanCharge.objects.create(
        brand=brand, plan=brand_plan_current(brand=brand), month=timezone.now().date().replace(day=1),
        amount_minor=4_000, currency="EUR", created_at=timezone.now(),
    )  # fmt: skip
    request = WithdrawalRequest(bank_account_id=verified.pk, amount_minor=7_000, idempotency_key="c" * 32)
    with pytest.raises(InsufficientFunds) as refused:
        withdrawal_create(brand=brand, request=request, actor=owner)
    assert refused.value.code == "plan_fee_due"
    assert not Withdrawal.objects.exists() and _funds(brand) == 10_000

    Brand.objects.filter(pk=brand.pk).update(status=BrandStatus.SUSPENDED)
    brand.refresh_from_db()
    small = WithdrawalRequest(bank_account_id=verified.pk, amount_minor=1_000, idempotency_key="d" * 32)
    with pytest.raises(PermissionDenied) as suspended:
        withdrawal_create(brand=brand, request=small, actor=owner)
    assert suspended.value.code == "withdrawal_not_allowed"
    assert not Withdrawal.objects.exists() and not Payout.objects.exists()


def _answers(settings, account: BrandBankAccount, behaviour: str) -> None:
    """The sandbox bank's payee check answers ``behaviour`` for ``account``."""
    settings.SANDBOX_FAILING_IBANS = {account.bank_account.iban(): behaviour}


def _withdraw(brand, owner, account: BrandBankAccount, minor: int, key: str = KEY) -> Withdrawal:
    request = WithdrawalRequest(bank_account_id=account.pk, amount_minor=minor, idempotency_key=key)
    return withdrawal_create(brand=brand, request=request, actor=owner)


def test_a_withdrawal_takes_the_fixed_policy_and_a_persons_payout_its_campaigns(
    sandbox, debtor, brand, campaign, owner, verified
):
    """A match pays; any other answer goes to ops, never "ask" the brand's payee nor pay unseen.
    A person's payout in the same brand still follows its campaign (defaults: ask, review, pay)."""
    _funded(brand, 30_000)
    withdrawal = _withdraw(brand, owner, verified, 1_000)
    payable_reward(brand, account_iban=iban())
    (person_payout,) = payouts_create_for_payable().created

    assert {outcome: payout_vop_action(payout_id=withdrawal.payout_id, outcome=outcome) for outcome in PayeeMatch} == {
        PayeeMatch.MATCH: VopAction.PAY,
        PayeeMatch.CLOSE_MATCH: VopAction.REVIEW,
        PayeeMatch.NO_MATCH: VopAction.REVIEW,
        PayeeMatch.NOT_POSSIBLE: VopAction.REVIEW,
    }
    assert {outcome: payout_vop_action(payout_id=person_payout, outcome=outcome) for outcome in PayeeMatch} == {
        PayeeMatch.MATCH: VopAction.PAY,
        PayeeMatch.CLOSE_MATCH: VopAction.ASK,
        PayeeMatch.NO_MATCH: VopAction.REVIEW,
        PayeeMatch.NOT_POSSIBLE: VopAction.PAY,
    }


def test_a_close_match_waits_for_ops_who_see_the_answer_and_release_it_then_the_books_verify(
    client, sandbox, debtor, brand, owner, verified, settings
):
    # given 300.00 of funds the bank statement shows, and a bank that knows the account's holder
    # by a slightly different name
    _answers(settings, verified, "vop_close_match:JOY SHOES SRL")
    topup = Booking("300.00", details=f"<RmtInf><Ustrd>Top-up {brand.funding_reference}</Ustrd></RmtInf>")
    _statement([topup], statement_id="STMT-V0", opening="0.00")

    # when the owner withdraws 120.00 (below the four-eyes threshold) and the engine runs it
    withdrawal = _withdraw(brand, owner, verified, 12_000)
    payout_execute(payout_id=withdrawal.payout_id)

    # then it waits for ops' review, not for the payee (who has no page to answer on): nothing sent
    payout = Payout.objects.get(pk=withdrawal.payout_id)
    assert (payout.status, payout.needs_review) == (PayoutStatus.CREATED, True)
    assert (payout.vop_result, payout.vop_action) == ("close_match", "review")
    assert payout.vop_suggested_name == "JOY SHOES SRL"
    assert not payout_waits_for_person(payout)
    assert not Notice.objects.filter(person_id=payout.person_id, kind=NoticeKind.PAYEE_CHECK).exists()
    assert payout.events.filter(kind="payout.review").count() == 1
    assert sandbox.transfer_count(payout.end_to_end_id) == 0
    assert payout_execute(payout_id=payout.pk) == "not_claimed"  # a duplicated task sends nothing

    # and ops see the bank's answer beside the withdrawal and the payout
    ops = staff("ops", "view_withdrawal", "view_payout", "approve_payout")
    client.force_login(ops)
    answer = "close match (bank: JOY SHOES SRL) → review"
    assert answer in client.get(reverse("admin:payouts_withdrawal_changelist")).content.decode()
    detail = client.get(reverse("admin:payouts_withdrawal_change", args=[withdrawal.pk])).content.decode()
    assert answer in detail and "Verification of Payee: close match; staff review" in detail
    queue = client.get(reverse("admin:payouts_payout_changelist") + "?needs_review__exact=1").content.decode()
    assert payout.end_to_end_id in queue and answer in queue

    # when ops release it from review in the admin, it is paid once, to the verified account
    response = client.post(
        reverse("admin:payouts_payout_changelist"), {"action": "approve", "_selected_action": [payout.pk]}
    )
    assert response.status_code == 302
    payout_execute(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and payout.approved_by is None  # a release, not four-eyes
    assert payout.events.filter(kind="payout.approved", actor=ops).count() == 1
    (transfer,) = sandbox.transfers(payout.end_to_end_id)
    assert transfer["account"] == normalise_iban(verified.bank_account.iban())

    # and the statement's debit matches it by its EndToEndId, and the books verify
    debit = Booking("120.00", direction="DBIT", details=f"<Refs><EndToEndId>{payout.end_to_end_id}</EndToEndId></Refs>")
    _statement([debit], statement_id="STMT-V1", opening="300.00")
    payout.refresh_from_db()
    assert payout.bank_debit_line_id is not None
    assert bank_minor(debtor) == 30_000 - 12_000 and _funds(brand) == 18_000
    assert_books_ok()
    call_command("ledger_verify")


def test_a_no_match_cancelled_by_ops_goes_back_to_the_brands_funds(sandbox, debtor, brand, owner, verified, settings):
    _answers(settings, verified, "vop_no_match")
    _funded(brand, 30_000)
    withdrawal = _withdraw(brand, owner, verified, 10_000)
    payout_execute(payout_id=withdrawal.payout_id)
    payout = Payout.objects.get(pk=withdrawal.payout_id)
    assert (payout.status, payout.vop_result, payout.vop_action) == (PayoutStatus.CREATED, "no_match", "review")
    assert payout.needs_review and sandbox.transfer_count(payout.end_to_end_id) == 0

    # when ops cancel it, the money waits on the payee's payable until it is given back
    payout_cancel(payout=payout, actor=staff("canceller", "cancel_payout"), reason="Not the brand's name at the bank")
    assert Payout.objects.get(pk=payout.pk).status == PayoutStatus.CANCELLED
    assert (_funds(brand), payable_minor(payout.person_id)) == (20_000, 10_000)
    refunder = staff("refunder", "refund_withdrawal")
    withdrawal_refund(withdrawal=withdrawal, actor=refunder)
    withdrawal_refund(withdrawal=withdrawal, actor=refunder)

    # then the brand has it all back, once, nothing was sent, and the books balance
    assert (_funds(brand), payable_minor(payout.person_id)) == (30_000, 0)
    assert JournalEntry.objects.filter(kind="brand_withdrawal_back").count() == 1
    assert sandbox.transfer_count(payout.end_to_end_id) == 0
    assert_books_ok()


def test_a_new_account_leaves_a_withdrawal_waiting_for_four_eyes_on_the_account_it_named(
    sandbox, debtor, brand, owner, verified, settings, django_capture_on_commit_callbacks
):
    settings.WITHDRAWAL_APPROVAL_THRESHOLD_MINOR = 10_000
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = True  # the account-change hook and its tasks run as in production
    _funded(brand, 30_000)
    withdrawal = _withdraw(brand, owner, verified, 20_000)
    assert withdrawal.payout.requires_approval

    # when the brand registers another account, which becomes its payee's current one
    with django_capture_on_commit_callbacks(execute=True):
        other = brand_bank_account_register(brand=brand, iban=iban(), holder_name="Joy Shoes S.r.l.", actor=owner)
    assert person_current_bank_account(person=verified.payee).pk == other.bank_account_id
    payouts_tick()  # the sweep that replaces payouts waiting about a replaced account
    payouts_payee_recheck_moved(person=verified.payee)

    # then the withdrawal still waits, to the account it named
    payout = Payout.objects.get(pk=withdrawal.payout_id)
    assert (payout.status, payout.bank_account_id) == (PayoutStatus.CREATED, verified.bank_account_id)
    assert Payout.objects.count() == 1 and not payout.events.filter(kind="payout.cancelled").exists()

    # and ops' approval pays that account
    payout_approve(payout=payout, approver=staff("approver", "approve_payout"))
    payout_execute(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED
    (transfer,) = sandbox.transfers(payout.end_to_end_id)
    assert transfer["account"] == normalise_iban(verified.bank_account.iban())
    assert_books_ok()


def test_a_withdrawal_left_on_ask_is_not_moved_by_a_new_account_and_goes_to_ops_review(
    sandbox, debtor, brand, owner, verified, settings, django_capture_on_commit_callbacks
):
    """A payout the old policy left waiting for the payee: the account-change rechecks leave it
    on its account, and payouts migration 0015 hands it to ops' review."""
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = True
    _answers(settings, verified, "vop_close_match:JOY SHOES SRL")
    _funded(brand, 30_000)
    withdrawal = _withdraw(brand, owner, verified, 5_000)
    payout_execute(payout_id=withdrawal.payout_id)
    Payout.objects.filter(pk=withdrawal.payout_id).update(vop_action=VopAction.ASK)  # as the old policy left it

    with django_capture_on_commit_callbacks(execute=True):
        brand_bank_account_register(brand=brand, iban=iban(), holder_name="Joy Shoes S.r.l.", actor=owner)
    payouts_tick()
    payouts_payee_recheck_moved(person=verified.payee)

    payout = Payout.objects.get(pk=withdrawal.payout_id)
    assert (payout.status, payout.bank_account_id) == (PayoutStatus.CREATED, verified.bank_account_id)
    assert not payout_waits_for_person(payout)

    migration = importlib.import_module("payouts.migrations.0015_withdrawals_waiting_for_payee_to_ops_review")
    migration.forward(apps, None)
    migration.forward(apps, None)  # twice: nothing more
    payout.refresh_from_db()
    assert (payout.vop_action, payout.needs_review) == ("review", True)
    assert payout.review_reason == "Verification of Payee: close match; staff review before paying."
    assert payout.events.filter(kind="payout.review", data__action_was="ask").count() == 1

    payout_approve(payout=payout, approver=staff("approver", "approve_payout"))
    payout_execute(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and sandbox.transfer_count(payout.end_to_end_id) == 1
    assert_books_ok()


def test_a_withdrawal_keyed_back_never_blocks_another_withdrawals_refund(sandbox, debtor, brand, owner, verified):
    """The form's key is the brand's to send: a brand whose id is another withdrawal's id and whose
    key is "back" must not take that withdrawal's refund key."""
    _funded(brand, 30_000)
    first = withdrawal_create(
        brand=brand,
        request=WithdrawalRequest(bank_account_id=verified.pk, amount_minor=10_000, idempotency_key=KEY),
        actor=owner,
    )
    payout_execute(payout_id=first.payout_id)
    payout_mark_returned(payout=Payout.objects.get(pk=first.payout_id), reason_code="AC04", source="test")
    other = BrandFactory(name="Other", slug="other-back")
    Withdrawal.objects.filter(pk=first.pk).update(id=other.pk)  # the withdrawal's id is the other brand's
    first = Withdrawal.objects.get(pk=other.pk)
    with connection.cursor() as cursor:  # the next withdrawal numbered after the moved one
        cursor.execute("SELECT setval(pg_get_serial_sequence('payouts_withdrawal', 'id'), %s)", [other.pk + 1])
    other_owner = member(other, "owner", "owner@other.example")
    other_account = brand_bank_account_register(brand=other, iban=iban(), holder_name="Other S.r.l.", actor=other_owner)
    brand_bank_account_decide(
        account=other_account, approver=staff("verifier2", "verify_brandbankaccount"), verified=True
    )
    _funded(other, 5_000)
    withdrawal_create(
        brand=other,
        request=WithdrawalRequest(bank_account_id=other_account.pk, amount_minor=1_000, idempotency_key="back"),
        actor=other_owner,
    )

    withdrawal_refund(withdrawal=first, actor=staff("refunder", "refund_withdrawal"))

    assert _funds(brand) == 30_000
    assert_books_ok()


@pytest.mark.django_db(transaction=True)
def test_two_first_bank_accounts_registered_at_once_share_one_payee(debtor):
    from tests.reconciliation.test_ledger_concurrency import run_concurrently

    brand = BrandFactory(name="Race", slug="race-payee")
    actor = member(brand, "owner", "owner@race.example")
    results = run_concurrently(
        lambda i: brand_bank_account_register(brand=brand, iban=iban(), holder_name="Race S.r.l.", actor=actor), n=2
    )

    assert all(isinstance(r, BrandBankAccount) for r in results), results
    assert BrandBankAccount.objects.filter(brand=brand).values("payee_id").distinct().count() == 1
