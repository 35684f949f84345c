"""The reconciliation dashboard and the admin's bank pages, driven over HTTP as ops staff use them."""

import re
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import translation

from bench.camt_gen import GenLine, GenStatement, write_camt053
from reconciliation.models import (
    ReconciliationAction,
    StatementImport,
    StatementLine,
    StatementLineStatus,
)
from reconciliation.services.statements import platform_bank_account_create
from tests.reconciliation.factories import fund

pytestmark = pytest.mark.django_db
IBAN = "NL91ABNA0417164300"


def camt_bytes(tmp_path, lines, statement_id="S1") -> bytes:
    path = tmp_path / "s.xml"
    write_camt053(
        path,
        [
            GenStatement(
                statement_id=statement_id, account_iban=IBAN, currency="EUR", opening_balance=Decimal(0), lines=lines
            )
        ],
    )
    return path.read_bytes()


@pytest.fixture
def bank():
    return platform_bank_account_create(name="Operating", iban=IBAN, currency="EUR")


def test_upload_imports_and_matches_then_dashboard_shows_it(
    admin_client, tmp_path, bank, django_capture_on_commit_callbacks
):
    data = camt_bytes(
        tmp_path,
        [
            GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance="stray"),
            GenLine(amount=Decimal("1.50"), credit_debit="DBIT", remittance="fee"),
        ],
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            reverse("admin:reconciliation_statement_upload"),
            {"file": SimpleUploadedFile("s.xml", data, content_type="text/xml")},
        )
    assert response.status_code == 302
    assert StatementImport.objects.count() == 1
    # Matching ran on commit (django-q2 runs tasks inline in tests): nobody explains these lines.
    assert set(StatementLine.objects.values_list("status", flat=True)) == {StatementLineStatus.UNMATCHED}

    page = admin_client.get(reverse("reconciliation_dashboard"))
    assert page.status_code == 200
    exceptions = {e.kind: e for e in page.context["exceptions"]}
    assert exceptions["unmatched_lines"].count == 2
    assert exceptions["unmatched_lines"].amount == Decimal("4.50")
    (position,) = page.context["positions"]
    assert position.closing_balance == Decimal("1.50") and position.ledger_balance == Decimal("1.50")
    assert position.difference == 0
    assert sum(b.count for b in page.context["aging"]) == 2


def test_upload_of_a_bad_file_says_why_and_imports_nothing(admin_client, bank):
    response = admin_client.post(
        reverse("admin:reconciliation_statement_upload"),
        {"file": SimpleUploadedFile("bad.xml", b"<Document><oops", content_type="text/xml")},
        follow=True,
    )
    assert response.status_code == 200
    assert "was not imported" in response.content.decode()
    assert StatementImport.objects.count() == 0


def test_dashboard_exports_unmatched_lines_as_csv(admin_client, tmp_path, bank):
    data = camt_bytes(tmp_path, [GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance="stray")])
    admin_client.post(
        reverse("admin:reconciliation_statement_upload"),
        {"file": SimpleUploadedFile("s.xml", data, content_type="text/xml")},
    )
    response = admin_client.get(reverse("reconciliation_dashboard"), {"export": "unmatched"})
    body = b"".join(response.streaming_content).decode()
    assert body.splitlines()[0].startswith("id,booking_date")
    assert "stray" in body and len(body.splitlines()) == 2


def test_explain_page_moves_a_line_to_suspense_with_a_reason(
    admin_client, admin_user, tmp_path, bank, django_capture_on_commit_callbacks
):
    data = camt_bytes(tmp_path, [GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance="stray")])
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            reverse("admin:reconciliation_statement_upload"),
            {"file": SimpleUploadedFile("s.xml", data, content_type="text/xml")},
        )
    line = StatementLine.objects.get()
    url = reverse("admin:reconciliation_line_explain", args=[line.pk])
    assert admin_client.get(url).status_code == 200

    missing_reason = admin_client.post(url, {"action": "suspense", "reason": ""})
    assert missing_reason.status_code == 200 and "Say why." in missing_reason.content.decode()
    assert not ReconciliationAction.objects.filter(kind="move_to_suspense").exists()

    admin_client.post(url, {"action": "suspense", "reason": "waiting for the brand to confirm"})
    action = ReconciliationAction.objects.get(kind="move_to_suspense")
    assert action.actor == admin_user and action.reason == "waiting for the brand to confirm"


