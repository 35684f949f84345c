"""``ledger_holds_create_bulk``: many holds on one account in one statement (COPY on PostgreSQL),
with the same database checks as one hold at a time."""

import pytest
from django.db import IntegrityError, transaction

from core.exceptions import CurrencyMismatch, InsufficientFunds, InvalidInput
from reconciliation.models import Hold, HoldStatus
from reconciliation.selectors import account_balance, ledger_verify_report
from reconciliation.services import HoldSpec, ledger_hold_create, ledger_holds_create_bulk

pytestmark = pytest.mark.django_db


def specs(n: int, amount: int, prefix: str = "bulk") -> list[HoldSpec]:
    return [HoldSpec(idempotency_key=f"{prefix}:{i}", amount_minor=amount, memo=f"hold {i}") for i in range(n)]


def test_bulk_holds_reserve_like_single_ones_in_order(chart, funded_budget):
    holds = ledger_holds_create_bulk(account=chart.budget, currency="EUR", holds=specs(20, 1_000))

    assert [h.idempotency_key for h in holds] == [f"bulk:{i}" for i in range(20)]
    stored = {h.pk: h for h in Hold.objects.filter(pk__in=[h.pk for h in holds])}
    assert all(stored[h.pk].status == HoldStatus.PENDING and stored[h.pk].amount_minor == 1_000 for h in holds)
    balance = account_balance(account_id=chart.budget.pk)
    assert (balance.posted_minor, balance.held_minor, balance.available_minor) == (100_000, 20_000, 80_000)
    assert ledger_verify_report().ok


def test_bulk_holds_beyond_available_are_refused_whole(chart, funded_budget):
    ledger_hold_create(idempotency_key="before", account=chart.budget, amount_minor=95_000, currency="EUR")

    # 10 × 600 = 6,000 > the 5,000 left: the database refuses at the ninth row, and none is kept.
    with pytest.raises(InsufficientFunds), transaction.atomic():
        ledger_holds_create_bulk(account=chart.budget, currency="EUR", holds=specs(10, 600))

    assert not Hold.objects.filter(idempotency_key__startswith="bulk:").exists()
    assert account_balance(account_id=chart.budget.pk).held_minor == 95_000


def test_a_key_used_before_is_an_integrity_error_not_a_replay(chart, funded_budget):
    ledger_hold_create(idempotency_key="bulk:3", account=chart.budget, amount_minor=100, currency="EUR")

    with pytest.raises(IntegrityError), transaction.atomic():
        ledger_holds_create_bulk(account=chart.budget, currency="EUR", holds=specs(10, 100))

    assert Hold.objects.filter(idempotency_key__startswith="bulk:").count() == 1


@pytest.mark.parametrize(
    ("currency", "amount", "error"),
    [("USD", 100, CurrencyMismatch), ("EUR", 0, InvalidInput), ("EUR", -5, InvalidInput)],
)
def test_bad_bulk_holds_write_nothing(chart, funded_budget, currency, amount, error):
    with pytest.raises(error):
        ledger_holds_create_bulk(account=chart.budget, currency=currency, holds=specs(10, amount))

    assert not Hold.objects.filter(idempotency_key__startswith="bulk:").exists()


@pytest.mark.postgres
def test_a_hold_statement_sent_with_other_writes_is_checked_by_the_database(chart, funded_budget):
    from core.bulk import ids_reserve, statements_run
    from reconciliation.services import ledger_holds_statement

    (ids,) = ids_reserve([(Hold, 2)])
    statement, holds = ledger_holds_statement(
        account=chart.budget, currency="EUR", holds=specs(2, 60_000, prefix="together"), ids=ids
    )
    assert [h.pk for h in holds] == ids

    # 2 × 600.00 > 1,000.00: the second row is refused when the statement runs, the first not kept.
    with pytest.raises(IntegrityError), transaction.atomic():
        statements_run([statement])

    assert not Hold.objects.filter(idempotency_key__startswith="together:").exists()
    assert account_balance(account_id=chart.budget.pk).held_minor == 0

    statement, _ = ledger_holds_statement(
        account=chart.budget, currency="EUR", holds=specs(1, 60_000, prefix="together"), ids=ids[:1]
    )
    statements_run([statement])
    assert Hold.objects.get(pk=ids[0]).amount_minor == 60_000
    assert account_balance(account_id=chart.budget.pk).held_minor == 60_000
