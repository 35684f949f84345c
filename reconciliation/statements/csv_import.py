"""CSV bank exports, described per bank by a ``CsvMapping``, parsed into the same shapes as camt.

A CSV export has no statement id, no balances and usually no entry reference: the statement id
defaults to a hash of the file (so re-importing the same file is recognisable), balances are what the
caller passes, and ``entry_reference`` is ``None`` unless the mapping names a reference column. Map
the bank's own transaction id there whenever the export has one: it is what tells a booking in two
overlapping exports apart from two bookings (``services.statements`` module docstring).
"""

import csv
import hashlib
import io
import re
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

from .errors import StatementParseError
from .source import DEFAULT_MAX_BYTES, StatementSource, open_limited
from .types import CREDIT, DEBIT, CreditDebit, ParsedEntry, ParsedParty, ParsedStatement, ParsedTxDetail

Column = str | int  # a header name, or a 0-based index when the file has no header row
# A tuple names alternatives: the first of them the header has and the row fills (a payer column for
# money in, a payee column for money out; a column only newer exports carry).
Columns = Column | tuple[Column, ...]

_NUMBER = re.compile(r"^(\d+)(?:\.(\d{1,5}))?$")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_IBAN_SHAPE = re.compile(r"^[A-Z]{2}\d{2}[A-Z0-9]{11,30}$")


@dataclass(frozen=True, slots=True)
class CsvMapping:
    """How one bank lays out its CSV export.

    The amount comes from exactly one of: ``amount`` (signed, negative = money out), ``debit`` and/or
    ``credit`` (separate columns, one filled per row), or ``amount`` plus ``direction`` (an unsigned
    amount and a column holding a credit/debit marker).

    ``status`` names a column saying whether the bank booked the row: a value in ``booked_statuses``
    is a booking (camt ``BOOK``), one in ``pending_statuses`` is ``PDNG``, any other (declined,
    failed) is ``INFO``; only a booking needs a booking date. Without it every row is a booking.
    ``date_format`` may list several formats, tried in order (a date with or without its time); a
    value with a time is an instant in ``time_zone`` when the mapping gives one, so its booking day
    is the account's (a "completed (UTC)" column), else it is taken as written.
    """

    name: str
    booking_date: Column
    amount: Column | None = None
    debit: Column | None = None
    credit: Column | None = None
    direction: Column | None = None
    credit_markers: tuple[str, ...] = ("C", "CR", "CRDT", "H")
    debit_markers: tuple[str, ...] = ("D", "DR", "DBIT", "S")
    value_date: Columns | None = None
    currency: Column | None = None
    default_currency: str | None = None
    reference: Column | None = None
    counterparty_name: Columns | None = None
    payer_name: Columns | None = None  # the other party of money in, when the export has its own column
    payee_name: Columns | None = None  # … and of money out
    counterparty_iban: Columns | None = None
    counterparty_bic: Columns | None = None
    remittance: tuple[Column, ...] = ()  # several columns are joined with a space
    end_to_end_id: Column | None = None
    status: Column | None = None
    booked_statuses: tuple[str, ...] = ()
    pending_statuses: tuple[str, ...] = ()
    delimiter: str = ","
    quotechar: str = '"'
    decimal_separator: str = "."
    thousands_separator: str = ""
    date_format: str | tuple[str, ...] = "%Y-%m-%d"
    time_zone: str | None = None
    encoding: str = "utf-8-sig"
    fallback_encoding: str | None = None  # e.g. "latin-1" for banks that export in their own code page
    skip_lines: int = 0  # preamble lines before the header
    has_header: bool = True

    def __post_init__(self):
        separate = self.debit is not None or self.credit is not None
        if (self.amount is None) == (not separate) or (self.direction is not None and self.amount is None):
            raise ValueError(f"mapping {self.name!r}: give amount, amount+direction, or debit/credit columns")
        if self.decimal_separator == self.thousands_separator:
            raise ValueError(f"mapping {self.name!r}: decimal and thousands separators must differ")
        if self.status is not None and not self.booked_statuses:
            raise ValueError(f"mapping {self.name!r}: a status column needs the values that mean booked")
        if self.time_zone is not None:
            ZoneInfo(self.time_zone)  # an unknown zone fails here, when the mapping is defined

    @property
    def date_formats(self) -> tuple[str, ...]:
        return (self.date_format,) if isinstance(self.date_format, str) else self.date_format


