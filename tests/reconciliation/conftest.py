import pytest

from reconciliation.models import AccountKind
from tests.reconciliation.factories import AccountFactory, BudgetAccountFactory, EquityAccountFactory, fund


class Chart:
    """A small chart of accounts in EUR, created in ascending id order (equity first)."""

    def __init__(self):
        self.equity = EquityAccountFactory(code="equity:opening:EUR")
        self.brand_funds = AccountFactory(code="brand:1:funds:EUR", allow_overdraft=False)
        self.budget = BudgetAccountFactory(code="campaign:1:budget:EUR")
        self.payable = AccountFactory(code="recipient:1:payable:EUR")
        self.fees = AccountFactory(code="platform:fees:EUR", kind=AccountKind.INCOME)


@pytest.fixture
def chart(db):
    return Chart()


@pytest.fixture
def funded_budget(chart):
    """The campaign budget (no overdraft) holding 1,000.00 EUR."""
    fund(chart.budget, 100_000, source=chart.equity)
    return chart.budget
