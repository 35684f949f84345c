import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from reconciliation.models import Account, AccountKind, JournalEntry
from reconciliation.services import Leg, account_get_or_create, ledger_entry_post

pytestmark = pytest.mark.django_db


def _fund():
    equity = account_get_or_create(
        code="equity:EUR", name="Equity", kind=AccountKind.EQUITY, currency="EUR", allow_overdraft=True
    )
    budget = account_get_or_create(code="budget:EUR", name="Budget", kind=AccountKind.LIABILITY, currency="EUR")
    ledger_entry_post(idempotency_key="fund-1", kind="fund", legs=[Leg.debit(equity, 500), Leg.credit(budget, 500)])
    return budget


def test_ledger_verify_passes_on_sound_books(capsys):
    _fund()
    call_command("ledger_verify")
    assert "The books verify." in capsys.readouterr().out


def _corrupt_balance(account: Account) -> None:
    """Simulate corruption the way only a superuser with the guards switched off could."""
    table = Account._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        cursor.execute(f"UPDATE {table} SET posted_minor = posted_minor + 7 WHERE id = %s", [account.pk])
        if connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")


def test_ledger_verify_fails_loudly_on_a_drifted_balance(capsys):
    budget = _fund()
    _corrupt_balance(budget)
    with pytest.raises(CommandError):
        call_command("ledger_verify")
    out = capsys.readouterr().out
    assert "[FAIL] materialised balances equal the sum of postings" in out
    assert "budget:EUR" in out


def test_seed_demo_is_idempotent(settings):
    settings.DEBUG = True
    call_command("seed_demo")
    counts = (Account.objects.count(), JournalEntry.objects.count())
    call_command("seed_demo")
    assert (Account.objects.count(), JournalEntry.objects.count()) == counts
    call_command("ledger_verify")


def test_seed_demo_refuses_outside_debug(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError):
        call_command("seed_demo")
    assert Account.objects.count() == 0
