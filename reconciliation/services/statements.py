"""Importing bank statements: camt.053 / camt.054 (streamed) and bank CSV exports, each read in a
registered ``StatementFormat`` (the upload's, else its account's; ``statements.formats``).

An import is all or nothing: the whole file is parsed inside one transaction and any error (a
malformed file, an unknown account, a currency that is not the account's) rolls it back, so a bad
file imports nothing. A file already imported (same sha256) is a no-op. Matching runs after the
commit (see ``services.matching``).

Nothing a bank booked is lost, and nothing is counted twice:

- The identity of a booking is its account, status, the bank's reference (AcctSvcrRef, else
  NtryRef; of a CSV line the column its mapping names ``reference``, the bank's transaction id),
  direction (with the reversal flag), amount and booking date. A reference alone is not
  enough: banks reuse one for the several bookings of one order. A booking without a reference
  can only be told by its position: statement id, page, part and sequence, with the same values
  (a CSV's statement id is a hash of the file, so only the same bytes share it).
- A second booking with the same identity inside one file is stored with ``possible_duplicate``
  set, for a person to confirm. Across files (a camt.054 notification, then the camt.053
  statement, or the other way round) ``bank_reports`` decides: a later report of a booking is
  stored as a confirmation of the line holding it and posts nothing; a look-alike it cannot tell
  apart is stored ambiguous, for a person.
- A statement's pages (MsgPgntn / StmtPgntn, one Stmt/Id) are stored as pages of one statement;
  the balance check runs over the pages once the ones it needs are in. A block that one file
  repeats (same Stmt/Id and page) is stored as a further part; a page an earlier file brought is
  skipped when its entries and balances are the same, and the file is refused when they differ.
"""

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO
from zoneinfo import ZoneInfo, available_timezones

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from schwifty import IBAN
from schwifty.exceptions import SchwiftyException

from core.exceptions import Conflict, InvalidInput
from core.locks import STATEMENT_IMPORT_CLASS
from core.money import currency_exponent, validate_currency
from core.queue import enqueue
from reconciliation.db import constraint_name
from reconciliation.models import (
    AccountKind,
    BankStatement,
    PlatformBankAccount,
    ReconciliationAction,
    StatementImport,
    StatementLine,
    StatementLineStatus,
)
from reconciliation.services.accounts import account_get_or_create
from reconciliation.services.bank_reports import (
    CONFIRMATION,
    IMPORT_MATCH_TASK,
    Decision,
    Report,
    is_advice,
    reports_classify,
)
from reconciliation.statements.camt import iter_camt_statements
from reconciliation.statements.containers import describe, documents
from reconciliation.statements.csv_import import parse_csv
from reconciliation.statements.errors import StatementParseError
from reconciliation.statements.formats import StatementFormat, statement_format_get, statement_formats
from reconciliation.statements.types import ParsedEntry, ParsedStatement

LINE_CHUNK = 2000


@dataclass
class ImportResult:
    statement_import: StatementImport
    replayed: bool
    statements: list[BankStatement] = field(default_factory=list)
    skipped_statements: list[str] = field(default_factory=list)
    new_lines: int = 0  # lines holding a booking of their own (ambiguous ones included)
    duplicate_lines: int = 0  # later reports of an earlier file's booking: stored as confirmations
    ambiguous_lines: int = 0  # maybe such reports: stored, held for a person (``bank_reports``)
    possible_duplicates: int = 0  # stored, but the same booking as another of this file: to confirm

    @property
    def balance_mismatches(self) -> list[BankStatement]:
        return [s for s in self.statements if s.balance_mismatch]


def platform_bank_account_create(
    *,
    name: str,
    currency: str,
    iban: str = "",
    other_id: str = "",
    other_scheme: str = "",
    bic: str = "",
    time_zone: str = "",
    statement_format: str = "",
) -> PlatformBankAccount:
    """One currency of a platform bank account, and the ledger asset account that mirrors it.

    The account is named by ``iban`` or, for one without an IBAN, by ``other_id`` (camt
    ``Acct/Id/Othr/Id``) in ``other_scheme``. The same identifier in another currency is a second
    account with its own ledger account. Idempotent by (identifier, currency). Raises InvalidInput
    (``invalid_iban``, ``account_identifier``, ``invalid_time_zone``). ``time_zone`` is where the
    bank books (default ``TIME_ZONE``): booking days and times without offset are read there.
    ``statement_format`` names how its uploads are read by default (a registered format; blank:
    camt, kind from the file); InvalidInput ``unknown_statement_format`` otherwise."""
    currency = validate_currency(currency)
    if statement_format:
        statement_format = statement_format_get(statement_format).name
    if bool(iban.strip()) == bool(other_id.strip()):
        raise InvalidInput("Give the account's IBAN or its other identifier, one of them.", code="account_identifier")
    if iban.strip():
        try:
            iban = IBAN(iban).compact
        except SchwiftyException as exc:
            raise InvalidInput(f"{iban!r} is not a valid IBAN: {exc}", code="invalid_iban") from exc
        existing = PlatformBankAccount.objects.filter(iban=iban, currency=currency).first()
    else:
        other_id = other_id.strip()
        existing = PlatformBankAccount.objects.filter(other_id=other_id, currency=currency).first()
    if existing:
        return existing
    time_zone = time_zone or settings.TIME_ZONE
    if time_zone not in available_timezones():
        raise InvalidInput(f"{time_zone!r} is not a time zone.", code="invalid_time_zone")
    identifier = iban or f"othr:{other_id}"
    with transaction.atomic():
        ledger_account = account_get_or_create(
            code=f"platform:bank:{identifier}:{currency}",
            name=f"Bank {name} {currency}",
            kind=AccountKind.ASSET,
            currency=currency,
            allow_overdraft=True,
            owner_type="platform_bank",
            owner_id=iban or other_id,
        )
        return PlatformBankAccount.objects.create(
            name=name,
            iban=iban,
            other_id=other_id if not iban else "",
            other_scheme=other_scheme.strip() if not iban else "",
            bic=bic,
            currency=currency,
            time_zone=time_zone,
            statement_format=statement_format,
            ledger_account=ledger_account,
        )


