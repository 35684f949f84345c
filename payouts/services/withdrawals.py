"""A brand's unspent funds back to its own bank account.

The brand is paid as a person is: its payee (a ``Person`` of the brand, one per brand) holds the
brand's bank accounts as ``BankAccount`` rows, and a withdrawal is a ``Payout`` to one of them —
the one execution path: routing, four-eyes by ops above ``WITHDRAWAL_APPROVAL_THRESHOLD_MINOR``
(``payout_approve`` in the admin), the rail, the statement match by EndToEndId, returns. Only
the first step is the withdrawal's own: one entry (``withdrawal:<brand>:<key>``) from
``brand:<id>:funds`` (no overdraft) to the payee's payable, in the transaction that creates the
payout, which then moves payable → in transit → bank like any other.

A bank account receives money only once ops verified it (``brand_bank_account_decide``):
someone with ``payouts.verify_brandbankaccount`` other than whoever registered it checks it
against the brand's company documents or a top-up it was sent from.

Two things differ from a person's payout, both decided in ``payouts.services.payee``. The payee
check's answer follows no campaign's policy but ``WITHDRAWAL_POLICY``: a match pays, any other
answer waits for ops' review in the admin (release with ``payout_approve``, or cancel and give the
money back with ``withdrawal_refund``) — never "ask" the payee, who has no page to answer on. And
the payout is pinned to the account the withdrawal names: registering another account makes that
one the payee's current account, but the rechecks after an account change never touch a
withdrawal's payout (``payouts_waiting_for_person``).
"""

from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from campaigns.models import Brand, BrandStatus, PlanCharge
from campaigns.services import brand_funds_account
from campaigns.services.rewards import recipient_payable_account
from core.exceptions import (
    IdempotencyConflict,
    InsufficientFunds,
    InvalidInput,
    InvalidTransition,
    NotFound,
    PermissionDenied,
)
from core.money import format_minor
from payouts import conf
from payouts.models import BrandBankAccount, BrandBankAccountStatus, PayoutStatus, Withdrawal
from payouts.services.create import account_usable, payout_row_create
from payouts.services.states import event_record, payout_lock, payouts_execute_enqueue
from recipients import crypto
from recipients.models import Person
from recipients.normalise import iban_normalise
from recipients.services import person_root_lock
from recipients.services.bank_accounts import AccountWrite, bank_account_holder_name_set, bank_accounts_make_current
from reconciliation.models import Account
from reconciliation.services import Leg, ledger_entry_post

PAYEE_SOURCE = "brand_payee"


@dataclass(frozen=True)
class WithdrawalRequest:
    bank_account_id: int
    amount_minor: int
    idempotency_key: str  # drawn when the confirmation page was rendered


def _payee(brand: Brand) -> tuple[Person, bool]:
    """The brand's payee person, made on its first bank account (True: new)."""
    known = BrandBankAccount.objects.filter(brand=brand).values_list("payee_id", flat=True).first()
    if known is not None:
        return Person.objects.get(pk=known), False
    return Person.objects.create(brand=brand, display_name=brand.name[:200], created_source=PAYEE_SOURCE), True


def brand_bank_account_register(*, brand: Brand, iban: str, holder_name: str, actor) -> BrandBankAccount:
    """Register ``iban`` (schwifty-checked) held by ``holder_name`` as an account the brand may
    withdraw to, waiting for ops to verify it. The same IBAN again returns its row unchanged.
    Raises InvalidInput (``invalid_iban``, ``invalid_holder_name``), PermissionDenied
    (``test_mode``: a test tenant's money is not real). Durable transaction; the payee's root
    lock first, as every change of where a person is paid; the ``iban_set`` person event is the
    audit row."""
    if not brand.livemode:
        raise PermissionDenied(_("Test money cannot be withdrawn."), code="test_mode")
    name = " ".join((holder_name or "").split())
    if not 0 < len(name) <= 140:
        raise InvalidInput(_("Give the account holder's name (1 to 140 characters)."), code="invalid_holder_name")
    info = iban_normalise(iban)
    fingerprint = crypto.iban_fingerprint(info.normalised)
    with transaction.atomic(durable=True):
        # The brand's row first (NO KEY UPDATE: rows that refer to the brand are still written
        # meanwhile), so two first registrations at once make one payee, not two.
        Brand.objects.select_for_update(no_key=True).filter(pk=brand.pk).first()
        payee, new = _payee(brand)
        payee = person_root_lock(person=payee)
        existing = BrandBankAccount.objects.filter(brand=brand, bank_account__iban_fingerprint=fingerprint).first()
        if existing is not None:
            return existing
        (bank,) = bank_accounts_make_current(
            writes=[
                AccountWrite(
                    person=payee,
                    account=info,
                    fingerprint=fingerprint,
                    source=PAYEE_SOURCE,
                    actor=actor,
                    new_person=new,
                )
            ]
        )
        bank_account_holder_name_set(person=payee, fingerprint=fingerprint, name=name)
        return BrandBankAccount.objects.create(
            brand=brand,
            payee=payee,
            bank_account=bank,
            masked=info.masked,
            holder_name=name,
            created_by=actor,
            created_at=timezone.now(),
        )


