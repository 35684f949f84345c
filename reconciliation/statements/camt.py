"""Streaming, hostile-input-safe parser for ISO 20022 camt.053 (statements) and camt.054 (notifications).

Why streaming: a bank can send 100,000 entries in one file. ``lxml.etree.iterparse`` only reports the
few elements we act on (``Document``, ``GrpHdr``, ``Stmt``/``Ntfctn``, ``Ntry``); each ``Ntry`` is
turned into a ``ParsedEntry`` and removed from the tree at once, so memory stays flat.

Why safe: the file comes from outside. No DTD is loaded, no entity is resolved, nothing is fetched
from the network, libxml2's size/depth limits stay on (``huge_tree=False``), any DOCTYPE at all is
refused (XXE, billion laughs), and the byte size is checked before parsing starts.

Versions: the element names we read are the same across camt.053.001.02-.13 and camt.054.001.02-.13;
the differences that matter (``Sts`` as text or ``Sts/Cd``, ``Nm`` or ``Pty/Nm``, ``BIC`` or ``BICFI``,
``TxDtls/Amt`` or ``AmtDtls/TxAmt/Amt``) are read both ways. The version comes from the namespace.
"""

import dataclasses
import re
from collections.abc import Iterator
from decimal import Decimal

from lxml import etree

from . import camt_elements
from .camt_elements import GroupHeader, build_node
from .errors import StatementParseError
from .source import DEFAULT_MAX_BYTES, StatementSource, open_limited
from .types import CREDIT, ParsedEntry, ParsedStatement, StatementKind, StatementSummary

_NAMESPACE = re.compile(r"^urn:iso:std:iso:20022:tech:xsd:camt\.(05[34])\.001\.(\d\d)$")
SUPPORTED_VERSIONS: frozenset[str] = frozenset(f"001.{n:02d}" for n in range(2, 14))
# kind -> (message element under Document, repeated statement element under it)
_LAYOUT: dict[StatementKind, tuple[str, str]] = {
    "camt053": ("BkToCstmrStmt", "Stmt"),
    "camt054": ("BkToCstmrDbtCdtNtfctn", "Ntfctn"),
}
_WATCHED_TAGS = ["{*}Document", "{*}BkToCstmrStmt", "{*}BkToCstmrDbtCdtNtfctn", "{*}GrpHdr"]
_WATCHED_TAGS += ["{*}Stmt", "{*}Ntfctn", "{*}Ntry"]


# --- public API -----------------------------------------------------------------------------------


