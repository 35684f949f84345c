"""A brand withdraws its unspent funds to its own verified bank account: a payout on the one
execution path, four-eyes by ops above the threshold, matched on the bank statement by its
EndToEndId, and the books verify."""

import pytest
from django.core.management import call_command
from django.utils import timezone

from campaigns.models import Brand, BrandStatus, PlanCharge
from campaigns.selectors import brand_plan_current
from campaigns.services import brand_funds_account, brand_topup_record
from core.exceptions import InsufficientFunds, InvalidInput, InvalidTransition, NotFound, PermissionDenied
from payouts.models import BrandBankAccount, BrandBankAccountStatus, Payout, PayoutStatus, Withdrawal
from payouts.services import payout_approve, payout_execute, payout_mark_returned
from payouts.services.withdrawals import (
    WithdrawalRequest,
    brand_bank_account_decide,
    brand_bank_account_register,
    withdrawal_create,
    withdrawal_refund,
)
from reconciliation.models import JournalEntry
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import statement_import
from tests.campaigns.factories import BrandFactory
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import DEBTOR_IBAN, assert_books_ok, bank_minor, iban, staff
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