def brand_bank_account_decide(*, account: BrandBankAccount, approver, verified: bool) -> BrandBankAccount:
    """Ops' verification (or rejection) of a brand's bank account: pending → verified | rejected,
    a conditional UPDATE, by a holder of ``payouts.verify_brandbankaccount`` who did not register
    it (also a CHECK). Raises PermissionDenied, InvalidTransition (decided already)."""
    if not approver.has_perm("payouts.verify_brandbankaccount"):
        raise PermissionDenied("You may not verify brands' bank accounts.")
    if approver.pk == account.created_by_id:
        raise PermissionDenied("A bank account needs a second person: you registered this one.", code="four_eyes")
    status = BrandBankAccountStatus.VERIFIED if verified else BrandBankAccountStatus.REJECTED
    now = timezone.now()
    with transaction.atomic(durable=True):
        changed = BrandBankAccount.objects.filter(pk=account.pk, status=BrandBankAccountStatus.PENDING).update(
            status=status, decided_by=approver, decided_at=now
        )
        if changed != 1:
            raise InvalidTransition("This bank account was decided already.")
    account.refresh_from_db()
    return account


def withdrawal_create(*, brand: Brand, request: WithdrawalRequest, actor) -> Withdrawal:
    """Send ``request.amount_minor`` of the brand's unallocated funds (its default currency) to
    its verified bank account: the funds → payable entry, the payout, its ``payout.created``
    event (the audit row, naming the withdrawal) and, below the threshold, its execution task —
    one durable transaction. At or above ``WITHDRAWAL_APPROVAL_THRESHOLD_MINOR`` the payout waits
    for ops (``payout_approve``). A key seen before returns its withdrawal (nothing more moves).

    Raises InvalidInput (``invalid_amount``), NotFound (another brand's or no such account),
    InvalidTransition (``bank_account_unverified``, ``bank_account_bounced``: a payout to it came
    back or failed on the account, ``no_route``), InsufficientFunds (more than
    is unallocated; nothing written), IdempotencyConflict (the key named another withdrawal)."""
    amount = request.amount_minor
    if type(amount) is not int or amount <= 0:
        raise InvalidInput(_("Withdraw a positive amount."), code="invalid_amount")
    if not brand.livemode or brand.status != BrandStatus.ACTIVE:
        # A suspended brand's money stays until ops decide; test money never leaves.
        raise PermissionDenied(_("This brand cannot withdraw money now."), code="withdrawal_not_allowed")
    key = f"withdrawal:{brand.pk}:{request.idempotency_key}"
    replay = Withdrawal.objects.filter(idempotency_key=key).first()
    if replay is not None:
        if (replay.bank_account_id, replay.amount_minor) != (request.bank_account_id, amount):
            raise IdempotencyConflict("This key was used for another withdrawal.")
        return replay
    account = (
        BrandBankAccount.objects.select_related("bank_account", "payee")
        .filter(pk=request.bank_account_id, brand=brand)
        .first()
    )
    if account is None:
        raise NotFound("No such bank account.", code="bank_account_not_found")
    if account.status != BrandBankAccountStatus.VERIFIED:
        raise InvalidTransition(
            _("This bank account is not verified yet: we check it before money goes to it."),
            code="bank_account_unverified",
        )
    if not account_usable(account.bank_account, currency=brand.default_currency):
        raise InvalidTransition(
            _("A payment to this bank account came back: register another one."), code="bank_account_bounced"
        )
    try:
        return _withdrawal_write(brand=brand, account=account, amount=amount, key=key, actor=actor)
    except IntegrityError:
        # The same key committed by a concurrent request first (the unique key): that one is it.
        return Withdrawal.objects.get(idempotency_key=key)