def _account_for(
    accounts: dict[tuple[str, str], PlatformBankAccount], parsed: ParsedStatement, chosen: PlatformBankAccount | None
) -> PlatformBankAccount:
    """The registered account (identifier and currency) a statement is for. A statement that names
    no currency is for the identifier's only account; with several it must say which. A CSV names
    none: it is the account the upload was for (``chosen``); a camt statement for another account
    than the one chosen is refused."""
    if chosen is not None and parsed.kind == "csv":
        return chosen
    identifiers = [i for i in (parsed.account_iban, parsed.account_other_id) if i]
    held = [a for (identifier, _), a in accounts.items() if identifier in identifiers]
    if not held:
        raise InvalidInput(
            f"Statement {parsed.statement_id} is for account {parsed.account_id}, which is not a "
            "registered platform bank account.",
            code="unknown_bank_account",
            details={"account": parsed.account_id, "statement_id": parsed.statement_id},
        )
    currency = (parsed.currency or "").upper()
    if not currency and len(held) > 1:
        raise InvalidInput(
            f"Statement {parsed.statement_id} names no currency, and account {parsed.account_id} is held in "
            f"{', '.join(sorted(a.currency for a in held))}.",
            code="currency_ambiguous",
        )
    matching = [a for a in held if a.currency == currency] if currency else held
    if not matching:
        raise InvalidInput(
            f"Statement {parsed.statement_id} is in {currency}; account {parsed.account_id} is kept in "
            f"{', '.join(sorted(a.currency for a in held))}.",
            code="currency_mismatch",
        )
    if chosen is not None and matching[0].pk != chosen.pk:
        raise InvalidInput(
            f"Statement {parsed.statement_id} is for account {parsed.account_id} {matching[0].currency}, not "
            f"{chosen.identifier} {chosen.currency} the upload was for.",
            code="account_mismatch",
        )
    return matching[0]


def _sha256(source: bytes | str | os.PathLike | BinaryIO) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    if isinstance(source, bytes | bytearray | memoryview):
        digest.update(source)
        return digest.hexdigest(), len(source)
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
        return digest.hexdigest(), size
    position = source.tell()
    while chunk := source.read(1 << 20):
        digest.update(chunk if isinstance(chunk, bytes) else chunk.encode())
        size += len(chunk)
    source.seek(position)
    return digest.hexdigest(), size


def _exact_minor(amount: Decimal, currency: str) -> int | None:
    scaled = amount.scaleb(currency_exponent(currency))
    return int(scaled) if scaled == scaled.to_integral_value() else None


def ledger_minor(line: StatementLine) -> int:
    """What the ledger records for a line: exact when the bank's amount fits the minor unit, else
    rounded by the project's one rule (ROUND_HALF_UP); the sub-cent rest shows as a difference."""
    if line.amount_minor is not None:
        return line.amount_minor
    return int(Decimal(line.amount).scaleb(currency_exponent(line.currency)).quantize(Decimal(1), ROUND_HALF_UP))


def booking_identity(statement: ParsedStatement, entry: ParsedEntry, *, page: int, zone: ZoneInfo) -> str:
    """The key two sightings of one booking share (module docstring); at most 120 characters, so
    an occurrence suffix still fits the 128 of ``dedupe_key``."""
    direction = f"{entry.credit_debit}{'-R' if entry.reversal else ''}"
    day = _local_day(entry.booking_date, entry.booking_datetime, zone)
    values = f"{direction}|{entry.amount:.5f}|{day.isoformat() if day else '-'}"
    if entry.entry_reference:
        readable = f"{entry.status}:ref:{entry.entry_reference}|{values}"
        if len(readable) <= 120:
            return readable
        return f"{entry.status}:refh:{hashlib.sha256(readable.encode()).hexdigest()[:48]}"
    # Not the part: a block the file repeats is the same bookings again, a possible duplicate.
    raw = f"{statement.statement_id}|{page}|{entry.sequence}|{values}"
    return f"{entry.status}:pos:{hashlib.sha256(raw.encode()).hexdigest()[:48]}"


