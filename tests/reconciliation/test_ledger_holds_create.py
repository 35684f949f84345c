"""``ledger_holds_create``: the one hold API. A list of holds on one account is reserved all or
nothing, each row checked by the database; a single hold is a list of one."""

import pytest
from django.db import transaction

from core.exceptions import CurrencyMismatch, IdempotencyConflict, InsufficientFunds, InvalidInput
from reconciliation.models import Hold, HoldStatus
from reconciliation.selectors import account_balance, ledger_verify_report
from reconciliation.services import HoldSpec, Leg, ledger_entry_post, ledger_holds_create
from tests.reconciliation.factories import hold, ledger_snapshot

pytestmark = pytest.mark.django_db


def specs(n: int, amount: int, prefix: str = "bulk") -> list[HoldSpec]:
    return [HoldSpec(idempotency_key=f"{prefix}:{i}", amount_minor=amount, memo=f"hold {i}") for i in range(n)]


def test_holds_are_reserved_and_returned_in_order(chart, funded_budget):
    holds = ledger_holds_create(account=chart.budget, currency="EUR", holds=specs(20, 1_000))

    assert [h.idempotency_key for h in holds] == [f"bulk:{i}" for i in range(20)]
    stored = {h.pk: h for h in Hold.objects.filter(pk__in=[h.pk for h in holds])}
    assert all(stored[h.pk].status == HoldStatus.PENDING and stored[h.pk].amount_minor == 1_000 for h in holds)
    assert [stored[h.pk].memo for h in holds] == [f"hold {i}" for i in range(20)]
    balance = account_balance(account_id=chart.budget.pk)
    assert (balance.posted_minor, balance.held_minor, balance.available_minor) == (100_000, 20_000, 80_000)
    assert ledger_verify_report().ok


def test_holds_beyond_available_are_refused_whole_and_the_callers_transaction_goes_on(chart, funded_budget):
    hold(chart.budget, 95_000, key="before")
    before = ledger_snapshot()

    with transaction.atomic():
        # 10 × 600 = 6,000 > the 5,000 left: the database refuses at the ninth row, and none is kept.
        with pytest.raises(InsufficientFunds):
            ledger_holds_create(account=chart.budget, currency="EUR", holds=specs(10, 600))
        assert ledger_snapshot() == before
        ledger_entry_post(
            idempotency_key="after",
            kind="reward_approve",
            legs=[Leg.debit(chart.budget, 100), Leg.credit(chart.payable, 100)],
        )

    assert not Hold.objects.filter(idempotency_key__startswith="bulk:").exists()
    assert account_balance(account_id=chart.budget.pk).held_minor == 95_000
    assert account_balance(account_id=chart.payable.pk).posted_minor == 100


def test_a_key_held_before_is_replayed_and_the_others_are_reserved(chart, funded_budget):
    earlier = hold(chart.budget, 100, key="bulk:3")

    holds = ledger_holds_create(account=chart.budget, currency="EUR", holds=specs(10, 100))

    assert [h.idempotency_key for h in holds] == [f"bulk:{i}" for i in range(10)]
    assert holds[3].pk == earlier.pk
    assert Hold.objects.filter(idempotency_key__startswith="bulk:").count() == 10
    assert account_balance(account_id=chart.budget.pk).held_minor == 1_000


def test_replaying_the_whole_list_reserves_nothing_more(chart, funded_budget):
    first = ledger_holds_create(account=chart.budget, currency="EUR", holds=specs(5, 100))
    before = ledger_snapshot()

    again = ledger_holds_create(account=chart.budget, currency="EUR", holds=specs(5, 100))

    assert [h.pk for h in again] == [h.pk for h in first]
    assert ledger_snapshot() == before


def test_a_key_held_before_for_another_amount_refuses_the_whole_list(chart, funded_budget):
    hold(chart.budget, 999, key="bulk:3")
    before = ledger_snapshot()

    with pytest.raises(IdempotencyConflict):
        ledger_holds_create(account=chart.budget, currency="EUR", holds=specs(10, 100))

    assert ledger_snapshot() == before


def test_a_key_twice_in_the_list_is_refused(chart, funded_budget):
    before = ledger_snapshot()

    with pytest.raises(InvalidInput) as exc:
        ledger_holds_create(account=chart.budget, currency="EUR", holds=[*specs(2, 100), *specs(1, 100)])

    assert exc.value.code == "duplicate_idempotency_key"
    assert ledger_snapshot() == before


def test_an_empty_list_holds_nothing(chart, funded_budget):
    before = ledger_snapshot()

    assert ledger_holds_create(account=chart.budget, currency="EUR", holds=[]) == []
    assert ledger_snapshot() == before


@pytest.mark.parametrize(
    ("currency", "amount", "error"),
    [("USD", 100, CurrencyMismatch), ("EUR", 0, InvalidInput), ("EUR", -5, InvalidInput)],
)
def test_bad_holds_write_nothing(chart, funded_budget, currency, amount, error):
    before = ledger_snapshot()

    with pytest.raises(error):
        ledger_holds_create(account=chart.budget, currency=currency, holds=specs(10, amount))

    assert ledger_snapshot() == before
