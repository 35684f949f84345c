"""SEPA credit transfer files: pain.001.001.09 built with ``sepaxml`` and validated, before anyone
can download it, against the schema of the scheme the file declares (``SvcLvl`` SEPA: the EPC SCT
and SCT Inst customer-to-PSP guidelines), ``epc_pain001_schema``: the ISO XSD that ``sepaxml``
ships, narrowed by the EPC's restrictions on it (the EPC's own XSD does not ship in any package).

One file per debtor account; inside it one payment-information block (PmtInf) per requested
execution date. Identifiers are ours, never random and never ``NOTPROVIDED``:

- ``MsgId`` = the batch id; ``PmtInfId`` = ``<batch id>-<YYYYMMDD>`` of the block's date;
- ``EndToEndId`` = the payout's ``end_to_end_id``, which the pain.002 report and the bank
  statement echo back, so each line finds its payout. No ``UETR``: the EPC C2PSP pain.001.001.09
  has none (a file carrying one is refused). Files built before did carry ``uetr_for`` of the
  EndToEndId, and their statements and reports still name payouts by it, so it stays readable.

Amounts are integer minor units in, exact decimals out; every control sum is checked against our
own Decimal sum of the payments after the file is built.
"""

import hashlib
import re
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from functools import cache
from pathlib import Path

import sepaxml
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from lxml import etree
from sepaxml import SepaTransfer
from text_unidecode import unidecode

from core.exceptions import InvalidInput
from core.money import minor_to_decimal
from payouts.rails.base import (
    SEPA_COUNTRIES,
    Capabilities,
    FinalRailError,
    Rail,
    RailPayment,
    RailStatus,
    StatusResult,
    SubmitResult,
    SubmitStatus,
    VerifyPayeeResult,
    normalise_iban,
    validate_end_to_end_id,
)
from payouts.rails.vop import payee_verify, vop_provider

PAIN001_SCHEMA = "pain.001.001.09"
PAIN001_NAMESPACE = f"urn:iso:std:iso:20022:tech:xsd:{PAIN001_SCHEMA}"
# EPC rulebook: a SEPA credit transfer carries at most 999,999,999.99 EUR.
SEPA_MAX_AMOUNT_MINOR = 99_999_999_999
# PmtInfId is "<batch id>-YYYYMMDD" and must fit Max35Text.
MAX_BATCH_ID_LENGTH = 26

_NOT_SEPA_TEXT = re.compile(r"[^A-Za-z0-9/\-?:().,'+ ]+")


@dataclass(frozen=True, kw_only=True)
class DebtorAccount:
    """The platform's bank account the file is paid from. With ``account_code`` set, every
    payment's ``debtor_account_code`` must equal it (one file never mixes debtor accounts).

    ``name`` is the account's label: the file names the debtor and the initiating party by the
    configured legal name (``SEPA_DEBTOR_NAME``) and falls back to it only when none is set.
    Without ``bic`` the configured ``SEPA_DEBTOR_BIC`` is used when it belongs to this IBAN, else
    the agent is ``Othr/Id`` NOTPROVIDED, as the EPC guidelines ask (never an empty FinInstnId)."""

    name: str
    iban: str
    bic: str | None = None
    account_code: str | None = None


def sepa_text(value: str, max_length: int) -> str:
    """Transliterate to the EPC's Latin character set (``é`` → ``e``), replace what is left
    outside it with spaces, collapse spaces and cut to ``max_length``."""
    # Characters with no Latin spelling (emoji, most symbols) become spaces, not unidecode's "?".
    spelled = "".join(c if c.isascii() else (unidecode(c).strip("?[] ") or " ") for c in value or "")
    cleaned = _NOT_SEPA_TEXT.sub(" ", spelled)
    return " ".join(cleaned.split())[:max_length].strip()


