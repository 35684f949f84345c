"""Round trips through the camt.053.001.08 writer in bench/camt_gen.py, and the 100,000-entry memory bound."""

import io
import os
import tracemalloc
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from bench.camt_gen import GenLine, GenStatement, GenTx, bench_lines, write_camt053
from reconciliation.statements import iter_camt_statements, parse_camt, validate_camt

IBAN = "NL91ABNA0417164300"
ANN_IBAN = "DE89370400440532013000"
MB = 1024 * 1024


def _write(statements) -> tuple[bytes, list]:
    out = io.BytesIO()
    results = write_camt053(out, statements)
    return out.getvalue(), results


def test_round_trip_of_every_line_shape():
    lines = [
        GenLine(amount=Decimal("25.00"), end_to_end_id="PAY-1", counterparty_name="Ann", counterparty_iban=ANN_IBAN),
        GenLine(amount=Decimal("7.50"), end_to_end_id=None),
        GenLine(
            batch=(
                GenTx(amount=Decimal("10.00"), end_to_end_id="PAY-2", counterparty_name="Bo"),
                GenTx(amount=Decimal("20.00"), end_to_end_id="PAY-3", counterparty_name="Cy"),
                GenTx(amount=Decimal("30.00"), end_to_end_id="PAY-4", counterparty_name="Di"),
            ),
            payment_information_id="PMTINF-1",
            batch_message_id="MSG-1",
        ),
        GenLine(
            amount=Decimal("25.00"),
            credit_debit="CRDT",
            end_to_end_id="PAY-1",
            return_reason="AC04",
            return_info="Account closed",
            counterparty_name="Ann",
        ),  # fmt: skip
        GenLine(amount=Decimal("12.00"), credit_debit="CRDT", reversal=True, end_to_end_id="PAY-5"),
        GenLine(
            amount=Decimal("1000.12345"),
            credit_debit="CRDT",
            remittance="FUND BR-000042",
            counterparty_name="Brand BV",
            booking_datetime=datetime(2026, 1, 15, 9, 30, tzinfo=UTC),
        ),  # fmt: skip
        GenLine(amount=Decimal("3.00"), status="PDNG", end_to_end_id="PAY-6"),
    ]
    statement = GenStatement(
        statement_id="RT-1", account_iban=IBAN, currency="EUR", opening_balance=Decimal("500.00"), lines=lines
    )

    data, (result,) = _write([statement])
    (parsed,) = parse_camt(data)
    (summary,) = validate_camt(data)

    # 500 - 25 - 7.50 - 60 + 25 + 12 + 1000.12345 (the pending 3.00 is not booked)
    assert result.closing_balance == Decimal("1444.62345")
    assert (parsed.opening_balance, parsed.closing_balance) == (Decimal("500.00"), result.closing_balance)
    assert summary.balances_match is True
    assert (parsed.kind, parsed.version, parsed.account_iban, parsed.currency) == ("camt053", "001.08", IBAN, "EUR")
    payout, unreferenced, batch, returned, reversal, top_up, pending = parsed.entries
    assert (payout.amount, payout.credit_debit, payout.details[0].end_to_end_id) == (Decimal("25.00"), "DBIT", "PAY-1")
    assert (payout.details[0].counterparty_name, payout.details[0].counterparty_iban) == ("Ann", ANN_IBAN)
    assert unreferenced.details[0].end_to_end_id is None
    assert batch.amount == Decimal("60.00")
    assert (batch.batch.payment_information_id, batch.batch.message_id) == ("PMTINF-1", "MSG-1")
    assert batch.batch.number_of_transactions == 3
    assert [(d.end_to_end_id, d.amount, d.counterparty_name) for d in batch.details] == [
        ("PAY-2", Decimal("10.00"), "Bo"),
        ("PAY-3", Decimal("20.00"), "Cy"),
        ("PAY-4", Decimal("30.00"), "Di"),
    ]
    assert returned.details[0].return_info.reason_code == "AC04"
    assert returned.details[0].return_info.additional_info == "Account closed"
    assert returned.details[0].return_info.original_end_to_end_id == "PAY-1"
    assert returned.details[0].counterparty_name == "Ann"
    assert (reversal.reversal, reversal.credit_debit) == (True, "CRDT")
    assert top_up.amount == Decimal("1000.12345")
    assert top_up.details[0].remittance == "FUND BR-000042"
    assert top_up.details[0].counterparty_name == "Brand BV"
    assert top_up.booking_datetime == datetime(2026, 1, 15, 9, 30, tzinfo=UTC)
    assert pending.status == "PDNG"
    assert len({e.entry_reference for e in parsed.entries}) == 7  # generated AcctSvcrRef are unique


def test_several_statements_in_one_generated_file():
    statements = [
        GenStatement(
            statement_id=f"RT-{n}",
            account_iban=IBAN,
            currency="EUR",
            opening_balance=Decimal("100.00"),
            lines=[GenLine(amount=Decimal(n), end_to_end_id=f"PAY-{n}")] * n,
            booking_date=date(2026, 1, n),
        )
        for n in (1, 2, 3)
    ]

    data, results = _write(statements)
    summaries = validate_camt(data)

    assert [r.closing_balance for r in results] == [Decimal("99"), Decimal("96"), Decimal("91")]
    assert [(s.statement_id, s.entry_count, s.balances_match) for s in summaries] == [
        ("RT-1", 1, True),
        ("RT-2", 2, True),
        ("RT-3", 3, True),
    ]


def test_a_batch_without_amount_needs_transactions():
    with pytest.raises(ValueError):
        _write([GenStatement(statement_id="X", account_iban=IBAN, currency="EUR", opening_balance=Decimal(0),
                             lines=[GenLine()])])  # fmt: skip


def _resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


@pytest.mark.slow
def test_100k_entries_stream_in_bounded_memory(tmp_path):
    path = tmp_path / "camt053-100k.xml"
    statement = GenStatement(
        statement_id="BIG-1",
        account_iban=IBAN,
        currency="EUR",
        opening_balance=Decimal("10000000.00"),
        lines=bench_lines(100_000),
    )
    (result,) = write_camt053(path, [statement])
    size = path.stat().st_size
    rss_before, rss_growth = _resident_bytes(), 0
    count, balance = 0, None

    tracemalloc.start()
    try:
        for parsed in iter_camt_statements(path, max_bytes=size):
            balance = parsed.opening_balance
            for entry in parsed.entries:
                count += 1
                if entry.status == "BOOK":
                    balance += entry.signed_amount
                if rss_before is not None and count % 10_000 == 0:
                    rss_growth = max(rss_growth, _resident_bytes() - rss_before)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert size > 50 * MB  # the file is far bigger than the bound below, so the bound means something
    assert count == 100_000
    assert balance == result.closing_balance
    assert peak < 100 * MB
    # tracemalloc does not see libxml2's own allocations; resident memory does (a kept tree is >> 100 MB).
    assert rss_growth < 100 * MB
