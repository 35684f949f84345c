"""Statement formats (issue 27): a bank's CSV export reaches the importer through a named format —
the account's default or the upload's choice — from the admin, the command and the API, is stored
and matched like camt lines, and a replay or an overlapping export posts nothing twice."""

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from campaigns.models import Brand
from campaigns.services.brands import brand_create, brand_funds_account
from core.exceptions import InvalidInput
from reconciliation.models import (
    BankStatement,
    JournalEntry,
    Match,
    PlatformBankAccount,
    StatementImport,
    StatementLine,
    StatementLineStatus,
)
from reconciliation.selectors import account_balance, ledger_verify_report
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import platform_bank_account_create, statement_import
from reconciliation.statements import (
    CsvMapping,
    StatementFormat,
    StatementParseError,
    parse_csv,
    statement_format_get,
    statement_format_register,
)
from reconciliation.statements.banks import REVOLUT_BUSINESS, WISE
from tests.reconciliation.crafted import Booking, camt053, statement
from tests.reconciliation.test_statement_bank_reports import camt054

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "statements"
WISE_FILE = FIXTURES / "wise_business_eur.csv"
REVOLUT_FILE = FIXTURES / "revolut_business_eur.csv"
WISE_IBAN = "BE68539007547034"
REVOLUT_IBAN = "LT121000011101001000"
FUNDING_REFERENCE = "JB7F3K9A"  # written into both sample files' top-up rows
UPLOAD = "admin:reconciliation_statement_upload"


def test_wise_statement_layout():
    statement = parse_csv(WISE_FILE, mapping=WISE, account_iban=WISE_IBAN)

    payout, fee, top_up, card = statement.entries
    assert (payout.amount, payout.credit_debit, payout.currency) == (Decimal("25.00"), "DBIT", "EUR")
    assert (payout.entry_reference, payout.booking_date, payout.line) == ("TRANSFER-1184467203", date(2026, 11, 20), 2)
    assert payout.details[0].counterparty_name == "Ann Creator"  # the payee of money out
    assert payout.details[0].counterparty_iban == "DE89370400440532013000"
    assert (fee.amount, fee.credit_debit, fee.entry_reference) == (Decimal("0.45"), "DBIT", "FEE-TRANSFER-1184467203")
    assert (top_up.amount, top_up.credit_debit) == (Decimal("5000.00"), "CRDT")
    assert top_up.details[0].counterparty_name == "Gelato Bros BV"  # the payer of money in
    assert top_up.details[0].remittance.startswith(FUNDING_REFERENCE)
    assert card.details[0].counterparty_iban is None
    assert all(isinstance(e.amount, Decimal) and e.status == "BOOK" for e in statement.entries)


def test_revolut_business_layout():
    statement = parse_csv(REVOLUT_FILE, mapping=REVOLUT_BUSINESS, account_iban=REVOLUT_IBAN)

    declined, pending, transfer, top_up = statement.entries
    assert (declined.status, pending.status) == ("INFO", "PDNG")  # moved no money (yet)
    assert declined.booking_date is None and pending.booking_date is None
    # The total, fee included, is what left the balance; completed 23:40 UTC, an instant.
    assert (transfer.amount, transfer.credit_debit, transfer.status) == (Decimal("25.20"), "DBIT", "BOOK")
    assert transfer.booking_datetime == datetime(2026, 11, 19, 23, 40, 12, tzinfo=UTC)
    assert transfer.details[0].counterparty_iban == "DE89370400440532013000"
    assert transfer.entry_reference == "3a4b5c6d-7e8f-4a9b-8c0d-1e2f3a4b5c6d"
    assert (top_up.amount, top_up.credit_debit, top_up.details[0].counterparty_name) == (
        Decimal("2500.00"),
        "CRDT",
        "Gelato Bros BV",
    )


def test_a_name_is_one_layout_for_ever():
    other = StatementFormat(name="csv:wise", label="Not Wise", csv=CsvMapping(name="x", booking_date="D", amount="A"))

    with pytest.raises(ValueError, match="registered already"):
        statement_format_register(other)
    statement_format_register(statement_format_get("csv:wise"))  # the same again is a no-op
    with pytest.raises(InvalidInput) as caught:
        statement_format_get("csv:nobank")
    assert caught.value.code == "unknown_statement_format" and "csv:wise" in caught.value.message


