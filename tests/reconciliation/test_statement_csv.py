"""CSV bank exports through per-bank column mappings, into the same shapes as camt."""

from datetime import date
from decimal import Decimal

import pytest

from reconciliation.statements import CsvMapping, StatementParseError, parse_csv

IBAN = "NL91ABNA0417164300"

SIGNED = CsvMapping(
    name="signed-dot",
    booking_date="Date",
    value_date="Value date",
    amount="Amount",
    currency="Currency",
    reference="Reference",
    counterparty_name="Name",
    counterparty_iban="IBAN",
    remittance=("Description",),
    end_to_end_id="EndToEndId",
)

GERMAN = CsvMapping(
    name="german-bank",
    delimiter=";",
    decimal_separator=",",
    thousands_separator=".",
    date_format="%d.%m.%Y",
    encoding="utf-8-sig",
    fallback_encoding="latin-1",
    skip_lines=2,
    booking_date="Buchungstag",
    debit="Soll",
    credit="Haben",
    default_currency="EUR",
    counterparty_name="Empfänger",
    remittance=("Verwendungszweck 1", "Verwendungszweck 2"),
)


def test_signed_amount_mapping():
    data = (
        b"Date,Value date,Amount,Currency,Reference,Name,IBAN,Description,EndToEndId\n"
        b"2026-01-15,2026-01-16,-25.50,EUR,REF-1,Ann Creator,DE89 3704 0044 0532 0130 00,Reward payout,PAY-1\n"
        b"2026-01-15,,1000.12345,eur,REF-2,Brand BV,,FUND BR-000042,NOTPROVIDED\n"
    )

    statement = parse_csv(data, mapping=SIGNED, account_iban="nl91 abna 0417 1643 00")

    assert (statement.kind, statement.account_iban, statement.currency) == ("csv", IBAN, "EUR")
    assert statement.statement_id.startswith("csv-")
    payout, top_up = statement.entries
    assert (payout.amount, payout.credit_debit, payout.signed_amount) == (Decimal("25.50"), "DBIT", Decimal("-25.50"))
    assert (payout.booking_date, payout.value_date) == (date(2026, 1, 15), date(2026, 1, 16))
    assert (payout.entry_reference, payout.line, payout.status) == ("REF-1", 2, "BOOK")
    (detail,) = payout.details
    assert (detail.end_to_end_id, detail.counterparty_name) == ("PAY-1", "Ann Creator")
    assert detail.counterparty_iban == "DE89370400440532013000"
    assert detail.creditor.name == "Ann Creator" and detail.debtor.iban == IBAN
    assert (top_up.amount, top_up.credit_debit, top_up.currency) == (Decimal("1000.12345"), "CRDT", "EUR")
    assert top_up.value_date == date(2026, 1, 15)  # no value date: the booking date
    assert top_up.details[0].end_to_end_id is None
    assert top_up.details[0].remittance == "FUND BR-000042"


def test_same_file_gets_the_same_statement_id_and_another_file_another():
    header = "Date,Value date,Amount,Currency,Reference,Name,IBAN,Description,EndToEndId\n"
    one = (header + "2026-01-15,,1.00,EUR,R1,,,,\n").encode()
    two = (header + "2026-01-15,,2.00,EUR,R2,,,,\n").encode()

    first = parse_csv(one, mapping=SIGNED, account_iban=IBAN).statement_id

    assert parse_csv(one, mapping=SIGNED, account_iban=IBAN).statement_id == first
    assert parse_csv(two, mapping=SIGNED, account_iban=IBAN).statement_id != first
    assert parse_csv(one, mapping=SIGNED, account_iban=IBAN, statement_id="S-9").statement_id == "S-9"


def test_decimal_comma_separate_debit_credit_columns_and_latin1_fallback():
    data = (
        "Kontoauszug;Girokonto\n"
        "Zeitraum;Januar 2026\n"
        "Buchungstag;Soll;Haben;Empfänger;Verwendungszweck 1;Verwendungszweck 2\n"
        "15.01.2026;1.234,56;;Jörg Müller;Auszahlung;Kampagne 7\n"
        '16.01.2026;;"10.000,00";Marke GmbH;FUND BR-000007;\n'
        "\n"
        "17.01.2026;-0,01;;Bank;Gebühr;\n"
    ).encode("latin-1")

    statement = parse_csv(data, mapping=GERMAN, account_iban=IBAN, opening_balance=Decimal("100.00"))

    payout, top_up, fee = statement.entries
    assert (payout.amount, payout.credit_debit, payout.currency) == (Decimal("1234.56"), "DBIT", "EUR")
    assert payout.details[0].counterparty_name == "Jörg Müller"
    assert payout.details[0].remittance == "Auszahlung Kampagne 7"
    assert (top_up.amount, top_up.credit_debit) == (Decimal("10000.00"), "CRDT")
    assert (fee.amount, fee.credit_debit) == (Decimal("0.01"), "DBIT")  # a signed debit column still means out
    assert [e.line for e in statement.entries] == [4, 5, 7]  # physical lines; the blank line 6 is skipped
    assert [e.sequence for e in statement.entries] == [1, 2, 3]
    assert statement.opening_balance == Decimal("100.00")