def _local_day(day: date | None, moment: datetime | None, zone: ZoneInfo) -> date | None:
    """A DtTm is an instant: its day is the date where the account is kept, not the date as
    written (2014-01-04T23:00Z is the 5th in Amsterdam). A DtTm without offset is taken as written."""
    if moment is not None and moment.tzinfo is not None:
        return moment.astimezone(zone).date()
    return day or (moment.date() if moment else None)


def _aware(moment: datetime | None, zone: ZoneInfo) -> datetime | None:
    """A bank time without offset (CreDtTm) is the bank's local time, the account's zone."""
    return moment.replace(tzinfo=zone) if moment is not None and moment.tzinfo is None else moment


@lru_cache(maxsize=32)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _amount_mismatch_note(entry: ParsedEntry) -> str:
    """The transaction details should add up to the booking; when every detail gives an amount in
    the booking's currency and they do not, the line is flagged for a person."""
    amounts = [
        d.amount for d in entry.details if d.amount is not None and (d.currency or entry.currency) == entry.currency
    ]
    if not entry.details or len(amounts) != len(entry.details):
        return ""
    total = sum(amounts, Decimal(0))
    # The bank's charges sit between the payment and the booking: taken from money in, added to
    # money out.
    charges = entry.details_charges
    if entry.amount in (total, total - charges if entry.credit_debit == "CRDT" else total + charges):
        return ""
    return f"The transaction details add up to {total}, the booking is {entry.amount}: check which is right."


DUPLICATE_NOTE = "Same reference, amount, date and direction as line {first} of this file: confirm it is a booking."


def _detail_json(entry: ParsedEntry) -> list[dict]:
    return [
        {
            "end_to_end_id": d.end_to_end_id,
            "instruction_id": d.instruction_id,
            "tx_id": d.tx_id,
            "uetr": d.uetr,
            "payment_information_id": d.payment_information_id,
            "amount": str(d.amount) if d.amount is not None else None,
            "currency": d.currency,
            "credit_debit": d.credit_debit,
            "counterparty_name": d.counterparty_name,
            "counterparty_iban": d.counterparty_iban,
            "remittance": d.remittance,
            "structured_reference": d.structured_reference,
            "return_reason_code": d.return_info.reason_code if d.return_info else None,
            "return_original_end_to_end_id": d.return_info.original_end_to_end_id if d.return_info else None,
        }
        for d in entry.details
    ]


# The columns an imported line is written with, in the order ``_line_row`` gives them; ``details``
# stays last because the PostgreSQL path serialises it itself.
_LINE_COLUMNS = (
    "statement_id",
    "bank_account_id",
    "sequence",
    "dedupe_key",
    "entry_reference",
    "amount",
    "amount_minor",
    "currency",
    "credit_debit",
    "bank_status",
    "booking_date",
    "value_date",
    "reversal",
    "bank_tx_code",
    "end_to_end_id",
    "uetr",
    "batch_message_id",
    "batch_payment_information_id",
    "batch_count",
    "counterparty_name",
    "counterparty_iban",
    "remittance",
    "return_reason_code",
    "status",
    "status_note",
    "matching_error",
    "possible_duplicate",
    "amount_mismatch",
    "review_note",
    "created_at",
    "confirms_id",
    "details",
)
# What a confirmation (a later report of a booking another line holds) does not keep: who and
# why are the confirmed line's to hold, so an erased person's values are never stored again.
_CONFIRMATION_BLANKS = {"counterparty_name": "", "counterparty_iban": "", "remittance": "", "details": []}
_COLUMN = {name: n for n, name in enumerate(_LINE_COLUMNS)}


def _line_row(
    statement: BankStatement, entry: ParsedEntry, key: str, duplicate_of: int | None, now, zone: ZoneInfo
) -> tuple:
    """One line's values in ``_LINE_COLUMNS`` order: a plain tuple, because building a model instance
    per line cost more than the database spent storing it. ``duplicate_of`` is the sequence of the
    first booking of this file with the same identity, if any."""
    currency = entry.currency.upper()
    if currency != statement.bank_account.currency:
        raise StatementParseError(
            "invalid_value",
            f"entry in {currency} on account {statement.bank_account.identifier} kept in "
            f"{statement.bank_account.currency}",
            entry.line,
        )
    first = entry.details[0] if entry.details else None
    single = first if len(entry.details) == 1 else None
    batch = entry.batch
    remittances = [d.remittance or d.structured_reference or "" for d in entry.details]
    mismatch = _amount_mismatch_note(entry)
    notes = [DUPLICATE_NOTE.format(first=duplicate_of) if duplicate_of is not None else "", mismatch]
    return (
        statement.pk,
        statement.bank_account_id,
        entry.sequence,
        key,
        (entry.entry_reference or "")[:64],
        entry.amount,
        _exact_minor(entry.amount, currency),
        currency,
        entry.credit_debit,
        entry.status[:8],
        _local_day(entry.booking_date, entry.booking_datetime, zone),
        _local_day(entry.value_date, entry.value_datetime, zone),
        entry.reversal,
        (entry.bank_tx_code or "")[:40],
        ((single.end_to_end_id if single else None) or "")[:64],
        ((single.uetr if single else None) or "")[:36],
        ((batch.message_id if batch else None) or (first.message_id if first else None) or "")[:64],
        ((batch.payment_information_id if batch else None) or (first.payment_information_id if first else None) or "")[
            :64
        ],
        (batch.number_of_transactions if batch and batch.number_of_transactions else None)
        or (len(entry.details) if len(entry.details) > 1 else None),
        ((first.counterparty_name if first else None) or "")[:140],
        ((first.counterparty_iban if first else None) or "")[:34],
        " ".join(r for r in remittances if r) or (entry.additional_info or ""),
        ((first.return_info.reason_code if first and first.return_info else None) or "")[:8],
        StatementLineStatus.NEW.value if entry.status == "BOOK" else StatementLineStatus.IGNORED.value,
        "",
        "",
        duplicate_of is not None,
        bool(mismatch),
        " ".join(n for n in notes if n)[:255],
        now,
        None,
        _detail_json(entry),
    )