def _iso_xsd() -> etree._ElementTree:
    """The ISO pain.001.001.09 XSD shipped inside the installed ``sepaxml`` package."""
    path = Path(sepaxml.__file__).parent / "schemas" / f"{PAIN001_SCHEMA}.xsd"
    if not path.exists():
        raise ImproperlyConfigured(f"sepaxml does not ship {path.name}; cannot validate pain.001 files.")
    return etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True))


@cache
def pain001_schema() -> etree.XMLSchema:
    """The plain ISO pain.001.001.09 XSD, compiled once (what the ISO message allows)."""
    return etree.XMLSchema(_iso_xsd())


# The EPC SCT / SCT Inst C2PSP implementation guidelines for pain.001.001.09 restrict the ISO
# message; the ones a file built here could break, applied to the ISO XSD (``epc_pain001_schema``).
_XS = "{http://www.w3.org/2001/XMLSchema}"


def _epc_narrow(xsd: etree._ElementTree) -> None:
    root = xsd.getroot()
    types = {el.get("name"): el for el in root if el.get("name")}
    # PmtId: InstrId and EndToEndId only (the EPC schema has no UETR).
    for element in types["PaymentIdentification6"].iter(f"{_XS}element"):
        if element.get("name") == "UETR":
            element.getparent().remove(element)
    # Charges: shared following the scheme (SLEV) only.
    restriction = types["ChargeBearerType1Code"].find(f"{_XS}restriction")
    for value in restriction.findall(f"{_XS}enumeration"):
        if value.get("value") != "SLEV":
            restriction.remove(value)
    # Euro only.
    currency = types["ActiveOrHistoricCurrencyCode"].find(f"{_XS}restriction")
    for facet in list(currency):
        currency.remove(facet)
    etree.SubElement(currency, f"{_XS}enumeration", value="EUR")


@cache
def epc_pain001_schema() -> etree.XMLSchema:
    """The pain.001.001.09 XSD narrowed by the EPC C2PSP restrictions (``_epc_narrow``), compiled
    once: what every file built here is validated against."""
    xsd = _iso_xsd()
    _epc_narrow(xsd)
    return etree.XMLSchema(xsd)


def uetr_for(end_to_end_id: str) -> str:
    """The UETR pain.001 files built before the EPC schema was enforced carried (PmtId/UETR),
    derived from the EndToEndId: a statement line or pain.002 report that names such a payment
    only by its UETR still finds the payout. Shaped as a UUIDv4."""
    digest = hashlib.sha256(f"joyback-uetr:{end_to_end_id}".encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest, version=4))


def instant_file_account(iban: str) -> bool:
    """Whether the bank of this debtor account executes pain.001 files marked instant
    (``settings.SEPA_INSTANT_FILE_IBANS``)."""
    accepting = {normalise_iban(i) for i in getattr(settings, "SEPA_INSTANT_FILE_IBANS", [])}
    return normalise_iban(iban) in accepting


def _configured(name: str) -> str:
    """A SEPA debtor setting: ``settings.SEPA_DEBTOR_<NAME>``, else the file rail's OPTIONS."""
    options = getattr(settings, "PAYOUT_RAILS", {}).get("sepa_file", {}).get("OPTIONS", {})
    return (getattr(settings, f"SEPA_DEBTOR_{name.upper()}", None) or options.get(f"debtor_{name}") or "").strip()


def debtor_party(debtor: DebtorAccount) -> tuple[str, str | None]:
    """The debtor's legal name and its agent's BIC (None: NOTPROVIDED) as the file states them."""
    name = _configured("name") or debtor.name
    bic = (debtor.bic or "").strip().upper()
    if not bic and _configured("iban") and normalise_iban(_configured("iban")) == normalise_iban(debtor.iban):
        bic = _configured("bic").upper()
    return name, bic or None


