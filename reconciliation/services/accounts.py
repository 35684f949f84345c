"""Ledger accounts, and the lock order every writer of the books follows.

Locks (class 8 of the engine's order, ``core.locks``): holds before accounts, account rows in
ascending id. The posting trigger locks an account row as its posting is inserted, so postings are always
inserted sorted by account id; a write that moves an account before its postings (a hold commit
releases the hold first) locks every account it will touch up front with ``accounts_lock``.
"""

from collections.abc import Iterable

from django.db import IntegrityError, transaction

from core.exceptions import InvalidInput
from core.money import validate_currency
from reconciliation.models import Account, AccountKind


def account_get_or_create(
    *,
    code: str,
    name: str,
    kind: AccountKind | str,
    currency: str,
    allow_overdraft: bool = False,
    owner_type: str = "",
    owner_id: str = "",
) -> Account:
    """The account with ``code``, created if missing. Safe under concurrency (the unique code
    decides). Raises InvalidInput if an account with that code exists with another kind/currency."""
    currency = validate_currency(currency)
    if kind not in AccountKind.values:
        raise InvalidInput(f"{kind!r} is not an account kind.", code="invalid_account_kind")
    account = Account.objects.filter(code=code).first()
    if account is None:
        try:
            with transaction.atomic():
                account = Account.objects.create(
                    code=code,
                    name=name,
                    kind=kind,
                    currency=currency,
                    allow_overdraft=allow_overdraft,
                    owner_type=owner_type,
                    owner_id=str(owner_id),
                )
        except IntegrityError:
            account = Account.objects.get(code=code)
    if account.kind != kind or account.currency != currency:
        raise InvalidInput(f"Account {code} exists as {account.kind} {account.currency}.", code="account_conflict")
    return account


def bank_fees_account(currency: str) -> Account:
    """``platform:bank_fees:<currency>``: what banks charge on our transfers and returns (a fee
    added to a debit, deducted from money coming back). An expense, so it never blocks a match."""
    return account_get_or_create(
        code=f"platform:bank_fees:{currency}",
        name=f"Bank charges {currency}",
        kind=AccountKind.EXPENSE,
        currency=currency,
        allow_overdraft=True,
        owner_type="platform",
    )


def account_set_active(*, account: Account, is_active: bool) -> Account:
    """Open or close ``account`` for new postings and holds (the triggers refuse them on an
    inactive account). Joins the caller's transaction."""
    Account.objects.filter(pk=account.pk).update(is_active=is_active)
    account.is_active = is_active
    return account


def accounts_lock(account_ids: Iterable[int]) -> None:
    """Lock the account rows in ascending id, inside the caller's transaction (see the lock order above)."""
    list(
        Account.objects.select_for_update(no_key=True)
        .filter(pk__in=sorted(set(account_ids)))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