def _report(row: tuple) -> Report:
    """A booked line of the new page as ``bank_reports`` compares it, from its stored values."""
    get = row.__getitem__
    return Report(
        sequence=get(_COLUMN["sequence"]),
        dedupe_key=get(_COLUMN["dedupe_key"]),
        credit_debit=get(_COLUMN["credit_debit"]),
        reversal=get(_COLUMN["reversal"]),
        amount=get(_COLUMN["amount"]),
        day=get(_COLUMN["booking_date"]),
        end_to_end_id=get(_COLUMN["end_to_end_id"]),
        uetr=get(_COLUMN["uetr"]),
        batch_payment_information_id=get(_COLUMN["batch_payment_information_id"]),
        counterparty_iban=get(_COLUMN["counterparty_iban"]),
        counterparty_name=get(_COLUMN["counterparty_name"]),
    )


def _decided(row: tuple, decision: Decision | None) -> tuple:
    """The row as stored once the page's reports are classified (``_LineWriter`` on SQLite; the
    PostgreSQL path does the same in its INSERT … SELECT)."""
    if decision is None:
        return row
    values = list(row)
    values[_COLUMN["status"]] = decision.status
    values[_COLUMN["confirms_id"]] = decision.confirms_id
    values[_COLUMN["review_note"]] = decision.note[:255]
    if decision.status == CONFIRMATION:
        values[_COLUMN["possible_duplicate"]] = False
        for name, blank in _CONFIRMATION_BLANKS.items():
            values[_COLUMN[name]] = blank
    return tuple(values)


class _LineWriter:
    """Writes a statement page's lines once the page is read and its reports classified
    (``finish(decisions)``: which lines confirm or may repeat an earlier file's booking).

    On PostgreSQL the rows stream through COPY into a temporary table, the decisions through a
    second one, and the lines land with one ``INSERT … SELECT`` joining the two; elsewhere the
    rows wait in memory and go in with ``bulk_create`` in chunks. Every entry is stored but a
    pending or informational one an earlier file stored: the unique ``line_unique_per_account``
    (imports taking turns) is the backstop that no booking is held by two lines. ``finish``
    returns how many lines were stored."""

    def __init__(self, statement: BankStatement):
        self._statement = statement
        self._postgres = connection.vendor == "postgresql"
        self._rows: list[tuple] = []
        self._copy = self._cursor = None
        if self._postgres:
            columns = ", ".join(_LINE_COLUMNS)
            self._cursor = connection.cursor()
            self._cursor.execute(
                f"CREATE TEMPORARY TABLE IF NOT EXISTS {_STAGING} ON COMMIT DROP AS "
                f"SELECT {columns} FROM {StatementLine._meta.db_table} WITH NO DATA"
            )
            self._cursor.execute(f"TRUNCATE {_STAGING}")
            self._copy_cm = self._cursor.cursor.copy(f"COPY {_STAGING} ({columns}) FROM STDIN")
            with connection.wrap_database_errors:
                self._copy = self._copy_cm.__enter__()

    def add(self, row: tuple) -> None:
        if self._copy is not None:
            with connection.wrap_database_errors:
                self._copy.write_row((*row[:-1], json.dumps(row[-1])))
            return
        self._rows.append(row)

    def abort(self, exc: BaseException) -> None:
        if self._copy is not None:
            self._copy_cm.__exit__(type(exc), exc, exc.__traceback__)
            self._copy = None
        if self._cursor is not None:
            self._cursor.close()

    def end(self) -> None:
        """Every row is added: COPY ends, so the connection can run queries again."""
        if self._copy is not None:
            with connection.wrap_database_errors:
                self._copy_cm.__exit__(None, None, None)
            self._copy = None

    def finish(self, decisions: dict[int, Decision]) -> int:
        if not self._postgres:
            rows = [_decided(row, decisions.get(row[_COLUMN["sequence"]])) for row in self._rows]
            for start in range(0, len(rows), LINE_CHUNK):
                StatementLine.objects.bulk_create(
                    [
                        StatementLine(**dict(zip(_LINE_COLUMNS, row, strict=True)))
                        for row in rows[start : start + LINE_CHUNK]
                    ],
                    ignore_conflicts=True,  # a known pending entry, as below
                )
            return StatementLine.objects.filter(statement=self._statement).count()
        self.end()
        with self._cursor as cursor:
            cursor.execute(
                f"CREATE TEMPORARY TABLE IF NOT EXISTS {_DECISIONS} "
                "(sequence integer PRIMARY KEY, status varchar(12), confirms_id bigint, note varchar(255)) "
                "ON COMMIT DROP"
            )
            cursor.execute(f"TRUNCATE {_DECISIONS}")
            if decisions:
                with (
                    connection.wrap_database_errors,
                    cursor.cursor.copy(f"COPY {_DECISIONS} (sequence, status, confirms_id, note) FROM STDIN") as copy,
                ):
                    for sequence, d in decisions.items():
                        copy.write_row((sequence, d.status, d.confirms_id, d.note[:255]))
            columns = ", ".join(_LINE_COLUMNS)
            # Ordered by position so that line ids follow the statement, which matching goes by.
            # Booked entries were classified above and never conflict (a later report is stored
            # as a confirmation, outside the unique identity); a pending or informational entry
            # that an earlier file stored is known and skipped, as before.
            cursor.execute(
                f"INSERT INTO {StatementLine._meta.db_table} ({columns}) SELECT {_DECIDED_SELECT} "
                f"FROM {_STAGING} s LEFT JOIN {_DECISIONS} d ON d.sequence = s.sequence ORDER BY s.sequence "
                "ON CONFLICT DO NOTHING"
            )
            return cursor.rowcount


