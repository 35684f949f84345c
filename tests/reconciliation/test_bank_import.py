"""Importing statements into the bank side: all or nothing, replay-safe, balance-checked."""

from decimal import Decimal
from pathlib import Path

import pytest

from bench.camt_gen import GenLine, GenStatement, GenTx, write_camt053
from core.exceptions import InvalidInput
from reconciliation.models import BankStatement, StatementImport, StatementLine, StatementLineStatus
from reconciliation.services.statements import platform_bank_account_create, statement_import
from reconciliation.statements.errors import StatementParseError

pytestmark = pytest.mark.django_db

IBAN = "NL91ABNA0417164300"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "camt"


@pytest.fixture
def bank():
    return platform_bank_account_create(name="Operating", iban=IBAN, currency="EUR")


def camt(tmp_path, lines, *, statement_id="STMT-1", opening=Decimal("1000.00"), name="s.xml"):
    path = tmp_path / name
    write_camt053(
        path,
        [
            GenStatement(
                statement_id=statement_id, account_iban=IBAN, currency="EUR", opening_balance=opening, lines=lines
            )
        ],
    )
    return path


def test_import_creates_statement_and_lines(tmp_path, bank):
    path = camt(
        tmp_path,
        [
            GenLine(amount=Decimal("10.00"), credit_debit="DBIT", end_to_end_id="E2E-1"),
            GenLine(amount=Decimal("250.00"), credit_debit="CRDT", remittance="Top-up JB7F3K9Q"),
            GenLine(
                credit_debit="DBIT",
                batch=(GenTx(Decimal("1.00"), "E2E-2"), GenTx(Decimal("2.00"), "E2E-3")),
                payment_information_id="BATCH-7",
            ),
        ],
    )
    result = statement_import(source=path, filename=path.name, origin="command", match=False)
    assert not result.replayed
    assert result.new_lines == 3 and result.duplicate_lines == 0
    statement = BankStatement.objects.get()
    assert statement.entry_count == 3
    assert statement.credit_total == Decimal("250.00") and statement.debit_total == Decimal("13.00")
    assert statement.balance_difference == 0 and not statement.balance_mismatch
    single, topup, batch = StatementLine.objects.order_by("sequence")
    assert (single.end_to_end_id, single.amount_minor, single.credit_debit) == ("E2E-1", 1000, "DBIT")
    assert "JB7F3K9Q" in topup.remittance
    assert batch.batch_payment_information_id == "BATCH-7" and batch.batch_count == 2
    assert [d["end_to_end_id"] for d in batch.details] == ["E2E-2", "E2E-3"]
    assert all(line.status == StatementLineStatus.NEW for line in (single, topup, batch))


def test_same_file_twice_changes_nothing(tmp_path, bank):
    path = camt(tmp_path, [GenLine(amount=Decimal("5.00"), credit_debit="CRDT")])
    first = statement_import(source=path, filename="a.xml", origin="command", match=False)
    again = statement_import(source=path.read_bytes(), filename="b.xml", origin="admin", match=False)
    assert again.replayed and again.statement_import.pk == first.statement_import.pk
    assert (StatementImport.objects.count(), StatementLine.objects.count()) == (1, 1)


def test_same_statement_in_another_file_is_skipped(tmp_path, bank):
    lines = [GenLine(amount=Decimal("5.00"), credit_debit="CRDT", entry_reference="REF-1")]
    statement_import(source=camt(tmp_path, lines, name="a.xml"), filename="a.xml", origin="command", match=False)
    other = camt(tmp_path, lines, name="b.xml")
    other.write_bytes(other.read_bytes().replace(b"GENMSG0001", b"GENMSG0002"))
    result = statement_import(source=other, filename="b.xml", origin="command", match=False)
    assert result.skipped_statements == ["STMT-1"] and result.new_lines == 0 and result.duplicate_lines == 1
    assert StatementLine.objects.count() == 1