# --- through the database ---------------------------------------------------------------------


def _nothing_written() -> bool:
    return not (
        StatementImport.objects.exists()
        or BankStatement.objects.exists()
        or StatementLine.objects.exists()
        or JournalEntry.objects.exists()
    )


@pytest.fixture
def brand(db):
    brand = brand_create(name="Gelato Bros")
    Brand.objects.filter(pk=brand.pk).update(funding_reference=FUNDING_REFERENCE)
    brand.refresh_from_db()
    return brand


@pytest.fixture
def wise(db):
    return platform_bank_account_create(name="Wise", iban=WISE_IBAN, currency="EUR", statement_format="csv:wise")


@pytest.fixture
def revolut(db):
    return platform_bank_account_create(name="Revolut", iban=REVOLUT_IBAN, currency="EUR")


@pytest.fixture
def reconciler(client, django_user_model):
    user = django_user_model.objects.create_user("reconciler", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="Reconciler"))
    client.force_login(user)
    return client


def _funds(brand) -> int:
    return account_balance(account_id=brand_funds_account(brand=brand, currency="EUR").pk).posted_minor


def _upload(client, data: bytes, *, name="export.csv", **fields):
    return client.post(
        reverse(UPLOAD), {"file": SimpleUploadedFile(name, data, content_type="text/csv"), **fields}, follow=True
    )


def test_wise_export_uploaded_from_the_admin_in_the_accounts_format_is_matched_and_a_replay_changes_nothing(
    reconciler, wise, brand, django_capture_on_commit_callbacks
):
    page = reconciler.get(reverse(UPLOAD), {"bank_account": wise.pk})
    assert page.context["form"]["statement_format"].value() == "csv:wise"  # the account's, preselected

    with django_capture_on_commit_callbacks(execute=True):
        response = _upload(reconciler, WISE_FILE.read_bytes(), bank_account=wise.pk)

    assert "Imported 1 statement(s) with 4 new line(s)" in response.content.decode()
    assert StatementImport.objects.get().kind == "csv"
    lines = {line.entry_reference: line for line in StatementLine.objects.all()}
    assert len(lines) == 4
    top_up = lines["TRANSFER-1184402117"]
    assert (top_up.status, top_up.amount_minor, top_up.bank_account_id) == (
        StatementLineStatus.MATCHED,
        500000,
        wise.pk,
    )
    assert Match.objects.get().matcher == "brand_topup" and _funds(brand) == 500_000
    unexplained = [lines[r].status for r in ("TRANSFER-1184467203", "FEE-TRANSFER-1184467203", "CARD-2290012345")]
    assert unexplained == [StatementLineStatus.UNMATCHED] * 3  # parked in suspense, as camt lines are
    bank = account_balance(account_id=wise.ledger_account_id).posted_minor
    assert bank == 500_000 - 2500 - 45 - 600

    entries = JournalEntry.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        again = _upload(reconciler, WISE_FILE.read_bytes(), bank_account=wise.pk)

    assert "was imported before; nothing changed" in again.content.decode()
    assert (StatementImport.objects.count(), StatementLine.objects.count()) == (1, 4)
    assert JournalEntry.objects.count() == entries and _funds(brand) == 500_000
    assert ledger_verify_report().ok