def _decided_column(name: str) -> str:
    """``_decided`` in SQL, one column of the INSERT … SELECT."""
    confirmation = f"d.status = '{CONFIRMATION}'"
    if name == "status":
        return "COALESCE(d.status, s.status)"
    if name == "confirms_id":
        return "d.confirms_id"
    if name == "review_note":
        return "COALESCE(d.note, s.review_note)"
    if name == "possible_duplicate":
        return f"CASE WHEN {confirmation} THEN false ELSE s.possible_duplicate END"
    if name == "details":
        return f"CASE WHEN {confirmation} THEN '[]'::jsonb ELSE s.details END"
    if name in _CONFIRMATION_BLANKS:
        return f"CASE WHEN {confirmation} THEN '' ELSE s.{name} END"
    return f"s.{name}"


_DECIDED_SELECT = ", ".join(_decided_column(name) for name in _LINE_COLUMNS)
_DECISIONS = "reconciliation_statementline_reports"
_STAGING = "reconciliation_statementline_incoming"


def _parse(
    source, *, statement_format: StatementFormat | None, account: PlatformBankAccount | None, max_bytes: int
) -> Iterator[ParsedStatement]:
    """Every statement of the upload (a plain file, UTF-16/32 with a BOM, gzip, or a zip of many),
    read in ``statement_format``; without one an XML file is read as camt, whichever kind it is."""
    for document in documents(source, max_bytes=max_bytes):
        if statement_format is not None and statement_format.is_csv:
            if document.is_xml:
                raise StatementParseError(
                    "format_mismatch",
                    f"{document.description} is XML, not a {statement_format.name} CSV export; choose a camt format",
                )
            yield parse_csv(
                document.stream,
                mapping=statement_format.csv,
                account_iban=account.identifier,
                currency=account.currency,
                max_bytes=max_bytes,
            )
        elif document.is_xml:
            for parsed in iter_camt_statements(document.stream, max_bytes=max_bytes):
                if statement_format is not None and parsed.kind != statement_format.camt_kind:
                    raise StatementParseError(
                        "format_mismatch",
                        f"statement {parsed.statement_id} is a {parsed.kind[:4]}.{parsed.kind[4:]}, not the "
                        f"{statement_format.name} the upload was declared as",
                        parsed.line,
                    )
                yield parsed
        else:
            head = document.stream.read(512)
            csv_names = ", ".join(f.name for f in statement_formats() if f.is_csv)
            raise StatementParseError(
                "unsupported_document",
                f"{document.description} is {describe(head)}, not a camt.053/054 XML statement; a CSV export "
                f"is read in its bank's format ({csv_names}): choose the account and its format",
            )


def _format_and_account(
    statement_format: str, bank_account_id: int | None
) -> tuple[StatementFormat | None, PlatformBankAccount | None]:
    """The format an upload is read in and the account it was for, checked before anything is read."""
    account = None
    if bank_account_id is not None:
        account = PlatformBankAccount.objects.select_related("ledger_account").filter(pk=bank_account_id).first()
        if account is None:
            raise InvalidInput(f"No platform bank account {bank_account_id}.", code="unknown_bank_account")
    name = statement_format.strip() or (account.statement_format if account is not None else "")
    chosen = statement_format_get(name) if name else None
    if chosen is not None and chosen.is_csv and account is None:
        raise InvalidInput(
            f"A {chosen.name} export names no account: say which platform bank account it is from.",
            code="bank_account_required",
        )
    return chosen, account