def test_utf8_with_bom_is_read_as_utf8():
    data = "\ufeffBuchungstag;Soll;Haben;Empfänger;Verwendungszweck 1;Verwendungszweck 2\n15.01.2026;1,00;;Zoë;x;\n"
    mapping = CsvMapping(**{**_fields(GERMAN), "skip_lines": 0})

    statement = parse_csv(data.encode("utf-8"), mapping=mapping, account_iban=IBAN)

    assert statement.entries[0].details[0].counterparty_name == "Zoë"


def test_amount_with_direction_marker_column_and_no_header():
    mapping = CsvMapping(
        name="marker", has_header=False, booking_date=0, amount=1, direction=2, reference=3, default_currency="EUR"
    )
    data = b"2026-01-15,12.00,D,R1\n2026-01-15,8.00,c,R2\n"

    statement = parse_csv(data, mapping=mapping, account_iban=IBAN)

    assert [(e.amount, e.credit_debit, e.entry_reference) for e in statement.entries] == [
        (Decimal("12.00"), "DBIT", "R1"),
        (Decimal("8.00"), "CRDT", "R2"),
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("2026-02-30,,1.00,EUR,R,,,,", "not a date"),
        (",,1.00,EUR,R,,,,", "(date) is empty"),
        ("2026-01-15,,abc,EUR,R,,,,", "not an amount"),
        ("2026-01-15,,1.123456,EUR,R,,,,", "not an amount"),
        ("2026-01-15,,,EUR,R,,,,", "(amount) is empty"),
        ("2026-01-15,,1.00,EURO,R,,,,", "not a 3-letter code"),
    ],
)
def test_a_bad_row_fails_the_whole_file_with_its_line(row, message):
    data = (
        "Date,Value date,Amount,Currency,Reference,Name,IBAN,Description,EndToEndId\n"
        "2026-01-15,,1.00,EUR,R0,,,,\n" + row + "\n"
    ).encode()

    with pytest.raises(StatementParseError) as caught:
        parse_csv(data, mapping=SIGNED, account_iban=IBAN)

    assert caught.value.code == "invalid_row"
    assert caught.value.line == 3
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("soll", "haben", "message"),
    [("1,00", "2,00", "both"), ("", "", "neither"), ("1.5", "", "not an amount")],
)
def test_debit_credit_rows_must_hold_exactly_one_amount(soll, haben, message):
    mapping = CsvMapping(**{**_fields(GERMAN), "skip_lines": 0, "thousands_separator": ""})
    data = f"Buchungstag;Soll;Haben;Empfänger;Verwendungszweck 1;Verwendungszweck 2\n15.01.2026;{soll};{haben};;;\n"

    with pytest.raises(StatementParseError) as caught:
        parse_csv(data.encode(), mapping=mapping, account_iban=IBAN)

    assert (caught.value.code, caught.value.line) == ("invalid_row", 2)
    assert message in caught.value.message


def test_missing_column_is_named():
    with pytest.raises(StatementParseError) as caught:
        parse_csv(b"Date,Amount\n2026-01-15,1.00\n", mapping=SIGNED, account_iban=IBAN)

    assert (caught.value.code, caught.value.line) == ("missing_column", 1)
    assert "'Value date'" in caught.value.message


def test_undecodable_bytes_without_fallback_are_refused_with_the_line():
    data = b"Date,Value date,Amount,Currency,Reference,Name,IBAN,Description,EndToEndId\n"
    data += "2026-01-15,,1.00,EUR,R,Müller,,,\n".encode("latin-1")

    with pytest.raises(StatementParseError) as caught:
        parse_csv(data, mapping=SIGNED, account_iban=IBAN)

    assert (caught.value.code, caught.value.line) == ("encoding_error", 2)


def test_oversize_csv_is_refused_before_reading():
    with pytest.raises(StatementParseError) as caught:
        parse_csv(b"x" * 2048, mapping=SIGNED, account_iban=IBAN, max_bytes=1024)

    assert caught.value.code == "file_too_large"


@pytest.mark.parametrize(
    "fields",
    [
        {"amount": None},
        {"debit": "Debit"},
        {"amount": None, "direction": "DC"},
        {"decimal_separator": ",", "thousands_separator": ","},
    ],
)
def test_contradictory_mappings_are_refused_when_defined(fields):
    with pytest.raises(ValueError):
        CsvMapping(**{**_fields(SIGNED), **fields})


def _fields(mapping: CsvMapping) -> dict:
    return {name: getattr(mapping, name) for name in mapping.__dataclass_fields__}
