"""camt.053/camt.054 parsing: the public sample files, then the shapes real banks send, one at a time."""

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from reconciliation.statements import (
    StatementParseError,
    iter_camt_statements,
    parse_camt,
    validate_camt,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "camt"
CET = timezone(timedelta(hours=1))


def _doc(entries: str, *, version: str = "camt.053.001.08", statement_head: str | None = None) -> bytes:
    """A small camt document around the given <Ntry> elements (statement-level elements optional)."""
    message, statement = ("BkToCstmrStmt", "Stmt") if "053" in version else ("BkToCstmrDbtCdtNtfctn", "Ntfctn")
    head = (
        statement_head
        if statement_head is not None
        else """
      <Id>S-1</Id>
      <Acct><Id><IBAN>NL91ABNA0417164300</IBAN></Id><Ccy>EUR</Ccy></Acct>"""
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:{version}">
  <{message}>
    <GrpHdr><MsgId>M-1</MsgId><CreDtTm>2026-01-15T18:00:00+01:00</CreDtTm></GrpHdr>
    <{statement}>{head}
{entries}
    </{statement}>
  </{message}>
</Document>
""".encode()


def _entry(
    amount: str = "10.00",
    *,
    cd: str = "DBIT",
    extra: str = "",
    details: str = "",
    booking: str = "<Dt>2026-01-15</Dt>",
    status: str = "<Sts><Cd>BOOK</Cd></Sts>",
) -> str:
    return f"""
      <Ntry>
        <Amt Ccy="EUR">{amount}</Amt>
        <CdtDbtInd>{cd}</CdtDbtInd>{extra}
        {status}
        <BookgDt>{booking}</BookgDt>
        <ValDt><Dt>2026-01-16</Dt></ValDt>
        <NtryDtls>{details}</NtryDtls>
      </Ntry>"""


def _only_entry(data: bytes):
    (statement,) = parse_camt(data)
    (entry,) = statement.entries
    return entry


# --- the public sample files ----------------------------------------------------------------------


def test_v2_minimal_sample_has_one_statement_with_one_credit():
    (statement,) = parse_camt(FIXTURES / "camt053.v2.minimal.xml")

    assert (statement.kind, statement.version) == ("camt053", "001.02")
    assert statement.message_id == "CAMT053RIB000000000001"
    assert statement.statement_id == "253EURNL26VAYB8060476890"
    assert statement.account_iban == "NL26VAYB8060476890"
    assert statement.currency == "EUR"
    assert statement.electronic_sequence_number == 12312
    assert statement.created_at == datetime(2015, 3, 10, 18, 43, 50, tzinfo=UTC)
    assert statement.opening_balance == Decimal("18.15")
    assert statement.opening_balance_date == date(2014, 12, 30)
    # The sample's CLBD is a debit balance (in another currency, which we report, not judge).
    assert statement.closing_balance == Decimal("-27.00")
    (entry,) = statement.entries
    assert (entry.amount, entry.currency, entry.credit_debit, entry.status) == (Decimal("8.85"), "EUR", "CRDT", "BOOK")
    assert (entry.booking_date, entry.value_date) == (date(2014, 12, 31), date(2015, 1, 2))
    assert entry.entry_reference is None
    assert entry.bank_tx_code_proprietary == "544"
    (detail,) = entry.details
    assert detail.end_to_end_id is None
    assert (detail.counterparty_name, detail.counterparty_iban) == ("NAME NAME", "NL56AGDH9619008421")
    assert detail.structured_reference == "4654654654654654"


def test_v2_multi_statement_sample_has_two_statements_that_each_balance():
    statements = parse_camt(FIXTURES / "camt053.v2.multi.statement.xml")

    assert [s.statement_id for s in statements] == ["253EURNL26VAYB8060476890", "254EURNL26VAYB8060476890"]
    assert [len(s.entries) for s in statements] == [1, 1]
    first, second = statements[0].entries[0], statements[1].entries[0]
    assert (first.amount, first.credit_debit) == (Decimal("8.85"), "CRDT")
    assert first.details[0].end_to_end_id == "000000001"
    assert first.details[0].remittance == "Transaction Description 1"
    assert (second.amount, second.credit_debit) == (Decimal("7.00"), "DBIT")
    assert second.details[0].end_to_end_id == "000000002"
    assert second.details[0].counterparty_name == "Company Name 2"
    summaries = validate_camt(FIXTURES / "camt053.v2.multi.statement.xml")
    assert [(s.opening_balance, s.closing_balance, s.balances_match) for s in summaries] == [
        (Decimal("18.15"), Decimal("27.00"), True),
        (Decimal("27.00"), Decimal("20.00"), True),
    ]


def test_v8_sample_reads_othr_account_id_and_booking_datetime():
    (statement,) = parse_camt(FIXTURES / "camt053.v8.xml")

    assert (statement.kind, statement.version) == ("camt053", "001.08")
    assert statement.account_other_id == "NL26VAYB8060476890"
    assert statement.account_iban == "NL26VAYB8060476890"  # Othr/Id that is a valid IBAN
    assert statement.currency == "EUR"  # no Acct/Ccy: taken from the opening balance
    (entry,) = statement.entries
    assert (entry.amount, entry.credit_debit) == (Decimal("8.85"), "CRDT")
    assert entry.booking_datetime == datetime(2014, 12, 31, 13, 15, tzinfo=CET)
    assert entry.booking_date == date(2014, 12, 31)
    assert entry.entry_reference == "AAAASESS-FP-CN_98765/01"
    assert entry.bank_tx_code == "PMNT/RCDT/BOOK"
    (detail,) = entry.details
    assert detail.end_to_end_id == "MUELL/FINP/RA12345"
    assert (detail.amount, detail.currency) == (Decimal("0"), "SEK")


def test_camt054_v8_sample_is_a_notification_with_a_batch_booking():
    (notification,) = parse_camt(FIXTURES / "camt054.v8.xml")

    assert (notification.kind, notification.version) == ("camt054", "001.08")
    assert notification.statement_id == "AAAASESS-FP-ACCR001"
    assert notification.account_iban == "CH2801234000123456789"
    assert notification.opening_balance is None and notification.closing_balance is None
    (entry,) = notification.entries
    assert (entry.amount, entry.currency, entry.credit_debit) == (Decimal("200000"), "SEK", "DBIT")
    assert entry.entry_reference == "ACSR160617103200001"
    assert entry.bank_tx_code == "PMNT/ICDT/DMCT"
    assert entry.bank_tx_code_proprietary == "Z24"
    assert entry.additional_info == "Order"
    assert entry.is_batch
    assert entry.batch.message_id == "UXC06170000006"
    assert entry.batch.payment_information_id == "UXC06170000006PI00001"
    assert entry.batch.number_of_transactions == 2
    assert (entry.batch.total_amount, entry.batch.currency) == (Decimal("6.3"), "CHF")
    assert [d.amount for d in entry.details] == [Decimal("3.1"), Decimal("3.2"), Decimal("3.2")]
    assert [d.end_to_end_id for d in entry.details] == [
        "UXC06170000006PI00001EE00001",
        "UXC06170000006PI00001EE00002",
        "UXC06170000006PI00001EE00002",
    ]
    # A debit: the counterparty is the creditor, not our own account holder.
    assert [d.counterparty_name for d in entry.details] == [
        "Example Creditor 3 - V1",
        "Example Creditor 3 - V2",
        "Example Creditor 3 - V3",
    ]
    assert entry.details[1].counterparty_bic == "BANKCHBE"
    assert entry.details[2].remittance == (
        "Unstructured Remittance Information V3 block 1 Unstructured Remittance Information V3 block 2"
    )
    assert entry.details[2].structured_reference == "Ref number V3 block 1"


def test_the_wrong_sample_fails_with_a_precise_error():
    with pytest.raises(StatementParseError) as caught:
        parse_camt(FIXTURES / "camt053.v2.wrong.xml")

    assert caught.value.code == "missing_element"
    assert caught.value.line == 3
    assert "BkToCstmrStmt contains no Stmt" in caught.value.message


def test_validate_fails_on_the_wrong_sample_too():
    with pytest.raises(StatementParseError):
        validate_camt(FIXTURES / "camt053.v2.wrong.xml")


def test_every_sample_file_is_covered():
    assert sorted(p.name for p in FIXTURES.glob("*.xml")) == [
        "camt053.v2.minimal.xml",
        "camt053.v2.multi.statement.xml",
        "camt053.v2.wrong.xml",
        "camt053.v8.xml",
        "camt054.v8.xml",
    ]


# --- what real files contain ----------------------------------------------------------------------


def test_five_decimal_amounts_are_exact():
    entry = _only_entry(_doc(_entry("1234567.12345")))

    assert entry.amount == Decimal("1234567.12345")
    assert str(entry.amount) == "1234567.12345"


def test_six_decimals_are_refused_with_the_line():
    data = _doc(_entry("1.123456"))

    with pytest.raises(StatementParseError) as caught:
        parse_camt(data)

    assert caught.value.code == "invalid_value"
    assert caught.value.line == data.decode().splitlines().index('        <Amt Ccy="EUR">1.123456</Amt>') + 1


@pytest.mark.parametrize("amount", ["-5.00", "1,00", "", "1e3", "NaN"])
def test_amounts_that_are_not_iso_amounts_are_refused(amount):
    with pytest.raises(StatementParseError) as caught:
        parse_camt(_doc(_entry(amount)))
    assert caught.value.code == "invalid_value"


def test_booking_date_as_dt_or_dttm():
    as_date = _only_entry(_doc(_entry(booking="<Dt>2026-01-15</Dt>")))
    as_datetime = _only_entry(_doc(_entry(booking="<DtTm>2026-01-15T23:30:00+01:00</DtTm>")))

    assert (as_date.booking_date, as_date.booking_datetime) == (date(2026, 1, 15), None)
    assert as_datetime.booking_date == date(2026, 1, 15)  # the calendar day the bank wrote, not UTC's
    assert as_datetime.booking_datetime == datetime(2026, 1, 15, 23, 30, tzinfo=CET)


def test_a_booking_date_with_neither_dt_nor_dttm_is_refused():
    with pytest.raises(StatementParseError) as caught:
        parse_camt(_doc(_entry(booking="")))
    assert caught.value.code == "missing_element"


@pytest.mark.parametrize(
    ("refs", "expected"),
    [
        ("<Refs><EndToEndId>NOTPROVIDED</EndToEndId></Refs>", None),
        ("<Refs><InstrId>I-1</InstrId></Refs>", None),
        ("", None),
        ("<Refs><EndToEndId>PAY-1</EndToEndId></Refs>", "PAY-1"),
    ],
)
def test_end_to_end_id_missing_or_notprovided_is_none(refs, expected):
    entry = _only_entry(_doc(_entry(details=f"<TxDtls>{refs}</TxDtls>")))

    assert entry.details[0].end_to_end_id == expected


def test_an_entry_without_details_has_an_empty_tuple():
    entry = _only_entry(_doc(_entry().replace("<NtryDtls></NtryDtls>", "")))

    assert entry.details == ()
    assert not entry.is_batch


def test_batch_booking_keeps_every_transaction_detail():
    details = """
          <Btch><MsgId>MSG-7</MsgId><PmtInfId>PMT-7</PmtInfId><NbOfTxs>3</NbOfTxs>
            <TtlAmt Ccy="EUR">60.00</TtlAmt><CdtDbtInd>DBIT</CdtDbtInd></Btch>""" + "".join(
        f"""
          <TxDtls><Refs><PmtInfId>PMT-7</PmtInfId><EndToEndId>E2E-{n}</EndToEndId></Refs>
            <Amt Ccy="EUR">{n}0.00</Amt><CdtDbtInd>DBIT</CdtDbtInd>
            <RltdPties><Cdtr><Pty><Nm>Creator {n}</Nm></Pty></Cdtr>
              <CdtrAcct><Id><IBAN>DE89 3704 0044 0532 0130 00</IBAN></Id></CdtrAcct></RltdPties></TxDtls>"""
        for n in (1, 2, 3)
    )

    entry = _only_entry(_doc(_entry("60.00", details=details)))

    assert entry.is_batch
    assert (entry.batch.message_id, entry.batch.payment_information_id) == ("MSG-7", "PMT-7")
    assert (entry.batch.number_of_transactions, entry.batch.total_amount) == (3, Decimal("60.00"))
    assert [d.end_to_end_id for d in entry.details] == ["E2E-1", "E2E-2", "E2E-3"]
    assert [d.amount for d in entry.details] == [Decimal("10.00"), Decimal("20.00"), Decimal("30.00")]
    assert {d.payment_information_id for d in entry.details} == {"PMT-7"}
    assert [d.counterparty_name for d in entry.details] == ["Creator 1", "Creator 2", "Creator 3"]
    assert entry.details[0].counterparty_iban == "DE89370400440532013000"


def test_reversal_indicator_and_the_counterparty_of_a_reversed_payment():
    details = """<TxDtls><Refs><EndToEndId>PAY-9</EndToEndId></Refs>
        <RltdPties><Dbtr><Pty><Nm>Us</Nm></Pty></Dbtr><Cdtr><Pty><Nm>Creator</Nm></Pty></Cdtr></RltdPties></TxDtls>"""

    reversed_debit = _only_entry(_doc(_entry(cd="CRDT", extra="\n        <RvslInd>true</RvslInd>", details=details)))
    plain = _only_entry(_doc(_entry(cd="CRDT", extra="\n        <RvslInd>false</RvslInd>", details=details)))

    assert reversed_debit.reversal is True
    assert reversed_debit.signed_amount == Decimal("10.00")  # booked as a credit
    # It undoes our payment to the creator: the creator stays the counterparty.
    assert reversed_debit.details[0].counterparty_name == "Creator"
    assert plain.reversal is False
    assert plain.details[0].counterparty_name == "Us"


def test_invalid_reversal_indicator_is_refused():
    with pytest.raises(StatementParseError) as caught:
        parse_camt(_doc(_entry(extra="<RvslInd>maybe</RvslInd>")))
    assert caught.value.code == "invalid_value"


def test_return_with_reason_code():
    details = """<TxDtls><Refs><EndToEndId>PAY-42</EndToEndId></Refs>
        <RltdPties><DbtrAcct><Id><IBAN>NL91ABNA0417164300</IBAN></Id></DbtrAcct>
          <Cdtr><Pty><Nm>Creator 42</Nm></Pty></Cdtr></RltdPties>
        <RtrInf><Rsn><Cd>AC04</Cd></Rsn><AddtlInf>Account closed</AddtlInf><AddtlInf>by the bank</AddtlInf></RtrInf>
      </TxDtls>"""

    entry = _only_entry(_doc(_entry(cd="CRDT", details=details)))

    (detail,) = entry.details
    assert detail.return_info.reason_code == "AC04"
    assert detail.return_info.additional_info == "Account closed by the bank"
    assert detail.return_info.original_end_to_end_id == "PAY-42"
    # The return repeats the original parties; our own IBAN is skipped when naming the counterparty.
    assert detail.counterparty_name == "Creator 42"


def test_pending_entries_are_parsed_but_not_counted_as_booked():
    head = """
      <Id>S-1</Id>
      <Acct><Id><IBAN>NL91ABNA0417164300</IBAN></Id></Acct>
      <Bal><Tp><CdOrPrtry><Cd>PRCD</Cd></CdOrPrtry></Tp><Amt Ccy="EUR">100.00</Amt>
        <CdtDbtInd>CRDT</CdtDbtInd><Dt><Dt>2026-01-14</Dt></Dt></Bal>
      <Bal><Tp><CdOrPrtry><Cd>CLBD</Cd></CdOrPrtry></Tp><Amt Ccy="EUR">90.00</Amt>
        <CdtDbtInd>CRDT</CdtDbtInd><Dt><Dt>2026-01-15</Dt></Dt></Bal>"""
    data = _doc(_entry("10.00") + _entry("5.00", status="<Sts><Cd>PDNG</Cd></Sts>"), statement_head=head)

    (summary,) = validate_camt(data)
    (statement,) = parse_camt(data)

    assert [e.status for e in statement.entries] == ["BOOK", "PDNG"]
    assert statement.opening_balance == Decimal("100.00")  # PRCD stands in for a missing OPBD
    assert statement.currency == "EUR"
    assert (summary.entry_count, summary.booked_debit_total) == (2, Decimal("10.00"))
    assert summary.balances_match is True


def test_camt053_v4_reads_plain_text_status_and_v2_style_parties():
    details = """<TxDtls><Refs><EndToEndId>PAY-4</EndToEndId></Refs>
        <AmtDtls><TxAmt><Amt Ccy="EUR">12.50</Amt></TxAmt></AmtDtls>
        <RltdPties><Cdtr><Nm>Creator Four</Nm></Cdtr></RltdPties>
        <RltdAgts><CdtrAgt><FinInstnId><BICFI>ABNANL2A</BICFI></FinInstnId></CdtrAgt></RltdAgts></TxDtls>"""
    data = _doc(_entry("12.50", details=details, status="<Sts>BOOK</Sts>"), version="camt.053.001.04")

    (statement,) = parse_camt(data)

    assert (statement.kind, statement.version) == ("camt053", "001.04")
    (entry,) = statement.entries
    assert entry.status == "BOOK"
    detail = entry.details[0]
    assert (detail.amount, detail.counterparty_name, detail.counterparty_bic) == (
        Decimal("12.50"),
        "Creator Four",
        "ABNANL2A",
    )


def test_camt054_v2_notification():
    details = """<TxDtls><Refs><EndToEndId>TOPUP-1</EndToEndId></Refs>
        <AmtDtls><InstdAmt><Amt Ccy="EUR">500.00</Amt></InstdAmt></AmtDtls>
        <RltdPties><Dbtr><Nm>Brand BV</Nm></Dbtr>
          <DbtrAcct><Id><IBAN>NL02ABNA0123456789</IBAN></Id></DbtrAcct></RltdPties>
        <RltdAgts><DbtrAgt><FinInstnId><BIC>ABNANL2A</BIC></FinInstnId></DbtrAgt></RltdAgts>
        <RmtInf><Ustrd>FUND BR-000123</Ustrd></RmtInf></TxDtls>"""
    entry_xml = _entry("500.00", cd="CRDT", details=details, status="<Sts>BOOK</Sts>")
    data = _doc(entry_xml + entry_xml.replace("TOPUP-1", "TOPUP-2"), version="camt.054.001.02")

    (notification,) = parse_camt(data)

    assert (notification.kind, notification.version) == ("camt054", "001.02")
    assert [e.sequence for e in notification.entries] == [1, 2]
    detail = notification.entries[0].details[0]
    assert (detail.end_to_end_id, detail.amount) == ("TOPUP-1", Decimal("500.00"))
    assert (detail.counterparty_name, detail.counterparty_iban, detail.counterparty_bic) == (
        "Brand BV",
        "NL02ABNA0123456789",
        "ABNANL2A",
    )
    assert detail.remittance == "FUND BR-000123"


def test_missing_account_id_is_refused_with_the_line():
    head = """
      <Id>S-1</Id>
      <Acct><Ccy>EUR</Ccy></Acct>"""
    data = _doc(_entry(), statement_head=head)

    with pytest.raises(StatementParseError) as caught:
        parse_camt(data)

    assert caught.value.code == "missing_element"
    assert "Acct has no Id" in caught.value.message
    assert caught.value.line == data.decode().splitlines().index("      <Acct><Ccy>EUR</Ccy></Acct>") + 1


def test_missing_amount_is_refused_with_the_entry_line():
    data = _doc(_entry() + _entry().replace('<Amt Ccy="EUR">10.00</Amt>', ""))

    with pytest.raises(StatementParseError) as caught:
        parse_camt(data)

    ntry_lines = [n + 1 for n, text in enumerate(data.decode().splitlines()) if text.strip() == "<Ntry>"]
    assert caught.value.code == "missing_element"
    assert caught.value.line == ntry_lines[1]
    assert caught.value.details == {"line": ntry_lines[1]}


def test_missing_group_header_message_id_is_refused():
    data = _doc(_entry()).replace(b"<MsgId>M-1</MsgId>", b"")

    with pytest.raises(StatementParseError) as caught:
        parse_camt(data)

    assert caught.value.code == "missing_element"


def test_unknown_credit_debit_indicator_is_refused():
    with pytest.raises(StatementParseError) as caught:
        parse_camt(_doc(_entry(cd="CREDIT")))
    assert caught.value.code == "invalid_value"


# --- the streaming API ----------------------------------------------------------------------------


def test_streaming_yields_each_statement_with_lazy_entries():
    statements = iter_camt_statements(FIXTURES / "camt053.v2.multi.statement.xml")

    first = next(statements)
    assert first.statement_id == "253EURNL26VAYB8060476890"
    assert [e.amount for e in first.entries] == [Decimal("8.85")]
    second = next(statements)
    assert [e.amount for e in second.entries] == [Decimal("7.00")]
    assert next(statements, None) is None


def test_entries_skipped_by_advancing_cannot_be_read_later():
    statements = iter_camt_statements(FIXTURES / "camt053.v2.multi.statement.xml")
    first = next(statements)

    second = next(statements)

    assert [e.amount for e in second.entries] == [Decimal("7.00")]
    with pytest.raises(RuntimeError):
        list(first.entries)


def test_an_error_is_raised_where_the_bad_entry_is_reached():
    data = _doc(_entry("1.00") + _entry("2.00") + _entry("oops"))
    statement = next(iter_camt_statements(data))
    seen = []

    with pytest.raises(StatementParseError):
        for entry in statement.entries:
            seen.append(entry.amount)

    # The importer parses inside a transaction: whatever it wrote for the first two rolls back.
    assert seen == [Decimal("1.00"), Decimal("2.00")]


def test_a_statement_without_entries_is_still_reported():
    (statement,) = parse_camt(_doc(""))

    assert statement.statement_id == "S-1"
    assert statement.entries == ()