def statement_import(
    *,
    source: bytes | str | Path | BinaryIO,
    filename: str,
    origin: str,
    actor=None,
    statement_format: str = "",
    bank_account_id: int | None = None,
    max_bytes: int | None = None,
    match: bool = True,
) -> ImportResult:
    """Import a bank file (bytes, a path or an open binary file; plain, UTF-16/32, gzip or zip).

    ``statement_format`` names a registered format (``statements.formats``); blank: the format of
    the account ``bank_account_id``, else camt.053/054 as the file says. A CSV export needs the
    account (it names none); a camt file for another account than ``bank_account_id`` is refused.

    Preconditions: every statement's account is a registered PlatformBankAccount.
    Guarantees: all or nothing (one durable transaction); the same file twice → ``replayed=True``
    and nothing changes; every entry is a stored line (a later report of an earlier file's
    booking as its confirmation, module docstring), and a page an earlier file brought with the
    same content is skipped; opening + booked entries is compared with the closing balance over the pages and
    any difference stored on the statement. When ``match``, the new lines are matched after the
    commit (task, at least once; the periodic sweep catches a crash in between).
    Raises StatementParseError (malformed, hostile, oversize or unreadable file: codes in its and
    ``containers.documents``' docstrings; ``format_mismatch``: not the declared format),
    InvalidInput (``unknown_statement_format``, ``bank_account_required``, ``account_mismatch``,
    ``unknown_bank_account``, ``currency_mismatch``, ``currency_ambiguous``) and Conflict
    (``statement_conflict``: a page imported before with other content; ``import_conflict``: a
    concurrent import of it).
    """
    chosen_format, account = _format_and_account(statement_format, bank_account_id)
    max_bytes = max_bytes or settings.STATEMENT_MAX_BYTES
    sha, size = _sha256(source)
    if size > max_bytes:
        raise StatementParseError("file_too_large", f"the file has {size} bytes; the limit is {max_bytes} bytes")
    existing = StatementImport.objects.filter(sha256=sha).first()
    if existing:
        return ImportResult(statement_import=existing, replayed=True)

    try:
        return _import_once(
            source=source,
            filename=filename,
            origin=origin,
            actor=actor,
            statement_format=chosen_format,
            chosen=account,
            max_bytes=max_bytes,
            match=match,
            sha=sha,
            size=size,
        )
    except IntegrityError as exc:
        # Two deliveries of the same file at once: the second waits on the first's unique sha256 and
        # then finds it (a replay); the same statement inside two different files racing is refused
        # whole and can simply be uploaded again (its known bookings are then skipped).
        existing = StatementImport.objects.filter(sha256=sha).first()
        if existing is not None:
            return ImportResult(statement_import=existing, replayed=True)
        if constraint_name(exc) not in _RACE_CONSTRAINTS:
            raise  # not a race: a bug or a broken row, which "upload again" would not fix
        raise Conflict(
            "Another import of the same statement was running; nothing was imported, upload the file again.",
            code="import_conflict",
        ) from exc


# The unique keys two imports of the same bytes or the same statement race on.
_RACE_CONSTRAINTS = frozenset(
    {"reconciliation_statementimport_sha256_key", "statement_page_unique_per_account", "line_unique_per_account"}
)


_OCCURRENCE = re.compile(r"#\d+$")  # the suffix ``key`` gives a booking's second, third … sighting


class _FileBookings:
    """What one file has shown so far: how often each booking identity occurred (a repeat is a
    possible duplicate) and how many blocks each statement page had (a repeat is a further part)."""

    def __init__(self):
        self._first: dict[tuple[int, str], tuple[int, int]] = {}  # identity -> (first sequence, count)
        self._parts: dict[tuple[int, str, int], int] = {}

    def part(self, account_id: int, statement_id: str, page: int) -> int:
        key = (account_id, statement_id, page)
        self._parts[key] = self._parts.get(key, 0) + 1
        return self._parts[key]

    def seed(self, account_id: int, stored) -> None:
        """Count the bookings earlier files stored for other pages of the same statement, as
        ``(dedupe_key, sequence)``: a page delivered in its own file that repeats one of them holds
        a further booking (stored, flagged), not one "already known"."""
        counts: dict[str, tuple[int, int]] = {}
        for key, sequence in stored:
            identity = _OCCURRENCE.sub("", key)
            first, n = counts.get(identity, (sequence, 0))
            counts[identity] = (min(first, sequence), n + 1)
        for identity, value in counts.items():
            self._first.setdefault((account_id, identity), value)

    def key(self, account_id: int, identity: str, sequence: int) -> tuple[str, int | None]:
        """The line's ``dedupe_key`` and, for a repeat, the sequence of the first occurrence."""
        first, seen = self._first.get((account_id, identity), (sequence, 0))
        self._first[(account_id, identity)] = (first, seen + 1)
        if seen == 0:
            return identity, None
        return f"{identity}#{seen + 1}", first