class _BatchTransfer(SepaTransfer):
    """sepaxml's SepaTransfer with our identifiers instead of its random ones (sepaxml 2.7 has no
    parameter for MsgId/PmtInfId, so the two hooks that create them are overridden)."""

    def __init__(self, config: dict, *, msg_id: str, instant: bool = False):
        self._fixed_msg_id = msg_id
        self._instant = instant
        super().__init__(config, schema=PAIN001_SCHEMA, clean=False)

    def _create_header(self):
        self.msg_id = self._fixed_msg_id
        super()._create_header()

    def _finalize_batch(self):
        super()._finalize_batch()
        for pmt_inf in self._xml.find(self.root_el).iter("PmtInf"):
            execution_date = pmt_inf.find("ReqdExctnDt/Dt").text
            pmt_inf.find("PmtInfId").text = f"{self._fixed_msg_id}-{execution_date.replace('-', '')}"
            agent = pmt_inf.find("DbtrAgt/FinInstnId")
            if agent is not None and len(agent) == 0:
                # sepaxml leaves FinInstnId empty without a BIC; the EPC wants Othr/Id NOTPROVIDED.
                ET.SubElement(ET.SubElement(agent, "Othr"), "Id").text = "NOTPROVIDED"
            if self._instant:
                # EPC SCT Inst C2PSP guidelines: LclInstrm/Cd INST asks for an instant transfer;
                # the XSD wants it right after SvcLvl.
                payment_type = pmt_inf.find("PmtTpInf")
                local = ET.Element("LclInstrm")
                ET.SubElement(local, "Cd").text = "INST"
                payment_type.insert(list(payment_type).index(payment_type.find("SvcLvl")) + 1, local)


def _check_inputs(*, batch_id: str, debtor: DebtorAccount, payments: list[RailPayment]) -> None:
    validate_end_to_end_id(batch_id)
    if len(batch_id) > MAX_BATCH_ID_LENGTH:
        raise InvalidInput(f"batch_id must be at most {MAX_BATCH_ID_LENGTH} characters.", code="invalid_batch_id")
    if not payments:
        raise InvalidInput("A pain.001 file needs at least one payment.", code="empty_batch")
    seen: set[str] = set()
    for payment in payments:
        problems = []
        if payment.currency != "EUR":
            problems.append("SEPA credit transfers are in EUR only")
        if not payment.creditor_iban:
            problems.append("an IBAN is required")
        if payment.amount_minor > SEPA_MAX_AMOUNT_MINOR:
            problems.append("amount above the SEPA maximum")
        if debtor.account_code and payment.debtor_account_code != debtor.account_code:
            problems.append(f"debtor account {payment.debtor_account_code!r} is not this file's")
        if payment.end_to_end_id in seen:
            problems.append("end_to_end_id appears twice in the file")
        seen.add(payment.end_to_end_id)
        if problems:
            raise InvalidInput(
                f"Payment {payment.end_to_end_id}: {'; '.join(problems)}.",
                code="invalid_sepa_payment",
                details={"end_to_end_id": payment.end_to_end_id, "problems": problems},
            )


