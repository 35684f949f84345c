"""Write the camt.053.001.08 a bank would send back, from simple line specs; a test helper and a bench.

The writer streams with ``lxml.etree.xmlfile``: each ``Ntry`` is built, written and dropped, so
100,000 entries need no more memory than one. Balances come before the entries in camt, so the
lines are read twice (first to compute the closing balance): pass a sequence, or a callable that
returns a fresh iterable each time (a generator function keeps even the specs out of memory).

    python -m bench.camt_gen generate --entries 100000 --out /tmp/camt.xml
    python -m bench.camt_gen parse /tmp/camt.xml          # time + peak memory of the parser, as JSON
"""

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import BinaryIO

from lxml import etree

NS = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"


@dataclass(frozen=True, slots=True)
class GenTx:
    """One payment inside a batch booking."""

    amount: Decimal
    end_to_end_id: str | None = None  # None writes NOTPROVIDED, as banks do
    remittance: str | None = None
    counterparty_name: str | None = None
    counterparty_iban: str | None = None
    instruction_id: str | None = None


@dataclass(frozen=True, slots=True)
class GenLine:
    """One statement entry. ``amount`` may be left out for a batch: it is then the sum of ``batch``."""

    amount: Decimal | None = None
    credit_debit: str = "DBIT"
    end_to_end_id: str | None = None  # None writes NOTPROVIDED
    remittance: str | None = None
    counterparty_name: str | None = None
    counterparty_iban: str | None = None
    counterparty_bic: str | None = None
    return_reason: str | None = None  # writes TxDtls/RtrInf/Rsn/Cd (e.g. AC04)
    return_info: str | None = None
    reversal: bool = False
    batch: tuple[GenTx, ...] = ()
    payment_information_id: str | None = None  # Btch/PmtInfId (and Refs/PmtInfId)
    batch_message_id: str | None = None  # Btch/MsgId
    entry_reference: str | None = None  # AcctSvcrRef; generated when None
    status: str = "BOOK"
    booking_date: date | None = None  # the statement's booking date when None
    booking_datetime: datetime | None = None  # writes BookgDt/DtTm instead of Dt
    value_date: date | None = None

    @property
    def entry_amount(self) -> Decimal:
        if self.amount is not None:
            return self.amount
        if not self.batch:
            raise ValueError("a line needs an amount or batch transactions")
        return sum((tx.amount for tx in self.batch), Decimal(0))


@dataclass(frozen=True)
class GenStatement:
    statement_id: str
    account_iban: str
    currency: str
    opening_balance: Decimal  # signed: negative is a debit balance
    lines: Sequence[GenLine] | Callable[[], Iterable[GenLine]]
    booking_date: date = field(default_factory=lambda: date(2026, 1, 15))
    electronic_sequence_number: int | None = 1
    bic: str = "TESTNL2AXXX"

    def iter_lines(self) -> Iterable[GenLine]:
        return self.lines() if callable(self.lines) else self.lines


@dataclass(frozen=True, slots=True)
class GenResult:
    statement_id: str
    entry_count: int
    opening_balance: Decimal
    closing_balance: Decimal


def write_camt053(
    out: str | Path | BinaryIO,
    statements: Iterable[GenStatement],
    *,
    message_id: str = "GENMSG0001",
    created_at: datetime | None = None,
) -> list[GenResult]:
    """Write one camt.053.001.08 file with the given statements; returns their entry counts and
    closing balances (opening + booked credits - booked debits)."""
    created_at = created_at or datetime(2026, 1, 15, 18, 0, tzinfo=UTC)
    results = []
    with etree.xmlfile(out, encoding="utf-8") as xf:
        xf.write_declaration()
        with xf.element(f"{{{NS}}}Document", nsmap={None: NS}), xf.element(f"{{{NS}}}BkToCstmrStmt"):
            header = _el("GrpHdr")
            _sub(header, "MsgId", message_id)
            _sub(header, "CreDtTm", created_at.isoformat())
            xf.write("\n")
            xf.write(header, pretty_print=True)
            for statement in statements:
                results.append(_write_statement(xf, statement, created_at))
                xf.write("\n")
    return results