def test_an_overlapping_wise_export_confirms_what_the_first_one_posted(wise, brand):
    first = WISE_FILE.read_text().splitlines()
    statement_import(source=WISE_FILE, filename="nov.csv", origin="command", bank_account_id=wise.pk, match=False)
    statement_lines_match()
    bank = account_balance(account_id=wise.ledger_account_id).posted_minor
    # A later export: one new movement on top, the two oldest again, byte for byte another file.
    later = [
        first[0],
        '"TRANSFER-1184500001","21-11-2026","21-11-2026 08:00:00.000","-10.00","EUR","Sent money to Bo","JoyBack '
        'reward","5958.55","","","","","Bo Creator","","","","","","","0.00","","DEBIT","TRANSFER"',
        *first[3:],
    ]

    result = statement_import(
        source="\n".join(later).encode(), filename="nov-2.csv", origin="command", bank_account_id=wise.pk, match=False
    )
    statement_lines_match()

    assert (result.new_lines, result.duplicate_lines) == (1, 2)
    confirmations = StatementLine.objects.filter(status=StatementLineStatus.CONFIRMATION)
    assert sorted(confirmations.values_list("entry_reference", flat=True)) == [
        "CARD-2290012345",
        "TRANSFER-1184402117",
    ]
    assert account_balance(account_id=wise.ledger_account_id).posted_minor == bank - 1000
    assert _funds(brand) == 500_000  # the top-up is not credited twice
    assert ledger_verify_report().ok


def test_revolut_export_uploaded_with_the_format_chosen_on_the_form(
    reconciler, revolut, brand, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        _upload(reconciler, REVOLUT_FILE.read_bytes(), bank_account=revolut.pk, statement_format="csv:revolut-business")

    lines = {line.entry_reference: line for line in StatementLine.objects.all()}
    assert len(lines) == 4
    transfer = lines["3a4b5c6d-7e8f-4a9b-8c0d-1e2f3a4b5c6d"]
    # 23:40 UTC on the 19th is the 20th where the account is kept (Europe/Amsterdam).
    assert (transfer.booking_date, transfer.amount, transfer.status) == (
        date(2026, 11, 20),
        Decimal("25.20"),
        StatementLineStatus.UNMATCHED,
    )
    assert lines["6738a1f2-0c4e-4ab2-9d3e-5f0e1c2d3a4b"].status == StatementLineStatus.MATCHED
    ignored = [line for line in lines.values() if line.bank_status in ("PDNG", "INFO")]
    assert {line.status for line in ignored} == {StatementLineStatus.IGNORED} and len(ignored) == 2
    assert _funds(brand) == 250_000
    assert account_balance(account_id=revolut.ledger_account_id).posted_minor == 250_000 - 2520


def test_a_csv_line_an_advice_reported_first_only_confirms_it(revolut):
    advice = Booking(
        "25.20",
        direction="DBIT",
        booked="<Dt>2026-11-20</Dt>",
        details="<RltdPties><CdtrAcct><Id><IBAN>DE89370400440532013000</IBAN></Id></CdtrAcct></RltdPties>",
    )
    statement_import(source=camt054([advice], iban=REVOLUT_IBAN), filename="n.xml", origin="command", match=False)
    statement_lines_match()
    held = StatementLine.objects.get()

    statement_import(
        source=REVOLUT_FILE,
        filename="r.csv",
        origin="command",
        statement_format="csv:revolut-business",
        bank_account_id=revolut.pk,
        match=False,
    )
    statement_lines_match()

    transfer = StatementLine.objects.get(entry_reference="3a4b5c6d-7e8f-4a9b-8c0d-1e2f3a4b5c6d")
    assert (transfer.status, transfer.confirms_id) == (StatementLineStatus.CONFIRMATION, held.pk)
    assert account_balance(account_id=revolut.ledger_account_id).posted_minor == 250_000 - 2520  # once
    assert ledger_verify_report().ok


def test_a_csv_line_with_an_earlier_statements_bank_reference_is_that_booking(wise):
    booking = Booking("6.00", direction="DBIT", reference="CARD-2290012345", booked="<Dt>2026-11-18</Dt>")
    data = camt053(statement([booking], statement_id="WISE-1118", account=f"<IBAN>{WISE_IBAN}</IBAN>"))
    statement_import(source=data, filename="s.xml", origin="command", statement_format="camt.053", match=False)

    statement_import(source=WISE_FILE, filename="w.csv", origin="command", bank_account_id=wise.pk, match=False)

    card = StatementLine.objects.get(statement__kind="csv", entry_reference="CARD-2290012345")
    assert card.status == StatementLineStatus.CONFIRMATION
    assert StatementLine.objects.filter(statement__kind="csv").exclude(pk=card.pk).count() == 3


def test_command_imports_a_csv_in_the_named_format(revolut, capsys):
    call_command(
        "statement_import", str(REVOLUT_FILE), "--format", "csv:revolut-business", "--account", str(revolut.pk)
    )

    assert "Imported 1 statement(s), 4 new line(s)" in capsys.readouterr().out
    assert StatementLine.objects.filter(bank_account=revolut).count() == 4


def test_command_refuses_an_unknown_format_and_writes_nothing(revolut):
    with pytest.raises(CommandError, match="unknown_statement_format"):
        call_command("statement_import", str(REVOLUT_FILE), "--format", "csv:revolut", "--account", str(revolut.pk))
    assert _nothing_written()


def test_admin_refuses_an_unknown_format_and_a_csv_without_its_account(reconciler, wise):
    unknown = _upload(reconciler, WISE_FILE.read_bytes(), bank_account=wise.pk, statement_format="csv:nobank")
    assert "csv:nobank is not a statement format" in unknown.content.decode()

    no_account = _upload(reconciler, WISE_FILE.read_bytes(), statement_format="csv:wise")
    assert "A CSV export names no account" in no_account.content.decode()

    # No format, no account: a CSV cannot be read, and the page says which formats would.
    unread = _upload(reconciler, WISE_FILE.read_bytes())
    assert "was not imported (unsupported_document)" in unread.content.decode()
    assert "csv:wise" in unread.content.decode()
    assert _nothing_written()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('"-6.00"', '"-6,00"', "not an amount"),
        ('"18-11-2026"', '"2026-11-18"', "not a date"),
    ],
)
def test_a_bad_amount_or_date_refuses_the_whole_file_with_its_line(wise, old, new, message):
    data = WISE_FILE.read_text().replace(old, new, 1).encode()

    with pytest.raises(StatementParseError) as caught:
        statement_import(source=data, filename="bad.csv", origin="command", bank_account_id=wise.pk)

    assert (caught.value.code, caught.value.line) == ("invalid_row", 5)
    assert message in caught.value.message
    assert _nothing_written()


