from datetime import date
from decimal import Decimal

import pytest
from lxml import etree

from core.exceptions import InvalidInput
from payouts.matchers import EndToEndMatcher
from payouts.models import Payout, PayoutBatch, RouteRule
from payouts.rails import get_rail
from payouts.rails.base import RailStatus, SubmitStatus
from payouts.rails.sepa_file import (
    PAIN001_NAMESPACE,
    DebtorAccount,
    SepaFileRail,
    _check_document,
    build_pain001,
    epc_pain001_schema,
    epc_usage_rule_problems,
    pain001_schema,
    uetr_for,
)
from payouts.services import payout_batch_create, payout_execute, payouts_create_for_payable
from reconciliation.models import StatementLine
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import DEBTOR_IBAN, iban, payable_reward, staff
from tests.payouts.rail_builders import TODAY, gbp_payment, rail_payment

NS = {"p": PAIN001_NAMESPACE}
DEBTOR = DebtorAccount(name="JoyBack S.r.l.", iban="DE89 3704 0044 0532 0130 00", bic="COBADEFFXXX")


def _parse(xml: bytes):
    return etree.fromstring(xml, etree.XMLParser(huge_tree=True, resolve_entities=False, no_network=True))


def test_the_pain001_09_xsd_ships_with_sepaxml():
    assert pain001_schema() is not None


def test_one_payment_file_validates_and_carries_our_identifiers():
    payment = rail_payment(end_to_end_id="PO-2025-000001", amount_minor=1999, creditor_bic="BPMOIT22XXX")

    xml = build_pain001(batch_id="BATCH-42", debtor=DEBTOR, payments=[payment], execution_date=TODAY)

    doc = _parse(xml)
    assert pain001_schema().validate(doc)
    assert doc.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:MsgId", namespaces=NS) == "BATCH-42"
    assert doc.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:CtrlSum", namespaces=NS) == "19.99"
    block = doc.find("p:CstmrCdtTrfInitn/p:PmtInf", namespaces=NS)
    assert block.findtext("p:PmtInfId", namespaces=NS) == "BATCH-42-20250102"
    assert block.findtext("p:DbtrAcct/p:Id/p:IBAN", namespaces=NS) == "DE89370400440532013000"
    tx = block.find("p:CdtTrfTxInf", namespaces=NS)
    assert tx.findtext("p:PmtId/p:EndToEndId", namespaces=NS) == "PO-2025-000001"
    assert tx.findtext("p:Amt/p:InstdAmt", namespaces=NS) == "19.99"
    assert tx.findtext("p:CdtrAgt/p:FinInstnId/p:BICFI", namespaces=NS) == "BPMOIT22XXX"
    assert b"NOTPROVIDED" not in xml


