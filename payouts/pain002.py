"""Reading a pain.002 customer payment status report (versions .001.03 and .001.10) that the
bank returns for a pain.001 file.

The result lists, per EndToEndId (or, where the bank names a payment only so, per UETR), the
bank's transaction status (ACCP, ACSC, RJCT, ...) with its
reason code, plus the group and payment-information statuses, which apply to every transaction
of the original message or block when the bank reports no transaction details. Verification of
Payee codes (RCVC, RVMC, RVNM, RVNA, RVCM, RVNC, PN01/PN02) are read as each payment's VoP result
(``vop_results``) and decide nothing about payment.

Safety: the parser refuses DTDs (so no entity expansion, no external entities), never touches the
network, and refuses files over a size limit. A malformed or ambiguous report raises
``Pain002Error`` and nothing is returned: an import applies all of a report or none of it.
"""

from dataclasses import dataclass
from enum import StrEnum

from lxml import etree

from core.exceptions import InvalidInput
from payouts.iso import reason_text
from payouts.rails.base import PayeeMatch

SUPPORTED_NAMESPACES = {
    "urn:iso:std:iso:20022:tech:xsd:pain.002.001.03": "pain.002.001.03",
    "urn:iso:std:iso:20022:tech:xsd:pain.002.001.10": "pain.002.001.10",
}
MAX_REPORT_BYTES = 20 * 1024 * 1024

# Verification of Payee (EPC VOP scheme, from October 2025): the group codes of
# ExternalPaymentGroupStatus1Code (RCVC, RVCM, RVNC), the per-payment results German banks send in
# pain.002.001.10 (and .03) as a status or a reason (RCVC, RVMC, RVNM, RVNA), and the ISO
# ExternalVerificationReason1Code results (PN01, PN02). A VoP code decides nothing about payment.
VOP_CODES: dict[str, tuple[PayeeMatch | None, str]] = {
    "RCVC": (PayeeMatch.MATCH, "Verification of Payee: the name matches the account."),
    "RVMC": (PayeeMatch.CLOSE_MATCH, "Verification of Payee: the name is a close match for the account."),
    "PN02": (PayeeMatch.CLOSE_MATCH, "Verification of Payee: the name is a close match for the account."),
    "RVNM": (PayeeMatch.NO_MATCH, "Verification of Payee: the name does not match the account."),
    "PN01": (PayeeMatch.NO_MATCH, "Verification of Payee: the name does not match the account."),
    "RVNA": (PayeeMatch.NOT_POSSIBLE, "Verification of Payee was not possible for this account."),
    "RVCM": (None, "Verification of Payee completed; some names do not match (see each payment)."),
    "RVNC": (None, "Verification of Payee is not complete yet."),
}

# ExternalPaymentTransactionStatus1Code / ExternalPaymentGroupStatus1Code values banks send.
KNOWN_STATUSES = frozenset(
    {"ACCC", "ACCP", "ACFC", "ACSC", "ACSP", "ACTC", "ACWC", "ACWP", "PART", "PATC", "PDNG", "RCVD", "RJCT"}
) | frozenset(code for code in VOP_CODES if not code.startswith("PN"))


class Pain002Error(InvalidInput):
    code = "pain002_invalid"


class Outcome(StrEnum):
    """What a status means for a payout."""

    RECEIVED = "received"  # RCVD, PDNG: nothing decided yet
    ACCEPTED = "accepted"  # ACTC, ACCP, ACSP, ACWC, ACWP, ACFC, PATC: will be paid
    SETTLED = "settled"  # ACSC, ACCC: paid
    REJECTED = "rejected"  # RJCT
    PARTIAL = "partial"  # PART (group/block level only): see the transaction lines