def test_same_booking_in_a_new_statement_is_not_imported_twice(tmp_path, bank):
    booking = GenLine(amount=Decimal("5.00"), credit_debit="CRDT", entry_reference="BANKREF-9")
    statement_import(source=camt(tmp_path, [booking], name="a.xml"), filename="a.xml", origin="command", match=False)
    path = camt(
        tmp_path,
        [booking, GenLine(amount=Decimal("1.00"), credit_debit="DBIT", entry_reference="BANKREF-10")],
        statement_id="STMT-2",
        name="b.xml",
    )
    result = statement_import(source=path, filename="b.xml", origin="command", match=False)
    assert (result.new_lines, result.duplicate_lines) == (1, 1)
    # The repeat is stored as a confirmation of the first: three lines, two bookings to post
    assert StatementLine.objects.count() == 3
    assert StatementLine.objects.exclude(status="confirmation").count() == 2


def test_opening_plus_entries_not_equal_closing_is_flagged(tmp_path, bank):
    path = camt(tmp_path, [GenLine(amount=Decimal("5.00"), credit_debit="CRDT")])
    xml = path.read_bytes().replace(b'<Amt Ccy="EUR">1005.00</Amt>', b'<Amt Ccy="EUR">1006.00</Amt>')
    assert b"1006.00" in xml
    path.write_bytes(xml)
    result = statement_import(source=path, filename=path.name, origin="command", match=False)
    assert [s.balance_difference for s in result.balance_mismatches] == [Decimal("1.00")]


def test_unknown_account_imports_nothing(tmp_path):
    platform_bank_account_create(name="Other", iban="DE89370400440532013000", currency="EUR")
    path = camt(tmp_path, [GenLine(amount=Decimal("5.00"), credit_debit="CRDT")])
    with pytest.raises(InvalidInput) as caught:
        statement_import(source=path, filename=path.name, origin="command", match=False)
    assert caught.value.code == "unknown_bank_account"
    assert (StatementImport.objects.count(), BankStatement.objects.count(), StatementLine.objects.count()) == (0, 0, 0)


def test_a_file_broken_halfway_imports_nothing(tmp_path, bank):
    path = camt(tmp_path, [GenLine(amount=Decimal(i + 1), credit_debit="CRDT") for i in range(3000)])
    xml = path.read_bytes()
    cut = xml.rfind(b"<Ntry>")
    path.write_bytes(xml[:cut] + b"<Ntry><Amt>oops</Ntry>" + xml[cut:])
    with pytest.raises(StatementParseError):
        statement_import(source=path, filename=path.name, origin="command", match=False)
    assert (StatementImport.objects.count(), BankStatement.objects.count(), StatementLine.objects.count()) == (0, 0, 0)


def test_oversize_file_is_refused_before_parsing(tmp_path, bank):
    path = camt(tmp_path, [GenLine(amount=Decimal("5.00"), credit_debit="CRDT")])
    with pytest.raises(StatementParseError) as caught:
        statement_import(source=path, filename=path.name, origin="command", match=False, max_bytes=100)
    assert caught.value.code == "file_too_large"
    assert StatementImport.objects.count() == 0


def test_hostile_xml_imports_nothing(bank):
    xxe = (
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b'<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.08">'
        b"<BkToCstmrStmt>&x;</BkToCstmrStmt></Document>"
    )
    with pytest.raises(StatementParseError):
        statement_import(source=xxe, filename="evil.xml", origin="admin", match=False)
    assert StatementImport.objects.count() == 0


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("camt05*.xml") if "wrong" not in p.name))
def test_every_sample_file_imports(name):
    from reconciliation.statements.camt import parse_camt

    statements = parse_camt(FIXTURES / name)
    for parsed in statements:
        if parsed.account_iban:
            currency = parsed.currency or parsed.entries[0].currency
            platform_bank_account_create(name=parsed.statement_id, iban=parsed.account_iban, currency=currency)
    result = statement_import(source=FIXTURES / name, filename=name, origin="command", match=False)
    assert result.new_lines + result.duplicate_lines == sum(len(s.entries) for s in statements)
    assert StatementLine.objects.count() == result.new_lines


def test_the_wrong_sample_fails_cleanly():
    with pytest.raises(StatementParseError):
        statement_import(source=FIXTURES / "camt053.v2.wrong.xml", filename="wrong.xml", origin="command", match=False)
    assert StatementImport.objects.count() == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_same_file_delivered_twice_at_once_imports_once(tmp_path):
    import threading

    from django.db import connection

    platform_bank_account_create(name="Operating", iban=IBAN, currency="EUR")
    data = camt(tmp_path, [GenLine(amount=Decimal(i + 1), credit_debit="CRDT") for i in range(500)]).read_bytes()
    barrier = threading.Barrier(2)
    results, errors = [], []

    def deliver():
        try:
            barrier.wait()
            results.append(statement_import(source=data, filename="s.xml", origin="api", match=False))
        except Exception as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(r.replayed for r in results) == [False, True]
    assert (StatementImport.objects.count(), StatementLine.objects.count()) == (1, 500)