def _write_statement(xf, statement: GenStatement, created_at: datetime) -> GenResult:
    count, closing = 0, statement.opening_balance
    for line in statement.iter_lines():
        count += 1
        if line.status == "BOOK":
            amount = line.entry_amount
            closing += amount if line.credit_debit == "CRDT" else -amount

    with xf.element(f"{{{NS}}}Stmt"):
        head = _el("Stmt")
        _sub(head, "Id", statement.statement_id)
        if statement.electronic_sequence_number is not None:
            _sub(head, "ElctrncSeqNb", str(statement.electronic_sequence_number))
        _sub(head, "CreDtTm", created_at.isoformat())
        account = _sub(head, "Acct")
        _sub(_sub(account, "Id"), "IBAN", statement.account_iban)
        _sub(account, "Ccy", statement.currency)
        _sub(_sub(_sub(account, "Svcr"), "FinInstnId"), "BICFI", statement.bic)
        _balance(head, "OPBD", statement.opening_balance, statement.currency, statement.booking_date)
        _balance(head, "CLBD", closing, statement.currency, statement.booking_date)
        xf.write("\n")
        for child in head:
            xf.write(child, pretty_print=True)
        written = 0
        for sequence, line in enumerate(statement.iter_lines(), start=1):
            xf.write(_entry(statement, line, sequence), pretty_print=True)
            written += 1
        if written != count:
            raise ValueError("the statement's lines changed between the two passes")
    return GenResult(statement.statement_id, count, statement.opening_balance, closing)


def _el(tag: str):
    # Subtrees are built without a namespace: written inside <Document xmlns=...> they inherit the
    # default namespace, instead of repeating the declaration on every entry.
    return etree.Element(tag)


def _sub(parent, tag: str, text: str | None = None, **attrs):
    child = etree.SubElement(parent, tag, attrs)
    if text is not None:
        child.text = text
    return child


def _balance(parent, code: str, amount: Decimal, currency: str, day: date) -> None:
    bal = _sub(parent, "Bal")
    _sub(_sub(_sub(bal, "Tp"), "CdOrPrtry"), "Cd", code)
    _sub(bal, "Amt", f"{abs(amount)}", Ccy=currency)
    _sub(bal, "CdtDbtInd", "CRDT" if amount >= 0 else "DBIT")
    _sub(_sub(bal, "Dt"), "Dt", day.isoformat())


def _entry(statement: GenStatement, line: GenLine, sequence: int):
    ntry = _el("Ntry")
    _sub(ntry, "Amt", f"{line.entry_amount}", Ccy=statement.currency)
    _sub(ntry, "CdtDbtInd", line.credit_debit)
    if line.reversal:
        _sub(ntry, "RvslInd", "true")
    _sub(_sub(ntry, "Sts"), "Cd", line.status)
    booking = _sub(ntry, "BookgDt")
    if line.booking_datetime is not None:
        _sub(booking, "DtTm", line.booking_datetime.isoformat())
    else:
        _sub(booking, "Dt", (line.booking_date or statement.booking_date).isoformat())
    _sub(_sub(ntry, "ValDt"), "Dt", (line.value_date or line.booking_date or statement.booking_date).isoformat())
    _sub(ntry, "AcctSvcrRef", line.entry_reference or f"{statement.statement_id}-{sequence:07d}")
    family = "RRTN" if line.return_reason else ("ESCT" if line.credit_debit == "DBIT" else "RCDT")
    domain = _sub(_sub(ntry, "BkTxCd"), "Domn")
    _sub(domain, "Cd", "PMNT")
    fmly = _sub(domain, "Fmly")
    _sub(fmly, "Cd", "ICDT" if line.credit_debit == "DBIT" or line.return_reason else "RCDT")
    _sub(fmly, "SubFmlyCd", family)

    details = _sub(ntry, "NtryDtls")
    if line.batch:
        btch = _sub(details, "Btch")
        if line.batch_message_id:
            _sub(btch, "MsgId", line.batch_message_id)
        if line.payment_information_id:
            _sub(btch, "PmtInfId", line.payment_information_id)
        _sub(btch, "NbOfTxs", str(len(line.batch)))
        _sub(btch, "TtlAmt", f"{line.entry_amount}", Ccy=statement.currency)
        _sub(btch, "CdtDbtInd", line.credit_debit)
        for tx in line.batch:
            _tx_details(details, statement, line, tx)
    else:
        single = GenTx(
            amount=line.entry_amount,
            end_to_end_id=line.end_to_end_id,
            remittance=line.remittance,
            counterparty_name=line.counterparty_name,
            counterparty_iban=line.counterparty_iban,
        )
        _tx_details(details, statement, line, single)
    return ntry