_OUTCOMES = {
    "RCVD": Outcome.RECEIVED,
    "PDNG": Outcome.RECEIVED,
    "ACTC": Outcome.ACCEPTED,
    "ACCP": Outcome.ACCEPTED,
    "ACSP": Outcome.ACCEPTED,
    "ACWC": Outcome.ACCEPTED,
    "ACWP": Outcome.ACCEPTED,
    "ACFC": Outcome.ACCEPTED,
    "PATC": Outcome.ACCEPTED,
    "ACSC": Outcome.SETTLED,
    "ACCC": Outcome.SETTLED,
    "RJCT": Outcome.REJECTED,
    "PART": Outcome.PARTIAL,
    **{code: Outcome.RECEIVED for code in KNOWN_STATUSES if code in VOP_CODES},
}


@dataclass(frozen=True)
class StatusLine:
    status: str  # the ISO code as sent, e.g. "RJCT"
    reason_code: str | None
    reason_text: str | None  # our plain text for the code, then the bank's AddtlInf if any

    @property
    def outcome(self) -> Outcome:
        return _OUTCOMES[self.status]

    @property
    def vop_result(self) -> PayeeMatch | None:
        """The Verification of Payee result this line states (by its reason, else its status)."""
        for code in (self.reason_code, self.status):
            if code in VOP_CODES and VOP_CODES[code][0] is not None:
                return VOP_CODES[code][0]
        return None


@dataclass(frozen=True)
class TransactionStatus(StatusLine):
    end_to_end_id: str  # "" when the bank named the payment only by its UETR
    original_payment_information_id: str | None
    uetr: str | None = None  # OrgnlUETR, lower case


@dataclass(frozen=True)
class PaymentInformationStatus(StatusLine):
    original_payment_information_id: str


@dataclass(frozen=True)
class Pain002Report:
    version: str
    message_id: str
    original_message_id: str
    group: StatusLine | None
    payment_informations: tuple[PaymentInformationStatus, ...]
    transactions: tuple[TransactionStatus, ...]

    def by_end_to_end_id(self) -> dict[str, TransactionStatus]:
        return {tx.end_to_end_id: tx for tx in self.transactions if tx.end_to_end_id}

    def by_uetr(self) -> dict[str, TransactionStatus]:
        """Transactions the bank named only by their UETR (no OrgnlEndToEndId)."""
        return {tx.uetr: tx for tx in self.transactions if tx.uetr and not tx.end_to_end_id}

    def vop_results(self) -> dict[str, PayeeMatch]:
        """Each reported payment's Verification of Payee result, for ``Payout.vop_result``: its own
        code, else its block's, else the group's (RCVC there means every name matched)."""
        blocks = {b.original_payment_information_id: b.vop_result for b in self.payment_informations}
        group = self.group.vop_result if self.group else None
        results = {}
        for tx in self.transactions:
            result = tx.vop_result or blocks.get(tx.original_payment_information_id or "") or group
            if result is not None and tx.end_to_end_id:
                results[tx.end_to_end_id] = result
        return results


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )


def _text(element, path: str, ns: dict) -> str | None:
    value = element.findtext(path, namespaces=ns)
    return value.strip() if value and value.strip() else None


def _status_line(element, status_tag: str, ns: dict, where: str) -> tuple[str, str | None, str | None] | None:
    status = _text(element, f"p:{status_tag}", ns)
    if status is None:
        return None
    if status not in KNOWN_STATUSES:
        raise Pain002Error(f"{where}: unknown status {status!r}.")
    reason = _text(element, "p:StsRsnInf/p:Rsn/p:Cd", ns) or _text(element, "p:StsRsnInf/p:Rsn/p:Prtry", ns)
    extra = " ".join(t.strip() for t in element.xpath("p:StsRsnInf/p:AddtlInf/text()", namespaces=ns) if t.strip())
    if status == "RJCT" and reason is None:
        reason = "NARR" if extra else "MS03"
    text = None
    if reason or extra or status in VOP_CODES:
        known = VOP_CODES.get(reason or status, (None, None))[1] or (reason_text(reason) if reason else None)
        text = " — ".join(part for part in (known, extra or None) if part)
    return status, reason, text


