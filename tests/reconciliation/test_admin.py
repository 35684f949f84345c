import pytest
from django.urls import reverse

from reconciliation.models import AccountKind
from reconciliation.services import Leg, account_get_or_create, ledger_entry_post
from tests.reconciliation.factories import hold

pytestmark = pytest.mark.django_db


@pytest.fixture
def books():
    equity = account_get_or_create(
        code="equity:EUR", name="Equity", kind=AccountKind.EQUITY, currency="EUR", allow_overdraft=True
    )
    budget = account_get_or_create(code="budget:EUR", name="Budget", kind=AccountKind.LIABILITY, currency="EUR")
    entry = ledger_entry_post(
        idempotency_key="fund-1",
        kind="fund",
        reference_type="test",
        reference_id="42",
        legs=[Leg.debit(equity, 1_000), Leg.credit(budget, 1_000)],
    ).entry
    hold(budget, 250, key="hold-1")
    return {"equity": equity, "budget": budget, "entry": entry}


def test_account_list_shows_stored_balances(admin_client, books):
    response = admin_client.get(reverse("admin:reconciliation_account_changelist"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "budget:EUR" in body
    assert "€10.00" in body and "€2.50" in body and "€7.50" in body


def test_ledger_admin_is_read_only(admin_client, books):
    assert admin_client.get(reverse("admin:reconciliation_account_add")).status_code == 403
    assert admin_client.get(reverse("admin:reconciliation_journalentry_add")).status_code == 403
    delete_url = reverse("admin:reconciliation_journalentry_delete", args=[books["entry"].pk])
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403


def test_entry_page_shows_its_postings(admin_client, books):
    response = admin_client.get(reverse("admin:reconciliation_journalentry_change", args=[books["entry"].pk]))
    assert response.status_code == 200
    assert "budget:EUR" in response.content.decode()


def test_entries_are_searchable_by_idempotency_key_and_reference(admin_client, books):
    url = reverse("admin:reconciliation_journalentry_changelist")
    assert "fund-1" in admin_client.get(url, {"q": "fund-1"}).content.decode()
    assert "fund-1" in admin_client.get(url, {"q": "42"}).content.decode()
    assert "fund-1" not in admin_client.get(url, {"q": "nothing-like-it"}).content.decode()


def test_statement_page_pages_with_running_balance(admin_client, books):
    budget = books["budget"]
    equity = books["equity"]
    for i in range(120):
        ledger_entry_post(idempotency_key=f"more-{i}", kind="fund", legs=[Leg.debit(equity, 1), Leg.credit(budget, 1)])
    url = reverse("admin:reconciliation_account_statement", args=[budget.pk])
    first = admin_client.get(url)
    assert first.status_code == 200
    page = first.context["page"]
    assert len(page.lines) == 100
    assert page.lines[0].balance_after_minor == 1_000
    assert page.lines[-1].balance_after_minor == 1_099
    second = admin_client.get(url, {"after": page.next_cursor})
    assert [line.balance_after_minor for line in second.context["page"].lines][-1] == 1_120
    assert second.context["page"].next_cursor is None


def test_trial_balance_page(admin_client, books):
    response = admin_client.get(reverse("admin:reconciliation_trial_balance"))
    assert response.status_code == 200
    assert [row.difference_minor for row in response.context["rows"]] == [0]


def test_staff_without_permission_cannot_read_statements(client, django_user_model, books):
    user = django_user_model.objects.create_user(username="intern", password="pw-intern-123", is_staff=True)
    client.force_login(user)
    url = reverse("admin:reconciliation_account_statement", args=[books["budget"].pk])
    assert client.get(url).status_code == 403