def _import_once(
    *, source, filename, origin, actor, statement_format, chosen, max_bytes, match, sha, size
) -> ImportResult:
    accounts = {(a.identifier, a.currency): a for a in PlatformBankAccount.objects.select_related("ledger_account")}
    with transaction.atomic(durable=True):
        _imports_take_turns()
        record = StatementImport.objects.create(
            sha256=sha, filename=filename[:255], size_bytes=size, kind="", source=origin, imported_by=actor
        )
        result = ImportResult(statement_import=record, replayed=False)
        seen = _FileBookings()
        total_entries = 0
        for parsed in _parse(source, statement_format=statement_format, account=chosen, max_bytes=max_bytes):
            record.kind = parsed.kind
            account = _account_for(accounts, parsed, chosen)
            page = parsed.page_number or 1
            part = seen.part(account.pk, parsed.statement_id, page)
            known = BankStatement.objects.filter(
                bank_account=account, statement_id=parsed.statement_id[:64], page_number=page, part=part
            ).first()
            if known is not None:
                count = _skip_known_page(known, parsed, seen, account=account, page=page, part=part)
                result.skipped_statements.append(parsed.statement_id)
                total_entries += count
                result.duplicate_lines += count
                continue
            statement, counts = _statement_page_import(parsed, record, seen, account=account, page=page, part=part)
            total_entries += statement.entry_count
            result.new_lines += statement.entry_count - statement.known_count - counts.confirmations
            result.duplicate_lines += statement.known_count + counts.confirmations
            result.ambiguous_lines += counts.ambiguous
            result.possible_duplicates += counts.possible_duplicates
            result.statements.append(statement)
        if not result.statements and not result.skipped_statements:
            raise StatementParseError("missing_element", "the file holds no statement")
        for account_id, statement_id in {(s.bank_account_id, s.statement_id) for s in result.statements}:
            _statement_balances_refresh(bank_account_id=account_id, statement_id=statement_id)
        for statement in result.statements:
            statement.refresh_from_db(fields=["balance_difference"])
        record.statements_count = len(result.statements)
        record.lines_count = total_entries
        record.new_lines_count = result.new_lines
        record.save(update_fields=["kind", "statements_count", "lines_count", "new_lines_count"])
        ReconciliationAction.objects.create(
            kind=ReconciliationAction.Kind.IMPORT,
            actor=actor,
            detail={
                "import_id": record.pk,
                "filename": record.filename,
                "statements": [s.statement_id for s in result.statements],
                "skipped_statements": result.skipped_statements,
                "new_lines": result.new_lines,
                "duplicate_lines": result.duplicate_lines,
                "possible_duplicates": result.possible_duplicates,
                "ambiguous_lines": result.ambiguous_lines,
            },
        )
        if match and result.new_lines:
            transaction.on_commit(lambda: _enqueue_match(record.pk))
    return result


def _statement_page_import(
    parsed: ParsedStatement, record: StatementImport, seen: _FileBookings, *, account, page: int, part: int
) -> tuple[BankStatement, "PageCounts"]:
    """Store one statement page and its lines: each booked entry holds its booking, or is a later
    report of an earlier file's booking (``bank_reports``). The caller's import holds the import
    lock, so two imports never both take a booking for new."""
    opening, closing, notes = _usable_balances(parsed, account)
    zone = _zone(account.time_zone)
    statement = BankStatement.objects.create(
        statement_import=record,
        bank_account=account,
        statement_id=parsed.statement_id[:64],
        kind=parsed.kind,
        version=parsed.version or "",
        message_id=(parsed.message_id or "")[:64],
        electronic_sequence_number=parsed.electronic_sequence_number,
        page_number=page,
        last_page=parsed.last_page,
        part=part,
        created_at_bank=_aware(parsed.created_at, zone),
        opening_balance=opening,
        opening_balance_date=parsed.opening_balance_date,
        closing_balance=closing,
        closing_balance_date=parsed.closing_balance_date,
        balance_note=("Not checked: " + "; ".join(notes) + ".")[:255] if notes else "",
    )
    seen.seed(
        account.pk,
        StatementLine.objects.filter(bank_account=account, statement__statement_id=statement.statement_id)
        .exclude(statement=statement)
        .values_list("dedupe_key", "sequence"),
    )
    credits = debits = Decimal(0)
    count = 0
    repeats: set[int] = set()
    booked: list[Report] = []
    now = timezone.now()
    writer = _LineWriter(statement)
    try:
        for entry in parsed.entries:
            count += 1
            identity = booking_identity(parsed, entry, page=page, zone=zone)
            key, duplicate_of = seen.key(account.pk, identity, entry.sequence)
            if duplicate_of is not None:
                repeats.add(entry.sequence)
            row = _line_row(statement, entry, key, duplicate_of, now, zone)
            if entry.status == "BOOK":
                if entry.credit_debit == "CRDT":
                    credits += entry.amount
                else:
                    debits += entry.amount
                booked.append(_report(row))
            writer.add(row)
        writer.end()  # the connection is free again for the classifying query
        decisions = reports_classify(
            booked,
            bank_account_id=account.pk,
            statement_id=statement.statement_id,
            import_id=record.pk,
            advice=is_advice(parsed.kind),
        )
    except BaseException as exc:
        writer.abort(exc)
        raise
    created = writer.finish(decisions)
    statement.entry_count = count
    statement.known_count = count - created
    statement.credit_total = credits
    statement.debit_total = debits
    statement.save(update_fields=["entry_count", "known_count", "credit_total", "debit_total"])
    return statement, PageCounts(
        confirmations=sum(d.status == CONFIRMATION for d in decisions.values()),
        ambiguous=sum(d.status != CONFIRMATION for d in decisions.values()),
        # A repeat inside the file that confirms an earlier file's booking is no longer in doubt.
        possible_duplicates=sum(
            1
            for sequence in repeats
            if decisions.get(sequence, None) is None or decisions[sequence].status != CONFIRMATION
        ),
    )


