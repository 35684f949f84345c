"""SEPA credit transfer files: pain.001.001.09 built with ``sepaxml`` and validated against the
ISO XSD that ``sepaxml`` ships, before anyone can download it.

One file per debtor account; inside it one payment-information block (PmtInf) per requested
execution date. Identifiers are ours, never random and never ``NOTPROVIDED``:

- ``MsgId`` = the batch id; ``PmtInfId`` = ``<batch id>-<YYYYMMDD>`` of the block's date;
- ``EndToEndId`` = the payout's ``end_to_end_id``, which the pain.002 report and the bank
  statement echo back, so each line finds its payout.

Amounts are integer minor units in, exact decimals out; every control sum is checked against our
own Decimal sum of the payments after the file is built.
"""

import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from functools import cache
from pathlib import Path

import sepaxml
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
    PayeeMatch,
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
    payment's ``debtor_account_code`` must equal it (one file never mixes debtor accounts)."""

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


@cache
def pain001_schema() -> etree.XMLSchema:
    """The pain.001.001.09 XSD shipped inside the installed ``sepaxml`` package, compiled once."""
    path = Path(sepaxml.__file__).parent / "schemas" / f"{PAIN001_SCHEMA}.xsd"
    if not path.exists():
        raise ImproperlyConfigured(f"sepaxml does not ship {path.name}; cannot validate pain.001 files.")
    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    return etree.XMLSchema(etree.parse(str(path), parser))


class _BatchTransfer(SepaTransfer):
    """sepaxml's SepaTransfer with our identifiers instead of its random ones (sepaxml 2.7 has no
    parameter for MsgId/PmtInfId, so the two hooks that create them are overridden)."""

    def __init__(self, config: dict, *, msg_id: str):
        self._fixed_msg_id = msg_id
        super().__init__(config, schema=PAIN001_SCHEMA, clean=False)

    def _create_header(self):
        self.msg_id = self._fixed_msg_id
        super()._create_header()

    def _finalize_batch(self):
        super()._finalize_batch()
        for pmt_inf in self._xml.find(self.root_el).iter("PmtInf"):
            execution_date = pmt_inf.find("ReqdExctnDt/Dt").text
            pmt_inf.find("PmtInfId").text = f"{self._fixed_msg_id}-{execution_date.replace('-', '')}"


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
    schema = pain001_schema()
    if not schema.validate(document):
        errors = [f"line {e.line}: {e.message}" for e in list(schema.error_log)[:5]]
        raise InvalidInput(
            "The pain.001 file does not validate against the XSD.", code="pain001_invalid", details={"errors": errors}
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


def build_pain001(*, batch_id: str, debtor: DebtorAccount, payments: list[RailPayment], execution_date: date) -> bytes:
    """Build a pain.001.001.09 credit-transfer file for one debtor account.

    Each payment goes into the block of its ``requested_execution_date`` (``execution_date`` when
    it has none or asks for an earlier day). Names and remittance texts are transliterated to the
    SEPA character set. The bytes are returned only after XSD validation and the control-sum
    check pass.

    Raises ``InvalidInput`` (codes ``invalid_batch_id``, ``empty_batch``, ``invalid_sepa_payment``,
    ``pain001_invalid``, ``pain001_control_sum``). Pure: no database, no I/O besides reading the XSD.
    """
    _check_inputs(batch_id=batch_id, debtor=debtor, payments=payments)
    config = {"name": sepa_text(debtor.name, 70), "IBAN": normalise_iban(debtor.iban), "batch": True, "currency": "EUR"}
    if debtor.bic:
        config["BIC"] = debtor.bic.strip().upper()
    transfer = _BatchTransfer(config, msg_id=batch_id)
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
    return xml


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

    def build_file(self, *, batch_id: str, payments: list[RailPayment], execution_date: date) -> bytes:
        return build_pain001(batch_id=batch_id, debtor=self.debtor(), payments=payments, execution_date=execution_date)

    def submit(self, payment: RailPayment) -> SubmitResult:
        if (
            not self.capabilities().supports(
                currency=payment.currency, country=payment.creditor_country, amount_minor=payment.amount_minor
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
        return VerifyPayeeResult(outcome=PayeeMatch.NOT_POSSIBLE)

    def capabilities(self) -> Capabilities:
        return Capabilities(
            currencies=frozenset({"EUR"}),
            countries=SEPA_COUNTRIES,
            instant=False,
            max_amount_minor=SEPA_MAX_AMOUNT_MINOR,
            verify_payee=False,
            file_based=True,
        )