def parse_pain002(data: bytes, *, max_bytes: int = MAX_REPORT_BYTES) -> Pain002Report:
    """Parse a pain.002.001.03 or .10 status report.

    Raises ``Pain002Error`` (code ``pain002_invalid``) for: too large, not well-formed XML, any
    DTD, an unsupported message, missing identifiers (a transaction needs OrgnlEndToEndId or
    OrgnlUETR), unknown status codes, a payment listed twice. Returns the whole report or
    raises; never a partial result.
    """
    if len(data) > max_bytes:
        raise Pain002Error(f"The status report is larger than {max_bytes} bytes.")
    try:
        tree = etree.fromstring(data, _parser()).getroottree()
    except etree.XMLSyntaxError as exc:
        raise Pain002Error(f"The status report is not well-formed XML: {exc}.") from exc
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
        raise Pain002Error("The status report contains a DTD; refused.")
    root = tree.getroot()
    namespace = etree.QName(root).namespace
    version = SUPPORTED_NAMESPACES.get(namespace or "")
    if etree.QName(root).localname != "Document" or version is None:
        raise Pain002Error(f"Not a supported pain.002 document (namespace {namespace!r}).")
    ns = {"p": namespace}
    report = root.find("p:CstmrPmtStsRpt", ns)
    if report is None:
        raise Pain002Error("CstmrPmtStsRpt is missing.")
    message_id = _text(report, "p:GrpHdr/p:MsgId", ns)
    original = report.find("p:OrgnlGrpInfAndSts", ns)
    original_message_id = _text(original, "p:OrgnlMsgId", ns) if original is not None else None
    if not message_id or not original_message_id:
        raise Pain002Error("GrpHdr/MsgId or OrgnlGrpInfAndSts/OrgnlMsgId is missing.")
    # .03 calls the group status GrpSts; .10 keeps GrpSts too (StsRsnInf sits beside it in both).
    group_line = _status_line(original, "GrpSts", ns, "group")
    group = StatusLine(*group_line) if group_line else None

    blocks: list[PaymentInformationStatus] = []
    transactions: list[TransactionStatus] = []
    seen: set[str] = set()
    for block in report.iterfind("p:OrgnlPmtInfAndSts", ns):
        block_id = _text(block, "p:OrgnlPmtInfId", ns)
        if not block_id:
            raise Pain002Error("OrgnlPmtInfAndSts without OrgnlPmtInfId.")
        block_line = _status_line(block, "PmtInfSts", ns, f"block {block_id}")
        if block_line:
            blocks.append(PaymentInformationStatus(*block_line, original_payment_information_id=block_id))
        for tx in block.iterfind("p:TxInfAndSts", ns):
            end_to_end_id = _text(tx, "p:OrgnlEndToEndId", ns)
            # pain.002.001.10 may name a payment by its UETR alone; NOTPROVIDED names nothing.
            if end_to_end_id and end_to_end_id.upper() == "NOTPROVIDED":
                end_to_end_id = None
            uetr = (_text(tx, "p:OrgnlUETR", ns) or "").lower() or None
            if not end_to_end_id and not uetr:
                raise Pain002Error(f"A transaction in block {block_id} has no OrgnlEndToEndId and no OrgnlUETR.")
            name = end_to_end_id or f"UETR {uetr}"
            if name in seen:
                raise Pain002Error(f"{'EndToEndId ' if end_to_end_id else ''}{name} is reported twice.")
            seen.add(name)
            line = _status_line(tx, "TxSts", ns, f"transaction {name}")
            if line is None:
                raise Pain002Error(f"Transaction {name} has no TxSts.")
            if line[0] == "PART":
                raise Pain002Error(f"Transaction {name}: PART is not a transaction status.")
            transactions.append(
                TransactionStatus(
                    *line, end_to_end_id=end_to_end_id or "", original_payment_information_id=block_id, uetr=uetr
                )
            )
    if group is None and not blocks and not transactions:
        raise Pain002Error("The status report carries no status at all.")
    return Pain002Report(
        version=version,
        message_id=message_id,
        original_message_id=original_message_id,
        group=group,
        payment_informations=tuple(blocks),
        transactions=tuple(transactions),
    )