def test_ten_thousand_payments_validate_with_exact_control_sums():
    # Amounts from 1 cent to large, so a float anywhere would show up in the sums.
    payments = [
        rail_payment(end_to_end_id=f"PO-{i:010d}", amount_minor=1 + (i * 7919) % 9_999_999) for i in range(10_000)
    ]

    xml = build_pain001(batch_id="B-10K", debtor=DEBTOR, payments=payments, execution_date=TODAY)

    doc = _parse(xml)
    assert pain001_schema().validate(doc)
    expected = sum(Decimal(p.amount_minor) / 100 for p in payments)
    assert Decimal(doc.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:CtrlSum", namespaces=NS)) == expected
    assert doc.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:NbOfTxs", namespaces=NS) == "10000"
    amounts = [Decimal(a) for a in doc.xpath("//p:InstdAmt/text()", namespaces=NS)]
    assert sum(amounts) == expected
    ids = doc.xpath("//p:EndToEndId/text()", namespaces=NS)
    assert ids == [p.end_to_end_id for p in payments]


def test_one_block_per_execution_date_with_its_own_sums():
    payments = [
        rail_payment(amount_minor=100),
        rail_payment(amount_minor=250, requested_execution_date=date(2025, 1, 6)),
        rail_payment(amount_minor=5, requested_execution_date=date(2024, 12, 1)),  # past: runs on TODAY
    ]

    xml = build_pain001(batch_id="B-DATES", debtor=DEBTOR, payments=payments, execution_date=TODAY)

    blocks = {
        b.findtext("p:ReqdExctnDt/p:Dt", namespaces=NS): (
            b.findtext("p:NbOfTxs", namespaces=NS),
            b.findtext("p:CtrlSum", namespaces=NS),
            b.findtext("p:PmtInfId", namespaces=NS),
        )
        for b in _parse(xml).iterfind("p:CstmrCdtTrfInitn/p:PmtInf", namespaces=NS)
    }
    assert blocks == {
        "2025-01-02": ("2", "1.05", "B-DATES-20250102"),
        "2025-01-06": ("1", "2.50", "B-DATES-20250106"),
    }


def test_names_and_texts_are_brought_into_the_sepa_character_set():
    payment = rail_payment(creditor_name="Zoë Müller & Søn <GmbH>", remittance="Cashback für Café ☕ #12")

    doc = _parse(build_pain001(batch_id="B-CHARS", debtor=DEBTOR, payments=[payment], execution_date=TODAY))

    assert doc.xpath("//p:Cdtr/p:Nm/text()", namespaces=NS) == ["Zoe Muller Son GmbH"]
    assert doc.xpath("//p:Ustrd/text()", namespaces=NS) == ["Cashback fur Cafe 12"]


@pytest.mark.parametrize(
    ("payments", "code"),
    [
        ([gbp_payment()], "invalid_sepa_payment"),
        ([rail_payment(end_to_end_id="PO-DUP"), rail_payment(end_to_end_id="PO-DUP")], "invalid_sepa_payment"),
        ([rail_payment(amount_minor=100_000_000_000)], "invalid_sepa_payment"),
        ([], "empty_batch"),
    ],
)
def test_payments_a_sepa_file_cannot_carry_are_refused(payments, code):
    with pytest.raises(InvalidInput) as raised:
        build_pain001(batch_id="B-BAD", debtor=DEBTOR, payments=payments, execution_date=TODAY)

    assert raised.value.code == code


def test_a_file_never_mixes_debtor_accounts():
    debtor = DebtorAccount(name="JoyBack", iban="DE89370400440532013000", account_code="platform:bank:A:EUR")

    with pytest.raises(InvalidInput, match="not this file's"):
        build_pain001(
            batch_id="B-MIX",
            debtor=debtor,
            payments=[rail_payment(debtor_account_code="platform:bank:B:EUR")],
            execution_date=TODAY,
        )


def test_batch_id_must_leave_room_for_the_block_date():
    with pytest.raises(InvalidInput) as raised:
        build_pain001(batch_id="B" * 27, debtor=DEBTOR, payments=[rail_payment()], execution_date=TODAY)

    assert raised.value.code == "invalid_batch_id"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b'<InstdAmt Ccy="EUR">10.00</InstdAmt>', b'<InstdAmt Ccy="EUR">10.01</InstdAmt>'),  # one amount
        (b"<CtrlSum>10.00</CtrlSum>", b"<CtrlSum>10.01</CtrlSum>"),  # the sums
        (b"<EndToEndId>PO-TAMPER</EndToEndId>", b"<EndToEndId>PO-OTHER</EndToEndId>"),  # whose money
    ],
)
def test_the_self_check_catches_a_tampered_file(old, new):
    payment = rail_payment(end_to_end_id="PO-TAMPER", amount_minor=1000)
    xml = build_pain001(batch_id="B-TAMPER", debtor=DEBTOR, payments=[payment], execution_date=TODAY)
    tampered = xml.replace(old, new)
    assert tampered != xml

    with pytest.raises(InvalidInput) as raised:
        _check_document(tampered, payments=[payment], dates={payment.end_to_end_id: "2025-01-02"})

    assert raised.value.code == "pain001_control_sum"


def test_xsd_violation_is_refused():
    payment = rail_payment(amount_minor=1000)
    xml = build_pain001(batch_id="B-XSD", debtor=DEBTOR, payments=[payment], execution_date=TODAY)
    broken = xml.replace(b"<ChrgBr>SLEV</ChrgBr>", b"<ChrgBr>FREE</ChrgBr>")

    with pytest.raises(InvalidInput) as raised:
        _check_document(broken, payments=[payment], dates={payment.end_to_end_id: "2025-01-02"})

    assert raised.value.code == "pain001_invalid"


def test_file_rail_accepts_sepa_payments_as_pending(settings):
    settings.PAYOUT_RAILS = {
        "sepa_file": {
            "BACKEND": "payouts.rails.sepa_file.SepaFileRail",
            "OPTIONS": {"debtor_name": "JoyBack", "debtor_iban": "DE89370400440532013000"},
        }
    }
    rail = get_rail("sepa_file")
    payment = rail_payment()

    result = rail.submit(payment)

    assert (result.status, result.rail_reference) == (SubmitStatus.PENDING, payment.end_to_end_id)
    assert rail.status(payment.end_to_end_id).status is RailStatus.PENDING
    assert rail.capabilities().file_based
    assert b"<EndToEndId>" + payment.end_to_end_id.encode() in rail.build_file(
        batch_id="B-RAIL", payments=[payment], execution_date=TODAY
    )


def test_file_rail_refuses_non_sepa_payments():
    from payouts.rails.base import FinalRailError

    with pytest.raises(FinalRailError) as raised:
        SepaFileRail().submit(gbp_payment())

    assert raised.value.reason_code == "AG01"