def test_a_file_that_is_not_the_declared_format_is_refused(wise, revolut):
    advice = camt054([Booking("1.00", booked="<Dt>2026-11-20</Dt>")], iban=REVOLUT_IBAN)

    with pytest.raises(StatementParseError) as as_statement:
        statement_import(source=advice, filename="n.xml", origin="command", statement_format="camt.053")
    with pytest.raises(StatementParseError) as as_csv:
        statement_import(source=advice, filename="n.xml", origin="command", bank_account_id=wise.pk)
    with pytest.raises(InvalidInput) as other_account:
        statement_import(
            source=advice, filename="n.xml", origin="command", bank_account_id=wise.pk, statement_format="camt.054"
        )

    assert (as_statement.value.code, as_csv.value.code) == ("format_mismatch", "format_mismatch")
    assert other_account.value.code == "account_mismatch"
    assert _nothing_written()


def test_an_account_names_only_a_registered_format(db, admin_client):
    with pytest.raises(InvalidInput) as caught:
        platform_bank_account_create(name="X", iban=WISE_IBAN, currency="EUR", statement_format="csv:nobank")
    assert caught.value.code == "unknown_statement_format"
    assert not PlatformBankAccount.objects.exists()

    account = PlatformBankAccount(name="X", iban=WISE_IBAN, currency="EUR", statement_format="csv:nobank")
    with pytest.raises(ValidationError, match="csv:nobank is not a statement format"):
        account.clean_fields(exclude=["ledger_account"])

    form = admin_client.post(
        reverse("admin:reconciliation_platformbankaccount_add"),
        {
            "name": "Wise",
            "iban": WISE_IBAN,
            "currency": "EUR",
            "time_zone": "Europe/Amsterdam",
            "statement_format": "x",
        },
    )
    assert form.status_code == 200 and not PlatformBankAccount.objects.exists()
    admin_client.post(
        reverse("admin:reconciliation_platformbankaccount_add"),
        {
            "name": "Wise",
            "iban": WISE_IBAN,
            "currency": "EUR",
            "time_zone": "Europe/Amsterdam",
            "statement_format": "csv:wise",
        },
    )
    assert PlatformBankAccount.objects.get().statement_format == "csv:wise"
