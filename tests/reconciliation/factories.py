"""Factories and small helpers for the books.

Balances are never set directly (the database refuses it): an account gets money by a balanced
entry from an equity account that may go negative, the way money enters the books in production.
"""

import itertools

import factory

from reconciliation.models import Account, AccountKind, Hold, JournalEntry, Posting
from reconciliation.services import HoldSpec, Leg, ledger_entry_post, ledger_holds_create

_funding_keys = itertools.count(1)


class AccountFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Account

    code = factory.Sequence(lambda n: f"test:account:{n}:EUR")
    name = factory.Sequence(lambda n: f"Test account {n}")
    kind = AccountKind.LIABILITY
    currency = "EUR"
    allow_overdraft = True


class BudgetAccountFactory(AccountFactory):
    """A campaign budget: a liability that may never go below zero."""

    code = factory.Sequence(lambda n: f"campaign:{n}:budget:EUR")
    allow_overdraft = False


class BankAccountFactory(AccountFactory):
    code = factory.Sequence(lambda n: f"platform:bank:IT60X0542811101000000{n:06d}:EUR")
    kind = AccountKind.ASSET


class EquityAccountFactory(AccountFactory):
    code = factory.Sequence(lambda n: f"equity:opening:{n}:EUR")
    kind = AccountKind.EQUITY


def fund(account: Account, amount_minor: int, *, source: Account | None = None) -> Account:
    """Credit ``amount_minor`` to a credit-normal ``account`` (debit it for a debit-normal one)
    from an overdraft-allowed equity account in the same currency, and return the refreshed account."""
    source = source or EquityAccountFactory(currency=account.currency)
    legs = (
        [Leg.debit(account, amount_minor), Leg.credit(source, amount_minor)]
        if account.is_debit_normal
        else [Leg.credit(account, amount_minor), Leg.debit(source, amount_minor)]
    )
    ledger_entry_post(idempotency_key=f"test:fund:{next(_funding_keys)}", kind="test_funding", legs=legs)
    account.refresh_from_db()
    return account


def hold(account: Account, amount_minor: int, *, key: str, **spec) -> Hold:
    """One hold on ``account`` through the hold API (a list of one)."""
    (created,) = ledger_holds_create(
        account=account,
        currency=account.currency,
        holds=[HoldSpec(idempotency_key=key, amount_minor=amount_minor, **spec)],
    )
    return created


def ledger_snapshot() -> tuple:
    """Everything a refused write must leave untouched: row counts, every account's balances and
    every hold's state. Negative tests compare it before and after."""
    return (
        JournalEntry.objects.count(),
        Posting.objects.count(),
        tuple(Account.objects.order_by("pk").values_list("pk", "posted_minor", "held_minor")),
        tuple(Hold.objects.order_by("pk").values_list("pk", "status", "amount_minor", "commit_entry_id")),
    )