def iter_camt_statements(source: StatementSource, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[ParsedStatement]:
    """Stream the statements of a camt.053/camt.054 file; each statement's ``entries`` is a lazy,
    one-shot iterator, so an importer can write entries in chunks without holding them.

    Read a statement's entries before asking for the next statement: advancing parses (and so still
    validates) the unread entries, and the skipped iterator then raises ``RuntimeError``.

    Raises ``StatementParseError`` (with the XML line) as soon as the problem is reached: oversize
    (before parsing), DOCTYPE, malformed XML, unsupported document, missing required element,
    invalid value. Entries before the problem have already been yielded, so an importer that must
    import nothing of a bad file parses inside a transaction (or runs ``validate_camt`` first).
    """
    return _grouped(_camt_items(source, max_bytes))


def parse_camt(source: StatementSource, *, max_bytes: int = DEFAULT_MAX_BYTES) -> list[ParsedStatement]:
    """The whole file in memory, entries as tuples. For small files and tests; importers stream."""
    return [
        dataclasses.replace(stmt, entries=tuple(stmt.entries))
        for stmt in iter_camt_statements(source, max_bytes=max_bytes)
    ]


def validate_camt(source: StatementSource, *, max_bytes: int = DEFAULT_MAX_BYTES) -> list[StatementSummary]:
    """A full parsing pass that keeps nothing but per-statement counts and booked totals.

    Raises ``StatementParseError`` exactly where ``iter_camt_statements`` would; returning means every
    entry of the file parsed. Only ``BOOK`` entries count towards the totals (pending ones are not in
    the booked closing balance).
    """
    summaries = []
    for stmt in iter_camt_statements(source, max_bytes=max_bytes):
        count, credits, debits = 0, Decimal(0), Decimal(0)
        for entry in stmt.entries:
            count += 1
            if entry.status != "BOOK":
                continue
            if entry.credit_debit == CREDIT:
                credits += entry.amount
            else:
                debits += entry.amount
        summaries.append(
            StatementSummary(
                statement_id=stmt.statement_id,
                account_id=stmt.account_id,
                currency=stmt.currency,
                entry_count=count,
                booked_credit_total=credits,
                booked_debit_total=debits,
                opening_balance=stmt.opening_balance,
                closing_balance=stmt.closing_balance,
            )
        )
    return summaries


# --- two-level streaming on top of one flat stream ------------------------------------------------


class _Entries:
    """The entries of one statement, read from the shared flat stream up to the next statement."""

    def __init__(self, items: Iterator[ParsedStatement | ParsedEntry]):
        self._items = items
        self._done = False
        self._skipped = False
        self.next_statement: ParsedStatement | None = None

    def __iter__(self) -> "_Entries":
        return self

    def __next__(self) -> ParsedEntry:
        if self._skipped:
            raise RuntimeError("these entries were skipped: read a statement's entries before the next statement")
        if self._done:
            raise StopIteration
        item = next(self._items, None)
        if isinstance(item, ParsedEntry):
            return item
        self._done = True
        self.next_statement = item
        raise StopIteration

    def skip_rest(self) -> None:
        unread = False
        for _ in self:
            unread = True
        self._skipped = unread


def _grouped(items: Iterator[ParsedStatement | ParsedEntry]) -> Iterator[ParsedStatement]:
    header = next(items, None)
    while header is not None:
        entries = _Entries(items)
        yield dataclasses.replace(header, entries=entries)
        entries.skip_rest()
        header = entries.next_statement


# --- the flat stream: a statement header, then its entries, then the next header ------------------


def _camt_items(source: StatementSource, max_bytes: int) -> Iterator[ParsedStatement | ParsedEntry]:
    with open_limited(source, max_bytes=max_bytes) as stream:
        events = etree.iterparse(
            stream,
            events=("start", "end"),
            tag=_WATCHED_TAGS,
            resolve_entities=False,
            load_dtd=False,
            no_network=True,
            huge_tree=False,
            remove_comments=True,
            remove_pis=True,
        )
        try:
            yield from _walk(events)
        except etree.XMLSyntaxError as exc:
            raise StatementParseError("malformed_xml", exc.msg or str(exc), exc.lineno) from exc


def _walk(events) -> Iterator[ParsedStatement | ParsedEntry]:
    kind: StatementKind | None = None
    message_el = statement_el = None
    group: GroupHeader | None = None
    header: ParsedStatement | None = None
    statements = sequence = 0

    for event, el in events:
        if kind is None:
            _refuse_doctype(el)
            root = el.getroottree().getroot()
            kind, version, ns = _detect(root)
            message_name, statement_name = _LAYOUT[kind]
            message_tag, statement_tag = f"{{{ns}}}{message_name}", f"{{{ns}}}{statement_name}"
            grphdr_tag, ntry_tag, cut = f"{{{ns}}}GrpHdr", f"{{{ns}}}Ntry", len(ns) + 2
        tag = el.tag
        if event == "start":
            if tag == message_tag and el.getparent() is root:
                message_el = el
            elif tag == statement_tag and message_el is not None and el.getparent() is message_el:
                statement_el, header, sequence = el, None, 0
            continue

        if tag == ntry_tag and statement_el is not None and el.getparent() is statement_el:
            if header is None:
                # Every header child (Id, Acct, Bal...) precedes the first Ntry, so it is complete now.
                header = _header(statement_el, cut, kind, version, statement_name, group)
                yield header
            sequence += 1
            entry = camt_elements.entry(build_node(el, cut), sequence=sequence, own_iban=header.account_iban)
            _forget(el)
            yield entry
        elif tag == statement_tag and el is statement_el:
            if header is None:
                yield _header(statement_el, cut, kind, version, statement_name, group)
            statements += 1
            _forget(el)
            statement_el = None
        elif tag == grphdr_tag and el.getparent() is message_el:
            group = camt_elements.group_header(build_node(el, cut))
        elif tag == message_tag and el is message_el and statements == 0:
            raise StatementParseError("missing_element", f"{message_name} contains no {statement_name}", el.sourceline)

    if kind is None:
        # Nothing we watch for was in the file; say why it is not a camt document.
        _refuse_doctype(events.root)
        _detect(events.root)
    if message_el is None:
        raise StatementParseError("missing_element", f"Document has no {message_name}", root.sourceline)


def _header(el, cut: int, kind: StatementKind, version: str, name: str, group: GroupHeader | None) -> ParsedStatement:
    node = build_node(el, cut)
    return camt_elements.statement_header(node, kind=kind, version=version, element=name, group=group)


def _forget(el) -> None:
    """Drop a handled element and everything before it, so the tree never grows."""
    el.clear(keep_tail=False)
    parent = el.getparent()
    while el.getprevious() is not None:
        del parent[0]


def _refuse_doctype(el) -> None:
    info = el.getroottree().docinfo
    if info.doctype or info.internalDTD is not None or info.externalDTD is not None:
        raise StatementParseError("dtd_forbidden", "a DOCTYPE (DTD, entities) is not allowed in a bank statement")


def _detect(root) -> tuple[StatementKind, str, str]:
    qname = etree.QName(root)
    if qname.localname != "Document":
        raise StatementParseError(
            "unsupported_document",
            f"root element is <{qname.localname}>, expected an ISO 20022 <Document>",
            root.sourceline,
        )
    match = _NAMESPACE.match(qname.namespace or "")
    if match is None:
        raise StatementParseError(
            "unsupported_document",
            f"namespace {qname.namespace!r} is not camt.053 or camt.054",
            root.sourceline,
        )
    kind: StatementKind = "camt053" if match.group(1) == "053" else "camt054"
    version = f"001.{match.group(2)}"
    if version not in SUPPORTED_VERSIONS:
        raise StatementParseError(
            "unsupported_document", f"camt.{match.group(1)}.{version} is not a supported version", root.sourceline
        )
    return kind, version, qname.namespace
