"""Reading one camt element (statement header, entry, transaction details) into the dataclasses.

Each handled element is first turned into a ``Node`` tree (children by local name) in one pass; the
many lookups that follow are dict hits instead of lxml path searches, which made parsing ~3x faster.
Paths are written without namespaces (``"BookgDt/Dt"``) and read both spellings where versions differ.
"""

import re
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import lru_cache

from schwifty import IBAN
from schwifty.exceptions import SchwiftyException

from .errors import StatementParseError
from .types import (
    CREDIT,
    CreditDebit,
    ParsedBatch,
    ParsedEntry,
    ParsedParty,
    ParsedReturn,
    ParsedStatement,
    ParsedTxDetail,
    StatementKind,
)

_AMOUNT = re.compile(r"^(\d+)(?:\.(\d{1,5}))?$")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_ISO_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:Z|[+-]\d{2}:\d{2})?$")
NOT_PROVIDED = "NOTPROVIDED"


class Node:
    """An element and its children grouped by local name (all in the document's namespace)."""

    __slots__ = ("el", "kids")

    def __init__(self, el, kids: dict[str, list["Node"]]):
        self.el = el
        self.kids = kids

    @property
    def line(self) -> int | None:
        return self.el.sourceline

    def find(self, path: str) -> "Node | None":
        node: Node | None = self
        for part in _split(path):
            found = node.kids.get(part)
            if not found:
                return None
            node = found[0]
        return node

    def find_all(self, path: str) -> list["Node"]:
        *parents, last = _split(path)
        nodes = [self]
        for part in parents:
            nodes = [kid for node in nodes for kid in node.kids.get(part, ())]
        return [kid for node in nodes for kid in node.kids.get(last, ())]

    def text(self, path: str) -> str | None:
        node = self.find(path)
        return None if node is None else _clean(node.el.text)

    def texts(self, path: str) -> list[str]:
        return [t for t in (_clean(n.el.text) for n in self.find_all(path)) if t]

    def required(self, path: str, what: str) -> "Node":
        node = self.find(path)
        if node is None:
            raise StatementParseError("missing_element", f"{what} has no {path}", self.line)
        return node

    def required_text(self, path: str, what: str) -> str:
        node = self.required(path, what)
        value = _clean(node.el.text)
        if value is None:
            raise StatementParseError("missing_element", f"{what} has an empty {path}", node.line)
        return value


class _Absent:
    """Stands in for a missing optional block so readers need no ``if x is not None`` everywhere."""

    def find(self, path: str) -> None:
        return None

    def find_all(self, path: str) -> list[Node]:
        return []

    def text(self, path: str) -> None:
        return None

    def texts(self, path: str) -> list[str]:
        return []


ABSENT = _Absent()


_NO_KIDS: dict[str, list[Node]] = {}


def build_node(el, namespace_length: int) -> Node:
    kids: dict[str, list[Node]] = {}
    for child in el:
        name = child.tag[namespace_length:]
        node = build_node(child, namespace_length) if len(child) else Node(child, _NO_KIDS)
        if name in kids:
            kids[name].append(node)
        else:
            kids[name] = [node]
    return Node(el, kids)


@lru_cache(maxsize=512)
def _split(path: str) -> tuple[str, ...]:
    return tuple(path.split("/"))