def parse_csv(
    source: StatementSource,
    *,
    mapping: CsvMapping,
    account_iban: str,
    statement_id: str | None = None,
    currency: str | None = None,
    opening_balance: Decimal | None = None,
    closing_balance: Decimal | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ParsedStatement:
    """Parse a whole CSV export into one statement (``kind='csv'``, entries as a tuple).

    Raises ``StatementParseError`` with the physical line number for: oversize (before reading),
    undecodable bytes (``encoding_error``), a mapped column missing from the header
    (``missing_column``), a row with an unreadable date/amount/currency or no amount
    (``invalid_row``). Nothing is returned for a file with any bad row.
    """
    with open_limited(source, max_bytes=max_bytes) as stream:
        raw = stream.read()
    text = _decode(raw, mapping)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=mapping.delimiter, quotechar=mapping.quotechar)
    try:
        entries = tuple(_rows(reader, mapping, currency, account_iban))
    except csv.Error as exc:
        raise StatementParseError("invalid_row", f"unreadable CSV: {exc}", reader.line_num) from exc
    return ParsedStatement(
        kind="csv",
        version=None,
        message_id=None,
        statement_id=statement_id or f"csv-{hashlib.sha256(raw).hexdigest()[:32]}",
        electronic_sequence_number=None,
        legal_sequence_number=None,
        page_number=None,
        last_page=None,
        created_at=None,
        from_datetime=None,
        to_datetime=None,
        account_iban=account_iban.replace(" ", "").upper(),
        account_other_id=None,
        currency=currency or mapping.default_currency or (entries[0].currency if entries else None),
        opening_balance=opening_balance,
        opening_balance_date=None,
        closing_balance=closing_balance,
        closing_balance_date=None,
        opening_balance_currency=None,
        closing_balance_currency=None,
        line=None,
        entries=entries,
    )