@dataclass(frozen=True)
class PageCounts:
    confirmations: int  # later reports of an earlier file's booking: stored, posting nothing
    ambiguous: int  # maybe such reports: held for a person
    possible_duplicates: int  # the same booking twice in this file: stored, flagged


def _imports_take_turns() -> None:
    """Imports take turns (until commit), whatever accounts their files name: each finds the pages
    and classifies the reports the other committed, and one lock taken first can make no cycle
    (``core.locks``; imports are a few a day). SQLite has one writer anyway."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, 0)", [STATEMENT_IMPORT_CLASS])


def _usable_balances(parsed: ParsedStatement, account) -> tuple[Decimal | None, Decimal | None, list[str]]:
    """A balance in another currency than the account's says nothing about it: the bookings are
    imported, that balance is not used, and the notes say why the statement cannot be checked."""
    opening, closing, notes = parsed.opening_balance, parsed.closing_balance, []
    if parsed.opening_balance_currency and parsed.opening_balance_currency.upper() != account.currency:
        opening = None
        notes.append(
            f"the opening balance is in {parsed.opening_balance_currency}, not the account's {account.currency}"
        )
    if parsed.closing_balance_currency and parsed.closing_balance_currency.upper() != account.currency:
        closing = None
        notes.append(
            f"the closing balance is in {parsed.closing_balance_currency}, not the account's {account.currency}"
        )
    return opening, closing, notes


def _skip_known_page(
    known: BankStatement, parsed: ParsedStatement, seen: _FileBookings, *, account, page: int, part: int
) -> int:
    """A page an earlier file imported: the same entries and balances are skipped (its bookings
    still count as seen in this file); anything else refuses the file, because which version is
    right is for the bank to say."""
    credits = debits = Decimal(0)
    count = 0
    for entry in parsed.entries:
        count += 1
        identity = booking_identity(parsed, entry, page=page, zone=_zone(account.time_zone))
        seen.key(account.pk, identity, entry.sequence)
        if entry.status == "BOOK":
            if entry.credit_debit == "CRDT":
                credits += entry.amount
            else:
                debits += entry.amount
    opening, closing, _ = _usable_balances(parsed, account)
    same = (count, credits, debits, opening, closing) == (
        known.entry_count,
        known.credit_total,
        known.debit_total,
        known.opening_balance,
        known.closing_balance,
    )
    if not same:
        raise Conflict(
            f"Statement {parsed.statement_id} page {page} was imported before (import {known.statement_import_id}) "
            f"with {known.entry_count} entries, credits {known.credit_total}, debits {known.debit_total}; this "
            f"file has {count}, {credits}, {debits}. Nothing was imported: ask the bank which is right.",
            code="statement_conflict",
            details={"statement_id": parsed.statement_id, "page": page, "import_id": known.statement_import_id},
        )
    return count


def _statement_balances_refresh(*, bank_account_id: int, statement_id: str) -> None:
    """Opening + booked entries against the closing balance, over a statement's pages in order.

    A page with both balances is checked on its own. A page with a closing balance only takes its
    opening from the running balance of the pages before it, known only when every earlier page
    is in (page 1 with its opening onwards); until then its difference stays unknown (None)."""
    running: Decimal | None = None
    expected = 1
    for page in BankStatement.objects.filter(bank_account_id=bank_account_id, statement_id=statement_id).order_by(
        "page_number", "part"
    ):
        if page.page_number not in (expected - 1, expected):
            running = None  # a page is missing: what came before no longer carries over
        expected = page.page_number + 1
        opening = page.opening_balance if page.opening_balance is not None else running
        computed = None if opening is None else opening + page.credit_total - page.debit_total
        difference = None
        if computed is not None and page.closing_balance is not None:
            difference = page.closing_balance - computed
        running = page.closing_balance if page.closing_balance is not None else computed
        if difference != page.balance_difference:
            BankStatement.objects.filter(pk=page.pk).update(balance_difference=difference)


def _enqueue_match(import_id: int) -> None:
    """One match task per worker of the cluster: they take the import's chunks under SKIP LOCKED,
    so a big statement is matched on every core without any coordination between them."""
    for part in range(max(1, int(settings.Q_CLUSTER.get("workers", 1)))):
        enqueue(IMPORT_MATCH_TASK, import_id, task_name=f"match-import-{import_id}-{part}")