def _withdrawal_write(*, brand: Brand, account: BrandBankAccount, amount: int, key: str, actor) -> Withdrawal:
    currency = brand.default_currency
    now = timezone.now()
    with transaction.atomic(durable=True):
        # The funds row, locked: the due plan fees and the day's withdrawals below are read
        # against the same balance by one withdrawal at a time.
        funds = Account.objects.select_for_update().get(pk=brand_funds_account(brand=brand, currency=currency).pk)
        due = (
            PlanCharge.objects.filter(brand=brand, currency=currency, entry__isnull=True).aggregate(
                total=Sum("amount_minor")
            )["total"]
            or 0
        )
        if amount > funds.available_minor - due:
            raise InsufficientFunds(
                _("Only %(amount)s can be withdrawn: the rest is unallocated funds owed to your plan's monthly fee.")
                % {"amount": format_minor(max(0, funds.available_minor - due), currency)}
                if due
                else _("That is more than your unallocated funds."),
                code="plan_fee_due" if due else "insufficient_funds",
            )
        # Four-eyes by what leaves in a day, not by each withdrawal: splitting one large sum into
        # several below the threshold still needs ops.
        day = Withdrawal.objects.filter(brand=brand, currency=currency, created_at__gte=now - timedelta(days=1))
        sent_today = (
            day.exclude(payout__status__in=(PayoutStatus.FAILED, PayoutStatus.CANCELLED)).aggregate(
                total=Sum("amount_minor")
            )["total"]
            or 0
        )
        payable = recipient_payable_account(person_id=account.payee_id, currency=currency)
        entry = ledger_entry_post(
            idempotency_key=key,
            kind="brand_withdrawal",
            legs=[Leg.debit(brand_funds_account(brand=brand, currency=currency), amount), Leg.credit(payable, amount)],
            memo=f"Withdrawal of {brand.slug} to {account.masked}",
            reference_type="brand",
            reference_id=str(brand.pk),
        ).entry
        payout = payout_row_create(
            person=account.payee,
            root=account.payee,
            bank=account.bank_account,
            currency=currency,
            amount_minor=amount,
            needs_approval=sent_today + amount >= conf.withdrawal_approval_threshold_minor(),
            test=False,
            actor=actor,
            enqueue=True,
            now=now,
        )
        if payout is None:
            raise InvalidTransition(_("No payment rail can send this withdrawal now."), code="no_route")
        withdrawal = Withdrawal.objects.create(
            brand=brand,
            bank_account=account,
            payout=payout,
            amount_minor=amount,
            currency=currency,
            idempotency_key=key,
            entry=entry,
            created_by=actor,
            created_at=now,
        )
        event_record(payout, kind="payout.created", from_status="", actor=actor, data={"withdrawal": withdrawal.pk})
        if not payout.requires_approval:
            payouts_execute_enqueue(payout_ids=[payout.pk], now=now)
    return withdrawal


def withdrawal_refund(*, withdrawal: Withdrawal, actor) -> Withdrawal:
    """Give a withdrawal whose payout did not reach the bank back to the brand's funds: its
    money waits on the payee's payable once the payout failed, was cancelled or came back
    (nothing else pays a payee from there: it has no rewards). One entry,
    ``withdrawal-back:<id>``, payable → ``brand:<id>:funds``, and a ``withdrawal.refunded``
    payout event, under the payout's lock so no retry sends it meanwhile. A refunded withdrawal
    is returned unchanged. Raises PermissionDenied (``payouts.refund_withdrawal``),
    InvalidTransition (``payout_live``: the payout is still on its way or arrived)."""
    if not actor.has_perm("payouts.refund_withdrawal"):
        raise PermissionDenied("You may not refund withdrawals.")
    with transaction.atomic(durable=True):
        payout = payout_lock(withdrawal.payout_id)
        withdrawal = Withdrawal.objects.select_for_update().select_related("brand").get(pk=withdrawal.pk)
        if withdrawal.back_entry_id is not None:
            return withdrawal
        if payout.status not in (PayoutStatus.FAILED, PayoutStatus.CANCELLED, PayoutStatus.RETURNED):
            raise InvalidTransition(
                f"A {payout.status} payout is on its way or arrived: nothing to give back.", code="payout_live"
            )
        payable = recipient_payable_account(person_id=payout.person_id, currency=withdrawal.currency)
        funds = brand_funds_account(brand=withdrawal.brand, currency=withdrawal.currency)
        entry = ledger_entry_post(
            # Not under ``withdrawal:``: those keys end in what the brand's form sent, which could be
            # "back" (``withdrawal:<brand>:back`` would then be another withdrawal's refund key).
            idempotency_key=f"withdrawal-back:{withdrawal.pk}",
            kind="brand_withdrawal_back",
            legs=[Leg.debit(payable, withdrawal.amount_minor), Leg.credit(funds, withdrawal.amount_minor)],
            memo=f"Withdrawal #{withdrawal.pk} did not arrive: back to the brand's funds",
            reference_type="brand",
            reference_id=str(withdrawal.brand_id),
        ).entry
        withdrawal.back_entry = entry
        withdrawal.save(update_fields=["back_entry"])
        event_record(
            payout,
            kind="withdrawal.refunded",
            from_status=payout.status,
            actor=actor,
            data={"withdrawal": withdrawal.pk, "entry_id": entry.pk},
        )
    return withdrawal