def _check_document(xml: bytes, *, payments: list[RailPayment], dates: dict[str, str]) -> None:
    """Validate against the XSD, then prove that every payment is in the file once, in its date's
    block, with its exact amount, and that counts and control sums equal our own Decimal sums."""
    document = etree.fromstring(xml, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True))
    schema = epc_pain001_schema()
    if not schema.validate(document):
        errors = [f"line {e.line}: {e.message}" for e in list(schema.error_log)[:5]]
        raise InvalidInput(
            "The pain.001 file does not validate against the EPC SCT schema.",
            code="pain001_invalid",
            details={"errors": errors},
        )
    ns = {"p": PAIN001_NAMESPACE}
    expected_total = sum((minor_to_decimal(p.amount_minor, "EUR") for p in payments), Decimal(0))
    group_sum = Decimal(document.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:CtrlSum", namespaces=ns))
    group_count = int(document.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:NbOfTxs", namespaces=ns))
    mismatches = []
    if group_sum != expected_total or group_count != len(payments):
        mismatches.append(f"group header {group_count}/{group_sum}, expected {len(payments)}/{expected_total}")
    expected_blocks: dict[str, tuple[int, Decimal]] = {}
    for payment in payments:
        day = dates[payment.end_to_end_id]
        count, total = expected_blocks.get(day, (0, Decimal(0)))
        expected_blocks[day] = (count + 1, total + minor_to_decimal(payment.amount_minor, "EUR"))
    expected_amounts = {p.end_to_end_id: minor_to_decimal(p.amount_minor, "EUR") for p in payments}
    for block in document.iterfind("p:CstmrCdtTrfInitn/p:PmtInf", namespaces=ns):
        day = block.findtext("p:ReqdExctnDt/p:Dt", namespaces=ns)
        found = (int(block.findtext("p:NbOfTxs", namespaces=ns)), Decimal(block.findtext("p:CtrlSum", namespaces=ns)))
        if expected_blocks.pop(day, None) != found:
            mismatches.append(f"block {day}: {found}")
        for tx in block.iterfind("p:CdtTrfTxInf", namespaces=ns):
            end_to_end_id = tx.findtext("p:PmtId/p:EndToEndId", namespaces=ns)
            amount = Decimal(tx.findtext("p:Amt/p:InstdAmt", namespaces=ns))
            if expected_amounts.pop(end_to_end_id, None) != amount or dates.get(end_to_end_id) != day:
                mismatches.append(f"transaction {end_to_end_id}: {amount} on {day}")
    if expected_amounts:
        mismatches.append(f"{len(expected_amounts)} payments missing from the file")
    if mismatches or expected_blocks:
        raise InvalidInput(
            "pain.001 control sums do not match the payments.",
            code="pain001_control_sum",
            details={"mismatches": mismatches, "missing_blocks": sorted(expected_blocks)},
        )


def build_pain001(
    *, batch_id: str, debtor: DebtorAccount, payments: list[RailPayment], execution_date: date, instant: bool = False
) -> bytes:
    """Build a pain.001.001.09 credit-transfer file for one debtor account; ``instant`` marks its
    payments as SCT Inst (``PmtTpInf/LclInstrm/Cd`` INST), for a bank that executes such files.

    Each payment goes into the block of its ``requested_execution_date`` (``execution_date`` when
    it has none or asks for an earlier day). Names and remittance texts are transliterated to the
    SEPA character set. The bytes are returned only after XSD validation and the control-sum
    check pass.

    Raises ``InvalidInput`` (codes ``invalid_batch_id``, ``empty_batch``, ``invalid_sepa_payment``,
    ``pain001_invalid``, ``pain001_control_sum``). Pure: no database, no I/O besides reading the XSD.
    """
    _check_inputs(batch_id=batch_id, debtor=debtor, payments=payments)
    name, bic = debtor_party(debtor)
    config = {"name": sepa_text(name, 70), "IBAN": normalise_iban(debtor.iban), "batch": True, "currency": "EUR"}
    if bic:
        config["BIC"] = bic
    transfer = _BatchTransfer(config, msg_id=batch_id, instant=instant)
    dates: dict[str, str] = {}
    for payment in payments:
        day = max(payment.requested_execution_date or execution_date, execution_date)
        dates[payment.end_to_end_id] = day.isoformat()
        entry = {
            "name": sepa_text(payment.creditor_name, 70),
            "IBAN": payment.creditor_iban,
            "amount": payment.amount_minor,
            "currency": "EUR",
            "execution_date": day,
            "description": sepa_text(payment.remittance, 140) or payment.end_to_end_id,
            "endtoend_id": payment.end_to_end_id,
        }
        if payment.creditor_bic:
            entry["BIC"] = payment.creditor_bic
        transfer.add_payment(entry)
    xml = transfer.export(validate=False)
    _check_document(xml, payments=payments, dates=dates)
    epc_usage_problems = epc_usage_rule_problems(xml)
    if epc_usage_problems:
        raise InvalidInput(
            "The pain.001 file breaks the EPC usage rules.",
            code="pain001_epc_rules",
            details={"problems": epc_usage_problems[:20]},
        )
    return xml


_EPC_TEXT = re.compile(r"^[A-Za-z0-9/\-?:().,'+ ]*$")
_EPC_ID = re.compile(r"^(?!/)(?!.*//)[A-Za-z0-9/\-?:().,'+ ]{1,35}$")
_BIC = re.compile(r"^[A-Z]{6}[A-Z2-9][A-NP-Z0-9]([A-Z0-9]{3})?$")


def epc_usage_rule_problems(xml: bytes) -> list[str]:
    """The EPC SCT implementation guidelines' usage rules the ISO XSD does not enforce (EPC132-08):
    names present and in the Latin set, agent BIC or ``Othr/Id`` NOTPROVIDED, TRF / SEPA / SLEV (and
    no local instrument but SCT Inst's INST), EUR
    amounts of 0.01-999,999,999.99 with two decimals, identifiers of at most 35 characters that
    neither start with nor contain "//", creditor IBANs, and at most 140 characters of remittance."""
    document = etree.fromstring(xml, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True))
    ns = {"p": PAIN001_NAMESPACE}
    problems: list[str] = []

    def text(node, path: str) -> str | None:
        return node.findtext(path, namespaces=ns)

    def check_name(where: str, value: str | None) -> None:
        if not value or len(value) > 70 or not _EPC_TEXT.match(value):
            problems.append(f"{where}: a name of 1-70 characters in the EPC Latin set is required, got {value!r}")

    def check_id(where: str, value: str | None) -> None:
        if value is None or not _EPC_ID.match(value):
            problems.append(f"{where}: {value!r} is not an EPC identifier (1-35, no leading or double slash)")

    def check_agent(where: str, node) -> None:
        bic, other = text(node, "p:FinInstnId/p:BICFI"), text(node, "p:FinInstnId/p:Othr/p:Id")
        if not ((bic and _BIC.match(bic)) or (bic is None and other == "NOTPROVIDED")):
            problems.append(f"{where}: needs BICFI or Othr/Id NOTPROVIDED, got BICFI={bic!r} Othr/Id={other!r}")

    root = document.find("p:CstmrCdtTrfInitn", ns)
    check_id("GrpHdr/MsgId", text(root, "p:GrpHdr/p:MsgId"))
    check_name("GrpHdr/InitgPty/Nm", text(root, "p:GrpHdr/p:InitgPty/p:Nm"))
    for block in root.iterfind("p:PmtInf", ns):
        where = f"PmtInf {text(block, 'p:PmtInfId')}"
        check_id(f"{where}/PmtInfId", text(block, "p:PmtInfId"))
        if text(block, "p:PmtMtd") != "TRF":
            problems.append(f"{where}: PmtMtd must be TRF")
        if text(block, "p:PmtTpInf/p:SvcLvl/p:Cd") != "SEPA":
            problems.append(f"{where}: PmtTpInf/SvcLvl/Cd must be SEPA")
        if text(block, "p:PmtTpInf/p:LclInstrm/p:Cd") not in (None, "INST"):
            problems.append(f"{where}: PmtTpInf/LclInstrm/Cd may only be INST (an instant transfer)")
        if text(block, "p:ChrgBr") not in (None, "SLEV"):
            problems.append(f"{where}: ChrgBr must be SLEV")
        check_name(f"{where}/Dbtr/Nm", text(block, "p:Dbtr/p:Nm"))
        if not text(block, "p:DbtrAcct/p:Id/p:IBAN"):
            problems.append(f"{where}: DbtrAcct/Id/IBAN is required")
        agent = block.find("p:DbtrAgt", ns)
        if agent is None:
            problems.append(f"{where}: DbtrAgt is required")
        else:
            check_agent(f"{where}/DbtrAgt", agent)
        for tx in block.iterfind("p:CdtTrfTxInf", ns):
            e2e = text(tx, "p:PmtId/p:EndToEndId")
            check_id(f"transaction {e2e}/EndToEndId", e2e)
            amount = tx.find("p:Amt/p:InstdAmt", ns)
            value = Decimal(amount.text) if amount is not None else None
            if amount is None or amount.get("Ccy") != "EUR":
                problems.append(f"transaction {e2e}: InstdAmt must be in EUR")
            elif not (Decimal("0.01") <= value <= Decimal("999999999.99")) or value.as_tuple().exponent < -2:
                problems.append(f"transaction {e2e}: amount {amount.text} outside 0.01-999999999.99 or over 2 decimals")
            check_name(f"transaction {e2e}/Cdtr/Nm", text(tx, "p:Cdtr/p:Nm"))
            if not text(tx, "p:CdtrAcct/p:Id/p:IBAN"):
                problems.append(f"transaction {e2e}: CdtrAcct/Id/IBAN is required")
            creditor_agent = tx.find("p:CdtrAgt", ns)
            if creditor_agent is not None:
                check_agent(f"transaction {e2e}/CdtrAgt", creditor_agent)
            remittance = tx.findall("p:RmtInf/p:Ustrd", ns)
            if len(remittance) > 1 or any(len(r.text or "") > 140 for r in remittance):
                problems.append(f"transaction {e2e}: one RmtInf/Ustrd of at most 140 characters")
    return problems


class SepaFileRail(Rail):
    """SEPA credit transfers sent as pain.001 files that ops download and upload to the bank.

    ``submit`` only checks that the payment can travel in a file and answers ``pending``: the file
    itself is built per batch with ``build_file``. Status arrives later through the pain.002
    report (``payouts.pain002``) or the bank statement, so ``status`` always answers ``pending``
    and the engine must not poll this rail (``capabilities().file_based``).
    """

    name = "sepa_file"

    def __init__(
        self,
        *,
        debtor_name: str = "",
        debtor_iban: str = "",
        debtor_bic: str | None = None,
        debtor_account_code: str | None = None,
    ):
        self._debtor = (
            DebtorAccount(name=debtor_name, iban=debtor_iban, bic=debtor_bic, account_code=debtor_account_code)
            if debtor_iban
            else None
        )

    def debtor(self) -> DebtorAccount:
        if self._debtor is None:
            raise ImproperlyConfigured("PAYOUT_RAILS['sepa_file']['OPTIONS'] needs debtor_name and debtor_iban.")
        return self._debtor

    def build_file(
        self, *, batch_id: str, payments: list[RailPayment], execution_date: date, instant: bool = False
    ) -> bytes:
        return build_pain001(
            batch_id=batch_id, debtor=self.debtor(), payments=payments, execution_date=execution_date, instant=instant
        )

    def submit(self, payment: RailPayment) -> SubmitResult:
        if (
            not self.capabilities().supports(
                currency=payment.currency,
                country=payment.creditor_country,
                amount_minor=payment.amount_minor,
                account_type=payment.account_type,
            )
            or not payment.creditor_iban
        ):
            raise FinalRailError(
                f"Payment {payment.end_to_end_id} cannot travel as a SEPA credit transfer.",
                reason_code="AG01",
                rail_code="not_sepa",
            )
        return SubmitResult(status=SubmitStatus.PENDING, rail_reference=payment.end_to_end_id)

    def status(self, end_to_end_id: str, *, rail_reference: str | None = None) -> StatusResult:
        return StatusResult(
            status=RailStatus.PENDING,
            rail_reference=rail_reference or end_to_end_id,
            reason_text="File rail: the status arrives with the pain.002 report or the bank statement.",
        )

    def verify_payee(self, *, name: str, iban: str) -> VerifyPayeeResult:
        return payee_verify(name=name, iban=iban)

    def capabilities(self) -> Capabilities:
        return Capabilities(
            currencies=frozenset({"EUR"}),
            countries=SEPA_COUNTRIES,
            instant=self._debtor is not None and instant_file_account(self._debtor.iban),
            max_amount_minor=SEPA_MAX_AMOUNT_MINOR,
            verify_payee=vop_provider().configured,
            file_based=True,
        )