def _tx_details(parent, statement: GenStatement, line: GenLine, tx: GenTx) -> None:
    txd = _sub(parent, "TxDtls")
    refs = _sub(txd, "Refs")
    if line.batch_message_id:
        _sub(refs, "MsgId", line.batch_message_id)
    if line.payment_information_id:
        _sub(refs, "PmtInfId", line.payment_information_id)
    if tx.instruction_id:
        _sub(refs, "InstrId", tx.instruction_id)
    _sub(refs, "EndToEndId", tx.end_to_end_id or "NOTPROVIDED")
    _sub(txd, "Amt", f"{tx.amount}", Ccy=statement.currency)
    _sub(txd, "CdtDbtInd", line.credit_debit)
    # The counterparty is the creditor of money we paid and the debtor of money we received;
    # a reversal keeps the roles of the payment it undoes.
    incoming = (line.credit_debit == "CRDT") != line.reversal
    if line.return_reason:
        incoming = False  # a return repeats the original payment's parties: we were the debtor
    ours, theirs = ("Cdtr", "Dbtr") if incoming else ("Dbtr", "Cdtr")
    parties = _sub(txd, "RltdPties")
    name = tx.counterparty_name or line.counterparty_name
    iban = tx.counterparty_iban or line.counterparty_iban
    for role in ("Dbtr", "Cdtr"):  # the schema wants Dbtr, DbtrAcct, Cdtr, CdtrAcct in this order
        if role == ours:
            _sub(_sub(_sub(parties, f"{role}Acct"), "Id"), "IBAN", statement.account_iban)
            continue
        if name:
            _sub(_sub(_sub(parties, role), "Pty"), "Nm", name)
        if iban:
            _sub(_sub(_sub(parties, f"{role}Acct"), "Id"), "IBAN", iban)
    if line.counterparty_bic:
        _sub(_sub(_sub(txd, "RltdAgts"), f"{theirs}Agt"), "FinInstnId").append(_bic(line.counterparty_bic))
    if tx.remittance:
        _sub(_sub(txd, "RmtInf"), "Ustrd", tx.remittance)
    if line.return_reason:
        rtr = _sub(txd, "RtrInf")
        _sub(_sub(rtr, "Rsn"), "Cd", line.return_reason)
        if line.return_info:
            _sub(rtr, "AddtlInf", line.return_info)


def _bic(value: str):
    el = _el("BICFI")
    el.text = value
    return el


# --- the bench ------------------------------------------------------------------------------------


def bench_lines(count: int, *, prefix: str = "PAY") -> Callable[[], Iterable[GenLine]]:
    """A deterministic mix like a payout platform's account: mostly single payouts (debits), top-ups
    with a funding reference, and every so often a batch booking, a return, a reversal and a
    NOTPROVIDED end-to-end id."""

    def lines() -> Iterable[GenLine]:
        for i in range(count):
            amount = Decimal(1000 + (i * 37) % 90000).scaleb(-2)
            if i % 1000 == 999:
                txs = tuple(GenTx(amount=amount + k, end_to_end_id=f"{prefix}-{i:08d}-{k}") for k in range(3))
                yield GenLine(credit_debit="DBIT", batch=txs, payment_information_id=f"PMTINF-{i:08d}")
            elif i % 200 == 199:
                yield GenLine(
                    amount=amount, credit_debit="CRDT", end_to_end_id=f"{prefix}-{i:08d}", return_reason="AC04"
                )
            elif i % 50 == 49:
                yield GenLine(
                    amount=amount, credit_debit="CRDT", remittance=f"TOPUP BR-{i:06d}", counterparty_name="Brand BV"
                )
            elif i % 997 == 996:
                yield GenLine(amount=amount, credit_debit="CRDT", reversal=True, end_to_end_id=f"{prefix}-{i:08d}")
            elif i % 101 == 100:
                yield GenLine(amount=amount, credit_debit="DBIT")
            else:
                yield GenLine(
                    amount=amount,
                    credit_debit="DBIT",
                    end_to_end_id=f"{prefix}-{i:08d}",
                    counterparty_name=f"Recipient {i}",
                    counterparty_iban="NL91ABNA0417164300",
                    remittance=f"Reward payout {i}",
                )

    return lines


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--entries", type=int, default=100_000)
    gen.add_argument("--out", required=True)
    gen.add_argument("--iban", default="NL91ABNA0417164300")
    run = sub.add_parser("parse")
    run.add_argument("path")
    args = parser.parse_args(argv)

    if args.command == "generate":
        started = time.perf_counter()
        statement = GenStatement(
            statement_id="BENCH-STMT-1",
            account_iban=args.iban,
            currency="EUR",
            opening_balance=Decimal("100000000.00"),
            lines=bench_lines(args.entries),
        )
        (result,) = write_camt053(args.out, [statement])
        report = {
            "entries": result.entry_count,
            "closing_balance": str(result.closing_balance),
            "bytes": Path(args.out).stat().st_size,
            "seconds": round(time.perf_counter() - started, 2),
            "peak_rss_mb": round(_peak_rss_mb(), 1),
        }
    else:
        from reconciliation.statements.camt import validate_camt

        baseline = _peak_rss_mb()
        started, cpu_started = time.perf_counter(), time.process_time()
        summaries = validate_camt(args.path, max_bytes=1 << 30)
        report = {
            "statements": len(summaries),
            "entries": sum(s.entry_count for s in summaries),
            "balances_match": [s.balances_match for s in summaries],
            "seconds": round(time.perf_counter() - started, 2),
            "cpu_seconds": round(time.process_time() - cpu_started, 2),
            "peak_rss_mb": round(_peak_rss_mb(), 1),
            "rss_before_parse_mb": round(baseline, 1),
        }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