# --- EPC usage rules (issue 15): debtor agent and names -------------------------------------------


def _block(xml: bytes):
    return _parse(xml).find("p:CstmrCdtTrfInitn/p:PmtInf", namespaces=NS)


def test_an_account_without_bic_gets_the_configured_bic_of_its_iban(settings):
    settings.SEPA_DEBTOR_NAME = "JoyBack Payouts B.V."
    settings.SEPA_DEBTOR_IBAN = "NL91ABNA0417164300"
    settings.SEPA_DEBTOR_BIC = "ABNANL2A"
    # The services pass the platform account as stored: its label, no BIC (the demo's account).
    debtor = DebtorAccount(name="Operating", iban="NL91ABNA0417164300")

    xml = build_pain001(batch_id="B-1", debtor=debtor, payments=[rail_payment()], execution_date=TODAY)

    block = _block(xml)
    assert block.findtext("p:DbtrAgt/p:FinInstnId/p:BICFI", namespaces=NS) == "ABNANL2A"
    assert block.findtext("p:Dbtr/p:Nm", namespaces=NS) == "JoyBack Payouts B.V."
    assert _parse(xml).findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:InitgPty/p:Nm", namespaces=NS) == "JoyBack Payouts B.V."
    assert epc_usage_rule_problems(xml) == []


def test_an_account_of_another_bank_without_bic_says_notprovided(settings):
    settings.SEPA_DEBTOR_IBAN = "NL91ABNA0417164300"
    settings.SEPA_DEBTOR_BIC = "ABNANL2A"
    debtor = DebtorAccount(name="Second account", iban="DE89370400440532013000")

    xml = build_pain001(batch_id="B-2", debtor=debtor, payments=[rail_payment()], execution_date=TODAY)

    agent = _block(xml).find("p:DbtrAgt/p:FinInstnId", namespaces=NS)
    assert [etree.QName(child).localname for child in agent] == ["Othr"]
    assert agent.findtext("p:Othr/p:Id", namespaces=NS) == "NOTPROVIDED"
    assert pain001_schema().validate(_parse(xml)) and epc_usage_rule_problems(xml) == []


def test_without_a_configured_name_the_account_label_is_used(settings):
    settings.SEPA_DEBTOR_NAME = ""
    settings.PAYOUT_RAILS = {}
    xml = build_pain001(batch_id="B-3", debtor=DEBTOR, payments=[rail_payment()], execution_date=TODAY)
    assert _block(xml).findtext("p:Dbtr/p:Nm", namespaces=NS) == "JoyBack S.r.l."


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda x: x.replace(b"<BICFI>COBADEFFXXX</BICFI>", b"", 1), "DbtrAgt: needs BICFI or Othr/Id NOTPROVIDED"),
        (lambda x: x.replace(b"<ChrgBr>SLEV</ChrgBr>", b"<ChrgBr>DEBT</ChrgBr>"), "ChrgBr must be SLEV"),
        (lambda x: x.replace(b"<Cd>SEPA</Cd>", b"<Cd>NURG</Cd>"), "SvcLvl/Cd must be SEPA"),
        (lambda x: x.replace(b"<MsgId>B-4</MsgId>", b"<MsgId>B//4</MsgId>"), "GrpHdr/MsgId: 'B//4'"),
        (lambda x: x.replace(b">12.34</InstdAmt>", b">12.345</InstdAmt>"), "over 2 decimals"),
        (lambda x: x.replace(b"<Nm>JoyBack S.r.l.</Nm>", b"<Nm>JoyBack \xc3\x9f</Nm>", 1), "InitgPty/Nm"),
        (lambda x: x.replace(b"</Ustrd>", b"</Ustrd><Ustrd>second</Ustrd>"), "one RmtInf/Ustrd"),
    ],
    ids=["empty-agent", "charges", "service-level", "double-slash", "decimals", "charset", "two-ustrd"],
)
def test_the_epc_rules_the_xsd_lets_through_are_caught(settings, change, problem):
    settings.SEPA_DEBTOR_NAME = "JoyBack S.r.l."
    xml = build_pain001(batch_id="B-4", debtor=DEBTOR, payments=[rail_payment(amount_minor=1234)], execution_date=TODAY)
    broken = change(xml)
    assert broken != xml and pain001_schema().validate(_parse(broken))  # the XSD is fine with it
    assert any(problem in p for p in epc_usage_rule_problems(broken))