def test_staff_without_permission_cannot_upload_or_see_the_dashboard(client, django_user_model, bank):
    user = django_user_model.objects.create_user("viewer", password="pw-viewer-1", is_staff=True)
    client.force_login(user)
    assert client.get(reverse("reconciliation_dashboard")).status_code == 403
    response = client.post(
        reverse("admin:reconciliation_statement_upload"),
        {"file": SimpleUploadedFile("s.xml", b"<x/>", content_type="text/xml")},
    )
    assert response.status_code == 403
    assert StatementImport.objects.count() == 0


def test_bank_pages_show_amounts_formatted_never_five_decimals(admin_client, tmp_path, bank):
    # given a statement with a 1,200.00 credit
    data = camt_bytes(tmp_path, [GenLine(amount=Decimal("1200.00"), credit_debit="CRDT", remittance="top-up")])
    admin_client.post(
        reverse("admin:reconciliation_statement_upload"),
        {"file": SimpleUploadedFile("s.xml", data, content_type="text/xml")},
    )
    line = StatementLine.objects.get()
    statement = line.statement
    # then every page shows it as people read it, in the active language
    pages = [
        reverse("admin:reconciliation_statementline_changelist"),
        reverse("admin:reconciliation_statementline_change", args=[line.pk]),
        reverse("admin:reconciliation_line_explain", args=[line.pk]),
        reverse("admin:reconciliation_bankstatement_changelist"),
        reverse("admin:reconciliation_bankstatement_change", args=[statement.pk]),
    ]
    for url in pages:
        text = admin_client.get(url).content.decode()
        assert "€1,200.00" in text, url
        # (the line's dedupe key holds the bank's amount too: an identity, not a figure shown)
        assert not re.search(r">\s*1200\.00000\s*<", text), url
    assert "+€1,200.00" in str(line)
    with translation.override("it"):
        assert "1.200,00\xa0€" in str(line)


def _upload(admin_client, tmp_path, lines):
    admin_client.post(
        reverse("admin:reconciliation_statement_upload"),
        {"file": SimpleUploadedFile("s.xml", camt_bytes(tmp_path, lines), content_type="text/xml")},
    )


def _balance_table(page) -> str:
    text = page.content.decode()
    return text.split("Closing balance against the ledger", 1)[1].split("Open exceptions", 1)[0]


def test_dashboard_shows_a_difference_lines_in_flight_explain_as_timing_not_red(admin_client, tmp_path, bank):
    # given a statement whose line is not matched yet (matching runs after commit, not here)
    _upload(admin_client, tmp_path, [GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance="stray")])
    page = admin_client.get(reverse("reconciliation_dashboard"))
    (position,) = page.context["positions"]
    # then the bank is ahead of the ledger by exactly that line: a timing difference, amber
    assert position.difference == Decimal("3.00") and position.unexplained == 0
    assert position.state == "timing"
    balances = _balance_table(page)
    assert 'data-state="timing"' in balances and "bad" not in balances
    assert '<section class="recon-wide">' in page.content.decode()  # the grid's whole width


def test_dashboard_shows_an_unexplained_difference_in_red(admin_client, tmp_path, bank):
    # given a posting to the bank's ledger account that no bank line explains
    fund(bank.ledger_account, 700)
    _upload(admin_client, tmp_path, [GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance="stray")])
    page = admin_client.get(reverse("reconciliation_dashboard"))
    (position,) = page.context["positions"]
    assert position.unexplained == Decimal("-7.00") and position.state == "unexplained"
    balances = _balance_table(page)
    assert 'data-state="unexplained"' in balances and 'class="num bad"' in balances
    assert "unexplained: -€7.00" in balances