def _decode(raw: bytes, mapping: CsvMapping) -> str:
    try:
        return raw.decode(mapping.encoding)
    except UnicodeDecodeError as exc:
        if mapping.fallback_encoding is None:
            line = raw[: exc.start].count(b"\n") + 1
            raise StatementParseError(
                "encoding_error",
                f"the file is not {mapping.encoding} (byte {exc.start}) and no fallback is declared",
                line,
            ) from exc
    try:
        return raw.decode(mapping.fallback_encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise StatementParseError(
            "encoding_error", f"the file is neither {mapping.encoding} nor {mapping.fallback_encoding}", line
        ) from exc


class _Row:
    def __init__(self, cells: list[str], index: dict[Column, int], line: int):
        self.cells, self.index, self.line = cells, index, line

    def get(self, column: Columns | None) -> str | None:
        if column is None:
            return None
        for alternative in column if isinstance(column, tuple) else (column,):
            position = self.index.get(alternative)
            value = self.cells[position].strip() if position is not None and position < len(self.cells) else ""
            if value:
                return value
        return None

    def error(self, message: str) -> StatementParseError:
        return StatementParseError("invalid_row", message, self.line)


def _mapped_columns(mapping: CsvMapping) -> list[Columns]:
    single = [
        mapping.booking_date, mapping.amount, mapping.debit, mapping.credit, mapping.direction, mapping.value_date,
        mapping.currency, mapping.reference, mapping.counterparty_name, mapping.payer_name, mapping.payee_name,
        mapping.counterparty_iban, mapping.counterparty_bic, mapping.end_to_end_id, mapping.status,
    ]  # fmt: skip
    return [c for c in single if c is not None] + list(mapping.remittance)


def _rows(reader, mapping: CsvMapping, currency: str | None, account_iban: str):
    for _ in range(mapping.skip_lines):
        next(reader, None)
    columns = _mapped_columns(mapping)
    if mapping.has_header:
        header = next(reader, None)
        if header is None:
            raise StatementParseError("missing_column", "the file has no header row", reader.line_num)
        names = {name.strip().casefold(): position for position, name in enumerate(header)}
        index: dict[Column, int] = {}
        for column in columns:
            alternatives = column if isinstance(column, tuple) else (column,)
            found = {c: names[c.casefold()] for c in alternatives if isinstance(c, str) and c.casefold() in names}
            if not found:
                shown = " or ".join(repr(c) for c in alternatives)
                raise StatementParseError(
                    "missing_column", f"column {shown} is not in the header {header!r}", reader.line_num
                )
            index.update(found)
    else:
        flat = [c for column in columns for c in (column if isinstance(column, tuple) else (column,))]
        index = {column: column for column in flat if isinstance(column, int)}
        if len(index) != len(set(flat)):
            raise ValueError(f"mapping {mapping.name!r}: without a header row, columns are 0-based indexes")

    sequence = 0
    own_iban = account_iban.replace(" ", "").upper()
    for cells in reader:
        if not any(cell.strip() for cell in cells):
            continue
        sequence += 1
        yield _entry(_Row(cells, index, reader.line_num), mapping, sequence, currency, own_iban)


def _entry(row: _Row, mapping: CsvMapping, sequence: int, currency: str | None, own_iban: str) -> ParsedEntry:
    amount, direction = _amount_and_direction(row, mapping)
    entry_currency = (row.get(mapping.currency) or mapping.default_currency or currency or "").upper()
    if not _CURRENCY.match(entry_currency):
        raise row.error(f"currency {entry_currency or None!r} is not a 3-letter code")
    status = _status(row, mapping)
    booking_date, booking_datetime = _date(row, mapping.booking_date, mapping, required=status == "BOOK")
    value_date, value_datetime = _date(row, mapping.value_date, mapping, required=False)
    end_to_end = row.get(mapping.end_to_end_id)
    if end_to_end is not None and end_to_end.upper() == "NOTPROVIDED":
        end_to_end = None
    iban = (row.get(mapping.counterparty_iban) or "").replace(" ", "").upper()
    # Exports put any account number in that column (a UK sort code and number): only an IBAN is one.
    iban = iban if _IBAN_SHAPE.match(iban) else None
    name = row.get(mapping.payer_name if direction == CREDIT else mapping.payee_name)
    counterparty = ParsedParty(
        name=name or row.get(mapping.counterparty_name), iban=iban, bic=row.get(mapping.counterparty_bic)
    )
    ours = ParsedParty(iban=own_iban)
    remittance = " ".join(v for v in (row.get(c) for c in mapping.remittance) if v) or None
    reference = row.get(mapping.reference)
    detail = ParsedTxDetail(
        end_to_end_id=end_to_end,
        instruction_id=None,
        tx_id=None,
        uetr=None,
        message_id=None,
        payment_information_id=None,
        account_servicer_reference=reference,
        amount=amount,
        currency=entry_currency,
        credit_debit=direction,
        counterparty_name=counterparty.name,
        counterparty_iban=counterparty.iban,
        counterparty_bic=counterparty.bic,
        debtor=counterparty if direction == CREDIT else ours,
        creditor=ours if direction == CREDIT else counterparty,
        remittance=remittance,
        structured_reference=None,
        return_info=None,
        bank_tx_code=None,
        additional_info=None,
    )
    return ParsedEntry(
        sequence=sequence,
        line=row.line,
        entry_reference=reference,
        account_servicer_reference=reference,
        entry_ref=None,
        amount=amount,
        currency=entry_currency,
        credit_debit=direction,
        status=status,
        booking_date=booking_date,
        booking_datetime=booking_datetime,
        value_date=value_date or booking_date,
        value_datetime=value_datetime if value_date else booking_datetime,
        reversal=False,
        bank_tx_code=None,
        bank_tx_code_proprietary=None,
        batch=None,
        details=(detail,),
        additional_info=None,
    )


def _status(row: _Row, mapping: CsvMapping) -> str:
    if mapping.status is None:
        return "BOOK"
    value = (row.get(mapping.status) or "").upper()
    if value in (s.upper() for s in mapping.booked_statuses):
        return "BOOK"
    return "PDNG" if value in (s.upper() for s in mapping.pending_statuses) else "INFO"


def _date(
    row: _Row, column: Columns | None, mapping: CsvMapping, *, required: bool
) -> tuple[date | None, datetime | None]:
    """The day as written and, for a value with a time in a mapping with a ``time_zone``, the
    instant (the importer takes its day where the account is kept)."""
    raw = row.get(column)
    if raw is None:
        if required:
            raise row.error(f"column {column!r} (date) is empty")
        return None, None
    for date_format in mapping.date_formats:
        try:
            moment = datetime.strptime(raw, date_format)
        except ValueError:
            continue
        timed = any(code in date_format for code in ("%H", "%I", "%M", "%S"))
        if timed and mapping.time_zone is not None:
            return moment.date(), moment.replace(tzinfo=ZoneInfo(mapping.time_zone))
        return moment.date(), None
    shown = " or ".join(repr(f) for f in mapping.date_formats)
    raise row.error(f"{raw!r} in column {column!r} is not a date in the format {shown}")


def _amount_and_direction(row: _Row, mapping: CsvMapping) -> tuple[Decimal, CreditDebit]:
    if mapping.amount is not None:
        raw = row.get(mapping.amount)
        if raw is None:
            raise row.error(f"column {mapping.amount!r} (amount) is empty")
        value = _number(row, raw, mapping.amount, mapping)
        if mapping.direction is None:
            return abs(value), (DEBIT if value < 0 else CREDIT)
        if value < 0:
            raise row.error(f"amount {raw!r} must be unsigned when a direction column is mapped")
        marker = (row.get(mapping.direction) or "").upper()
        if marker in (m.upper() for m in mapping.credit_markers):
            return value, CREDIT
        if marker in (m.upper() for m in mapping.debit_markers):
            return value, DEBIT
        raise row.error(f"{marker or None!r} in column {mapping.direction!r} is not a credit or debit marker")

    debit_raw, credit_raw = row.get(mapping.debit), row.get(mapping.credit)
    debit = abs(_number(row, debit_raw, mapping.debit, mapping)) if debit_raw else Decimal(0)
    credit = abs(_number(row, credit_raw, mapping.credit, mapping)) if credit_raw else Decimal(0)
    if debit and credit:
        raise row.error("both the debit and the credit column hold an amount")
    if debit or (debit_raw is not None and credit_raw is None):
        return debit, DEBIT
    if credit_raw is not None:
        return credit, CREDIT
    raise row.error("neither the debit nor the credit column holds an amount")


def _number(row: _Row, raw: str, column: Column | None, mapping: CsvMapping) -> Decimal:
    text = raw.replace("\u00a0", "").replace(" ", "")
    if mapping.thousands_separator:
        text = text.replace(mapping.thousands_separator, "")
    if mapping.decimal_separator != ".":
        if "." in text:
            raise row.error(
                f"{raw!r} in column {column!r} is not an amount with {mapping.decimal_separator!r} decimals"
            )
        text = text.replace(mapping.decimal_separator, ".")
    negative = False
    if text and text[0] in "+-":
        negative, text = text[0] == "-", text[1:]
    elif text.endswith("-"):  # some banks write 12,50- for a debit
        negative, text = True, text[:-1]
    match = _NUMBER.match(text)
    if match is None or len(match.group(1)) + len(match.group(2) or "") > 18:
        raise row.error(f"{raw!r} in column {column!r} is not an amount (at most 5 decimals)")
    value = Decimal(text)
    return -value if negative else value