def _clean(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return text or None


# --- values ---------------------------------------------------------------------------------------


def _invalid(what: str, raw: str | None, node: Node) -> StatementParseError:
    return StatementParseError("invalid_value", f"{what} {raw!r} is not valid", node.line)


def _amount_of(node: Node, what: str) -> tuple[Decimal, str]:
    raw = _clean(node.el.text) or ""
    match = _AMOUNT.match(raw)
    # ISO 20022 amounts: up to 18 digits, at most 5 of them decimals, no sign.
    if match is None or len(match.group(1)) + len(match.group(2) or "") > 18:
        raise _invalid(f"{what} amount", raw, node)
    currency = node.el.get("Ccy")
    if currency is None or not _CURRENCY.match(currency):
        raise _invalid(f"{what} currency", currency, node)
    return Decimal(raw), currency


def _credit_debit(node: Node, what: str, *, required: bool) -> CreditDebit | None:
    found = node.required("CdtDbtInd", what) if required else node.find("CdtDbtInd")
    if found is None:
        return None
    value = _clean(found.el.text)
    if value not in ("CRDT", "DBIT"):
        raise _invalid(f"{what} CdtDbtInd", value, found)
    return value  # type: ignore[return-value]


def _date(node: Node, what: str) -> date:
    raw = _clean(node.el.text) or ""
    match = _ISO_DATE.match(raw)
    try:
        return date.fromisoformat(match.group(1) if match else raw)
    except ValueError:
        raise _invalid(what, raw, node)


def _datetime(node: Node, what: str) -> datetime:
    raw = _clean(node.el.text) or ""
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        raise _invalid(what, raw, node)


def _date_choice(node: Node | None, what: str) -> tuple[date | None, datetime | None]:
    """``DateAndDateTimeChoice``: ``Dt`` or ``DtTm``; a DtTm also gives its calendar date as written."""
    if node is None:
        return None, None
    found = node.find("Dt")
    if found is not None:
        return _date(found, f"{what}/Dt"), None
    found = node.find("DtTm")
    if found is not None:
        moment = _datetime(found, f"{what}/DtTm")
        return moment.date(), moment
    raise StatementParseError("missing_element", f"{what} has neither Dt nor DtTm", node.line)


def _optional_datetime(node: Node | _Absent, path: str) -> datetime | None:
    found = node.find(path)
    return None if found is None or _clean(found.el.text) is None else _datetime(found, path)


def _optional_int(node: Node, path: str) -> int | None:
    found = node.find(path)
    raw = None if found is None else _clean(found.el.text)
    if raw is None:
        return None
    if not raw.isdigit():
        raise _invalid(path, raw, found)
    return int(raw)


def _iban(raw: str | None) -> str | None:
    return None if raw is None else raw.replace(" ", "").upper()


def _valid_iban(raw: str | None) -> str | None:
    if raw is None:
        return None
    try:
        return IBAN(raw).compact
    except SchwiftyException:
        return None


# --- statement and group header -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupHeader:
    message_id: str
    created_at: datetime | None
    page_number: int | None
    last_page: bool | None


def group_header(node: Node) -> GroupHeader:
    page_number, last_page = _pagination(node.find("MsgPgntn"))
    return GroupHeader(
        message_id=node.required_text("MsgId", "GrpHdr"),
        created_at=_optional_datetime(node, "CreDtTm"),
        page_number=page_number,
        last_page=last_page,
    )


def _pagination(node: Node | None) -> tuple[int | None, bool | None]:
    """``Pagination1``: PgNb (Max5NumericText) and LastPgInd."""
    if node is None:
        return None, None
    number = _optional_int(node, "PgNb")
    if number is None or number < 1:
        raise _invalid("PgNb", node.text("PgNb"), node)
    last = node.text("LastPgInd")
    if last not in ("true", "false", "1", "0"):
        raise _invalid("LastPgInd", last, node)
    return number, last in ("true", "1")


def statement_header(
    node: Node, *, kind: StatementKind, version: str, element: str, group: GroupHeader | None
) -> ParsedStatement:
    """``node`` is the Stmt/Ntfctn with (at least) every child that precedes the first Ntry."""
    if group is None:
        raise StatementParseError("missing_element", f"no GrpHdr before {element}", node.line)
    statement_id = node.required_text("Id", element)
    account = node.required("Acct", element)
    account_id = account.required("Id", f"{element}/Acct")
    iban = _iban(account_id.text("IBAN"))
    other = account_id.text("Othr/Id")
    if iban is None and other is None:
        raise StatementParseError("missing_element", f"{element}/Acct/Id has neither IBAN nor Othr/Id", account_id.line)

    opening = closing = None
    for bal in node.find_all("Bal"):
        code = bal.text("Tp/CdOrPrtry/Cd") or bal.text("Tp/CdOrPrtry/Prtry")
        # OPBD is the opening booked balance; some banks send PRCD (previous closing) instead.
        if code == "OPBD" or (code == "PRCD" and (opening is None or opening[0] == "PRCD")):
            opening = (code, _balance(bal))
        elif code == "CLBD" and closing is None:
            closing = (code, _balance(bal))
    opening_amount, opening_ccy, opening_date = opening[1] if opening else (None, None, None)
    closing_amount, closing_ccy, closing_date = closing[1] if closing else (None, None, None)
    period = node.find("FrToDt") or ABSENT
    # Stmt/StmtPgntn (camt.053.001.03 on) pages one statement; GrpHdr/MsgPgntn pages the message.
    page_number, last_page = _pagination(node.find("StmtPgntn") or node.find("RptPgntn") or node.find("NtfctnPgntn"))
    if page_number is None:
        page_number, last_page = group.page_number, group.last_page

    return ParsedStatement(
        kind=kind,
        version=version,
        message_id=group.message_id,
        statement_id=statement_id,
        electronic_sequence_number=_optional_int(node, "ElctrncSeqNb"),
        legal_sequence_number=_optional_int(node, "LglSeqNb"),
        page_number=page_number,
        last_page=last_page,
        created_at=_optional_datetime(node, "CreDtTm") or group.created_at,
        from_datetime=_optional_datetime(period, "FrDtTm"),
        to_datetime=_optional_datetime(period, "ToDtTm"),
        account_iban=iban or _valid_iban(other),
        account_other_id=other,
        currency=account.text("Ccy") or opening_ccy or closing_ccy,
        opening_balance=opening_amount,
        opening_balance_date=opening_date,
        closing_balance=closing_amount,
        closing_balance_date=closing_date,
        opening_balance_currency=opening_ccy,
        closing_balance_currency=closing_ccy,
        line=node.line,
        entries=(),
    )


def _balance(bal: Node) -> tuple[Decimal, str, date | None]:
    amount, currency = _amount_of(bal.required("Amt", "Bal"), "Bal")
    direction = _credit_debit(bal, "Bal", required=True)
    day, _ = _date_choice(bal.find("Dt"), "Bal/Dt")
    return (amount if direction == CREDIT else -amount), currency, day


# --- entries --------------------------------------------------------------------------------------


def entry(node: Node, *, sequence: int, own_iban: str | None) -> ParsedEntry:
    amount, currency = _amount_of(node.required("Amt", "Ntry"), "Ntry")
    credit_debit = _credit_debit(node, "Ntry", required=True)
    reversal_raw = node.text("RvslInd")
    if reversal_raw not in (None, "true", "false", "1", "0"):
        raise _invalid("Ntry RvslInd", reversal_raw, node)
    reversal = reversal_raw in ("true", "1")
    status_node = node.required("Sts", "Ntry")
    # Sts is plain text up to .06 and a Cd/Prtry choice from .07 on.
    status = _clean(status_node.el.text) or status_node.text("Cd") or status_node.text("Prtry")
    if status is None:
        raise StatementParseError("missing_element", "Ntry has an empty Sts", status_node.line)
    booking_date, booking_datetime = _date_choice(node.find("BookgDt"), "BookgDt")
    value_date, value_datetime = _date_choice(node.find("ValDt"), "ValDt")
    code, proprietary = _bank_tx_code(node.find("BkTxCd") or ABSENT)
    servicer_ref, entry_ref = node.text("AcctSvcrRef"), node.text("NtryRef")

    batch = None
    details = []
    for entry_details in node.find_all("NtryDtls"):
        btch = entry_details.find("Btch")
        if btch is not None and batch is None:
            batch = _batch(btch)
        for tx in entry_details.find_all("TxDtls"):
            details.append(_detail(tx, credit_debit, reversal, own_iban))

    return ParsedEntry(
        sequence=sequence,
        line=node.line,
        entry_reference=servicer_ref or entry_ref,
        account_servicer_reference=servicer_ref,
        entry_ref=entry_ref,
        amount=amount,
        currency=currency,
        credit_debit=credit_debit,
        status=status.upper(),
        booking_date=booking_date,
        booking_datetime=booking_datetime,
        value_date=value_date,
        value_datetime=value_datetime,
        reversal=reversal,
        bank_tx_code=code,
        bank_tx_code_proprietary=proprietary,
        batch=batch,
        details=tuple(details),
        additional_info=node.text("AddtlNtryInf"),
        charges=_charges(node, currency),
    )


def _charges(node: Node, currency: str) -> Decimal | None:
    """Chrgs included in the amount booked, in ``currency``: camt.05x.001.02 repeats Chrgs with an
    Amt each; from .04 one Chrgs holds Rcrd records. A record with ChrgInclInd false was billed
    apart, so it is not in the booking; a CRDT record gives a charge back. None when no charge in
    ``currency`` is included."""
    records = node.find_all("Chrgs/Rcrd") or [c for c in node.find_all("Chrgs") if c.find("Amt") is not None]
    total, found = Decimal(0), False
    for record in records:
        if record.text("ChrgInclInd") in ("false", "0"):
            continue
        amount, ccy = _amount_of(record.required("Amt", "Chrgs"), "Chrgs")
        if ccy != currency:
            continue
        total += -amount if record.text("CdtDbtInd") == CREDIT else amount
        found = True
    return total if found else None


def _bank_tx_code(node: Node | _Absent) -> tuple[str | None, str | None]:
    parts = [node.text("Domn/Cd"), node.text("Domn/Fmly/Cd"), node.text("Domn/Fmly/SubFmlyCd")]
    return "/".join(p for p in parts if p) or None, node.text("Prtry/Cd")


def _batch(node: Node) -> ParsedBatch:
    total = node.find("TtlAmt")
    amount, currency = _amount_of(total, "Btch/TtlAmt") if total is not None else (None, None)
    return ParsedBatch(
        message_id=node.text("MsgId"),
        payment_information_id=node.text("PmtInfId"),
        number_of_transactions=_optional_int(node, "NbOfTxs"),
        total_amount=amount,
        currency=currency,
        credit_debit=_credit_debit(node, "Btch", required=False),
    )


def _detail(tx: Node, entry_direction: CreditDebit, reversal: bool, own_iban: str | None) -> ParsedTxDetail:
    refs = tx.find("Refs") or ABSENT
    end_to_end = refs.text("EndToEndId")
    if end_to_end is not None and end_to_end.upper() == NOT_PROVIDED:
        end_to_end = None

    amount_node = tx.find("Amt") or tx.find("AmtDtls/TxAmt/Amt") or tx.find("AmtDtls/InstdAmt/Amt")
    amount, currency = _amount_of(amount_node, "TxDtls") if amount_node is not None else (None, None)
    charges = _charges(tx, currency) if currency is not None else None

    parties, agents = tx.find("RltdPties") or ABSENT, tx.find("RltdAgts") or ABSENT
    debtor = _party(parties, agents, "Dbtr")
    creditor = _party(parties, agents, "Cdtr")
    counterparty = _counterparty(debtor, creditor, entry_direction, reversal, own_iban)
    remittance = tx.find("RmtInf") or ABSENT
    references = remittance.texts("Strd/CdtrRefInf/Ref")
    return_node = tx.find("RtrInf")

    return ParsedTxDetail(
        end_to_end_id=end_to_end,
        instruction_id=refs.text("InstrId"),
        tx_id=refs.text("TxId"),
        uetr=(refs.text("UETR") or "").lower() or None,
        message_id=refs.text("MsgId"),
        payment_information_id=refs.text("PmtInfId"),
        account_servicer_reference=refs.text("AcctSvcrRef"),
        amount=amount,
        currency=currency,
        credit_debit=_credit_debit(tx, "TxDtls", required=False),
        counterparty_name=counterparty.name,
        counterparty_iban=counterparty.iban,
        counterparty_bic=counterparty.bic,
        debtor=debtor,
        creditor=creditor,
        remittance=" ".join(remittance.texts("Ustrd")) or None,
        structured_reference=references[0] if references else None,
        return_info=None if return_node is None else _return_info(return_node, end_to_end),
        bank_tx_code=_bank_tx_code(tx.find("BkTxCd") or ABSENT)[0],
        additional_info=tx.text("AddtlTxInf"),
        charges=charges,
    )


def _party(parties: Node | _Absent, agents: Node | _Absent, role: str) -> ParsedParty:
    party = parties.find(role) or ABSENT
    # Up to .06 the name is Dbtr/Nm; from .07 the party is a choice and the name is Dbtr/Pty/Nm.
    name = party.text("Nm") or party.text("Pty/Nm") or party.text("Agt/FinInstnId/Nm")
    account = parties.find(f"{role}Acct") or ABSENT
    agent = agents.find(f"{role}Agt") or ABSENT
    return ParsedParty(
        name=name,
        iban=_iban(account.text("Id/IBAN")),
        account_other_id=account.text("Id/Othr/Id"),
        bic=agent.text("FinInstnId/BICFI") or agent.text("FinInstnId/BIC"),
    )


def _counterparty(
    debtor: ParsedParty, creditor: ParsedParty, direction: CreditDebit, reversal: bool, own_iban: str | None
) -> ParsedParty:
    incoming = (direction == CREDIT) != reversal
    for candidate in (debtor, creditor) if incoming else (creditor, debtor):
        if not candidate.is_empty and not (own_iban and candidate.iban == own_iban):
            return candidate
    return ParsedParty()


def _return_info(node: Node, end_to_end: str | None) -> ParsedReturn:
    return ParsedReturn(
        reason_code=node.text("Rsn/Cd"),
        reason_proprietary=node.text("Rsn/Prtry"),
        additional_info=" ".join(node.texts("AddtlInf")) or None,
        original_end_to_end_id=end_to_end,
    )