# --- UETR (issue 15) -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant",
    [
        dict(payments=[rail_payment(end_to_end_id="PO-A", creditor_bic="BPMOIT22XXX")]),
        dict(payments=[rail_payment(end_to_end_id="PO-A"), rail_payment(end_to_end_id="PO-B")], instant=True),
        dict(
            payments=[
                rail_payment(end_to_end_id="PO-A", requested_execution_date=date(2025, 1, 6)),
                rail_payment(end_to_end_id="PO-B", creditor_name="Zoë Ünal-Łukasz 😀"),
            ],
            debtor=DebtorAccount(name="JoyBack", iban="DE89 3704 0044 0532 0130 00"),
        ),
    ],
    ids=["one", "instant", "two-dates-no-bic"],
)
def test_every_built_file_validates_against_the_epc_sct_schema_it_declares(variant):
    """Issue 25: the EPC SCT (Inst) C2PSP pain.001.001.09 has no PmtId/UETR; a file carrying one
    is refused by the bank. Every file is built without it and validated against the EPC-narrowed
    schema (``build_pain001`` refuses to return one that is not)."""
    variant = {"debtor": DEBTOR, **variant}
    xml = build_pain001(batch_id="B-EPC", execution_date=TODAY, **variant)

    doc = _parse(xml)
    assert epc_pain001_schema().validate(doc), epc_pain001_schema().error_log
    assert doc.xpath("//p:PmtId/p:UETR", namespaces=NS) == []
    assert set(doc.xpath("//p:SvcLvl/p:Cd/text()", namespaces=NS)) == {"SEPA"}


def test_the_epc_schema_refuses_what_the_iso_schema_allows():
    doc = _parse(build_pain001(batch_id="B-U", debtor=DEBTOR, payments=[rail_payment()], execution_date=TODAY))
    etree.SubElement(doc.find(".//p:PmtId", namespaces=NS), f"{{{PAIN001_NAMESPACE}}}UETR").text = uetr_for("PO-A")

    assert pain001_schema().validate(doc)
    assert not epc_pain001_schema().validate(doc)
    assert uetr_for("PO-A") == uetr_for("PO-A") != uetr_for("PO-B")


def test_a_statement_line_with_only_the_uetr_finds_its_payout(sandbox, debtor, brand, campaign):
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    # The bank dropped the EndToEndId (NOTPROVIDED) but kept the UETR of our file.
    line = StatementLine(
        pk=1, uetr=uetr_for(payout.end_to_end_id), amount_minor=payout.amount_minor, currency="EUR", credit_debit="DBIT"
    )
    (proposal,) = EndToEndMatcher().propose([line])
    assert proposal.target_id == str(payout_id) and proposal.reason.startswith("UETR ")
    line.uetr = uetr_for("someone-else")
    assert EndToEndMatcher().propose([line]) == []


def test_an_instant_file_asks_for_sct_inst_and_still_validates():
    payments = [rail_payment(), rail_payment(requested_execution_date=date(2025, 1, 3))]

    xml = build_pain001(batch_id="JBB-INST", debtor=DEBTOR, payments=payments, execution_date=TODAY, instant=True)

    document = _parse(xml)
    assert pain001_schema().validate(document) and epc_usage_rule_problems(xml) == []
    for block in document.iterfind("p:CstmrCdtTrfInitn/p:PmtInf", NS):
        payment_type = block.find("p:PmtTpInf", NS)
        assert [etree.QName(e).localname for e in payment_type] == ["SvcLvl", "LclInstrm"]
        assert block.findtext("p:PmtTpInf/p:LclInstrm/p:Cd", namespaces=NS) == "INST"


def test_a_standard_file_names_no_local_instrument():
    xml = build_pain001(batch_id="JBB-STD", debtor=DEBTOR, payments=[rail_payment()], execution_date=TODAY)

    assert _parse(xml).find(".//p:LclInstrm", NS) is None


def test_the_epc_rules_allow_no_local_instrument_but_inst():
    xml = build_pain001(
        batch_id="JBB-INST", debtor=DEBTOR, payments=[rail_payment()], execution_date=TODAY, instant=True
    )

    assert any("LclInstrm" in p for p in epc_usage_rule_problems(xml.replace(b"<Cd>INST</Cd>", b"<Cd>CORE</Cd>")))


@pytest.mark.parametrize(("accepting", "instant", "level"), [(True, True, "instant"), (False, False, "standard")])
def test_a_batch_is_instant_where_the_debtor_bank_takes_instant_files(
    sandbox, debtor, brand, campaign, settings, accepting, instant, level
):
    settings.SEPA_INSTANT_FILE_IBANS = [DEBTOR_IBAN] if accepting else []
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created

    batch = payout_batch_create(actor=staff("olga"))

    assert PayoutBatch.objects.get(pk=batch.pk).instant is instant
    assert (b"<Cd>INST</Cd>" in batch.file.encode()) is instant
    assert Payout.objects.get(pk=payout_id).service_level == level
    assert batch.events.get(kind="batch.built").data["instant"] is instant