def test_two_statements_in_one_file_store_every_booking_and_flag_the_repeats(tmp_path, bank):
    """Given one file with two statements of the account that share a booking (the bank's reference)
    and a booking reported twice inside the first, when it is imported, every entry is a line (none
    is lost to "already known"), the repeats are flagged for a person, and each statement counts its
    own lines."""
    path = tmp_path / "two.xml"
    write_camt053(
        path,
        [
            GenStatement(
                statement_id="STMT-A",
                account_iban=IBAN,
                currency="EUR",
                opening_balance=Decimal("100.00"),
                lines=[
                    GenLine(amount=Decimal("1.00"), credit_debit="CRDT", entry_reference="REF-1", remittance="first"),
                    GenLine(amount=Decimal("1.00"), credit_debit="CRDT", entry_reference="REF-1", remittance="again"),
                    GenLine(amount=Decimal("2.00"), credit_debit="DBIT", entry_reference="REF-2"),
                ],
            ),
            GenStatement(
                statement_id="STMT-B",
                account_iban=IBAN,
                currency="EUR",
                opening_balance=Decimal("100.00"),
                lines=[
                    GenLine(amount=Decimal("2.00"), credit_debit="DBIT", entry_reference="REF-2"),
                    GenLine(amount=Decimal("3.00"), credit_debit="DBIT", entry_reference="REF-3", end_to_end_id="E-3"),
                ],
            ),
        ],
    )
    result = statement_import(source=path, filename=path.name, origin="command", match=False)
    assert (result.new_lines, result.duplicate_lines, result.possible_duplicates) == (5, 0, 2)
    lines = list(StatementLine.objects.select_related("statement").order_by("pk"))
    assert [(line.statement.statement_id, line.entry_reference, line.possible_duplicate) for line in lines] == [
        ("STMT-A", "REF-1", False),
        ("STMT-A", "REF-1", True),
        ("STMT-A", "REF-2", False),
        ("STMT-B", "REF-2", True),
        ("STMT-B", "REF-3", False),
    ]
    assert lines[0].remittance == "first"
    assert (lines[4].end_to_end_id, lines[4].amount_minor, lines[4].status) == ("E-3", 300, "new")
    assert lines[4].details[0]["end_to_end_id"] == "E-3"
    assert [s.lines.count() for s in result.statements] == [3, 2]


def test_after_a_refused_file_the_next_import_works(tmp_path, bank):
    """A file refused halfway through its lines leaves nothing behind, not even half a bulk write:
    the next file imported on the same connection goes in whole."""
    bad = camt(tmp_path, [GenLine(amount=Decimal(i + 1), credit_debit="CRDT") for i in range(50)], name="bad.xml")
    xml = bad.read_bytes()
    cut = xml.rfind(b"<Ntry>")
    bad.write_bytes(xml[:cut] + b"<Ntry><Amt>oops</Ntry>" + xml[cut:])
    with pytest.raises(StatementParseError):
        statement_import(source=bad, filename=bad.name, origin="command", match=False)
    good = camt(tmp_path, [GenLine(amount=Decimal("4.00"), credit_debit="CRDT")], statement_id="S-2", name="ok.xml")
    result = statement_import(source=good, filename=good.name, origin="command", match=False)
    assert result.new_lines == 1
    assert (StatementImport.objects.count(), StatementLine.objects.count()) == (1, 1)


def test_an_integrity_error_that_is_no_race_is_not_reported_as_one(tmp_path, bank, monkeypatch):
    from django.db import IntegrityError

    from reconciliation.services import statements

    def broken(**kwargs):
        raise IntegrityError("new row violates check constraint")

    monkeypatch.setattr(statements, "_import_once", broken)
    path = camt(tmp_path, [GenLine(amount=Decimal("1.00"), credit_debit="CRDT")])
    # "import_conflict" tells ops to upload again, which would fail the same way: the error stays itself
    with pytest.raises(IntegrityError):
        statement_import(source=path, filename=path.name, origin="command", match=False)
    assert StatementImport.objects.count() == 0
