"""pain.001 batches: build, four-eyes, download, pain.002 status, and a 10,000-payout file."""

from decimal import Decimal

import pytest
from lxml import etree

from core.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from payouts.models import BatchStatus, Payout, PayoutBatch, PayoutEvent, PayoutStatus, RouteRule
from payouts.pain002 import parse_pain002
from payouts.rails.sepa_file import PAIN001_NAMESPACE, pain001_schema
from payouts.services import (
    payout_batch_apply_pain002,
    payout_batch_approve,
    payout_batch_create,
    payout_batch_download,
    payout_execute,
    payouts_create_for_payable,
)
from payouts.services.create import end_to_end_id_new
from recipients.services import person_set_iban
from reconciliation.models import AccountKind
from reconciliation.services import Leg, account_get_or_create, ledger_entry_post
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import (
    assert_books_ok,
    iban,
    in_transit_minor,
    payable_minor,
    payable_reward,
    staff,
)

pytestmark = pytest.mark.django_db
NS = {"p": PAIN001_NAMESPACE}


@pytest.fixture
def file_route(db):
    return RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")


def file_payouts(brand, n: int) -> list[Payout]:
    for _ in range(n):
        payable_reward(brand, account_iban=iban())
    created = payouts_create_for_payable().created
    assert len(created) == n
    return list(Payout.objects.filter(pk__in=created).order_by("id"))


def pain002(batch: PayoutBatch, *, group: str, rejected: dict[str, str] | None = None) -> bytes:
    txs = "".join(
        f"<TxInfAndSts><OrgnlEndToEndId>{e2e}</OrgnlEndToEndId><TxSts>RJCT</TxSts>"
        f"<StsRsnInf><Rsn><Cd>{code}</Cd></Rsn></StsRsnInf></TxInfAndSts>"
        for e2e, code in (rejected or {}).items()
    )
    block = f"<OrgnlPmtInfAndSts><OrgnlPmtInfId>{batch.payment_information_id}</OrgnlPmtInfId>{txs}</OrgnlPmtInfAndSts>"
    return (
        '<?xml version="1.0"?><Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.002.001.10"><CstmrPmtStsRpt>'
        "<GrpHdr><MsgId>STS1</MsgId><CreDtTm>2026-01-15T10:00:00</CreDtTm></GrpHdr>"
        f"<OrgnlGrpInfAndSts><OrgnlMsgId>{batch.batch_id}</OrgnlMsgId><OrgnlMsgNmId>pain.001.001.09</OrgnlMsgNmId>"
        f"<GrpSts>{group}</GrpSts></OrgnlGrpInfAndSts>{block}</CstmrPmtStsRpt></Document>"
    ).encode()


def test_file_rail_payouts_wait_for_a_batch_then_travel_in_one_validated_file(
    sandbox, debtor, brand, campaign, file_route
):
    payouts = file_payouts(brand, 3)
    assert {p.rail for p in payouts} == {"sepa_file"}
    assert payout_execute(payout_id=payouts[0].pk) == "waits_for_batch"
    # when ops build the batch
    batch = payout_batch_create(actor=staff("olga"))
    # then the file validates, carries our ids and exact sums, and the money is in transit
    document = etree.fromstring(batch.file.encode())
    assert pain001_schema().validate(document)
    assert document.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:MsgId", namespaces=NS) == batch.batch_id
    assert document.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:CtrlSum", namespaces=NS) == "15.00"
    e2e = document.xpath("//p:EndToEndId/text()", namespaces=NS)
    assert e2e == [p.end_to_end_id for p in payouts]
    assert batch.count == 3 and batch.control_sum_minor == 1_500 and not batch.requires_approval
    assert set(Payout.objects.filter(batch=batch).values_list("status", flat=True)) == {PayoutStatus.SUBMITTED}
    assert in_transit_minor() == 1_500 and all(payable_minor(p.person_id) == 0 for p in payouts)
    assert_books_ok()
    # and nothing is left for a second batch
    with pytest.raises(InvalidInput):
        payout_batch_create(actor=staff("ugo"))


def test_large_batch_needs_a_second_person_before_download(sandbox, debtor, brand, campaign, file_route, settings):
    settings.PAYOUT_BATCH_APPROVAL_THRESHOLD_MINOR = 1_000
    file_payouts(brand, 2)
    olga = staff("olga", "approve_payoutbatch", "download_payoutbatch")
    batch = payout_batch_create(actor=olga)
    assert batch.requires_approval
    with pytest.raises(InvalidTransition):
        payout_batch_download(batch=batch, actor=olga)
    with pytest.raises(PermissionDenied):
        payout_batch_approve(batch=batch, approver=olga)
    payout_batch_approve(batch=batch, approver=staff("piero", "approve_payoutbatch"))
    assert payout_batch_download(batch=batch, actor=olga).startswith(b"<?xml")
    batch.refresh_from_db()
    assert batch.status == BatchStatus.DOWNLOADED and batch.downloaded_by == olga


def test_pain002_rejects_one_transaction_and_its_money_goes_back_to_payable(
    sandbox, debtor, brand, campaign, file_route
):
    payouts = file_payouts(brand, 2)
    batch = payout_batch_create(actor=staff("olga"))
    report = parse_pain002(pain002(batch, group="PART", rejected={payouts[0].end_to_end_id: "AC01"}))
    assert payout_batch_apply_pain002(batch=batch, report=report) == {"failed": 1, "settled": 0}
    rejected, kept = (Payout.objects.get(pk=p.pk) for p in payouts)
    assert rejected.status == PayoutStatus.FAILED and rejected.reason_code == "AC01"
    assert payable_minor(rejected.person_id) == 500 and in_transit_minor() == 500
    assert kept.status == PayoutStatus.SUBMITTED
    # applying the same report again changes nothing
    assert payout_batch_apply_pain002(batch=batch, report=report) == {"failed": 0, "settled": 0}
    # the person fixes the IBAN and is paid by the next payout
    person_set_iban(person=rejected.person, iban=iban(), source="claim_page")
    assert len(payouts_create_for_payable().created) == 1
    assert_books_ok()


def test_pain002_vop_codes_are_kept_as_each_payouts_vop_result(sandbox, debtor, brand, campaign, file_route):
    payouts = file_payouts(brand, 2)
    batch = payout_batch_create(actor=staff("olga"))
    report = parse_pain002(pain002(batch, group="PART", rejected={payouts[0].end_to_end_id: "RVNM"}))
    payout_batch_apply_pain002(batch=batch, report=report)
    assert Payout.objects.get(pk=payouts[0].pk).vop_result == "no_match"
    # the other keeps its own check from before the file (no VoP service here: not possible)
    assert Payout.objects.get(pk=payouts[1].pk).vop_result == "not_possible"


@pytest.mark.postgres
def test_ten_thousand_payouts_make_one_valid_file_with_exact_control_sum(sandbox, debtor, brand, campaign, file_route):
    # given 10,000 file-rail payouts of varied amounts owed to one person (seeded directly: the
    # reward pipeline is exercised elsewhere; this test is about the file and the books)
    reward = payable_reward(brand, account_iban=iban())
    person, bank = reward.person, reward.person.bank_accounts.get()
    amounts = [1 + (i * 7919) % 250_000 for i in range(10_000)]
    payable = account_get_or_create(
        code=f"recipient:{person.pk}:payable:EUR", name="payable", kind=AccountKind.LIABILITY, currency="EUR"
    )
    seed = account_get_or_create(
        code="test:seed:EUR", name="seed", kind=AccountKind.EQUITY, currency="EUR", allow_overdraft=True
    )
    ledger_entry_post(
        idempotency_key="seed",
        kind="test_seed",
        legs=[Leg.debit(seed, sum(amounts)), Leg.credit(payable, sum(amounts))],
    )
    Payout.objects.bulk_create(
        [
            Payout(
                person=person,
                amount_minor=amount,
                currency="EUR",
                rail="sepa_file",
                end_to_end_id=end_to_end_id_new(),
                bank_account=bank,
                creditor_name="Giulia Rossi",
                creditor_iban_masked=bank.masked,
                creditor_country=bank.country,
                debtor_account_code=debtor.ledger_account.code,
                created_at=reward.created_at,
                updated_at=reward.created_at,
            )
            for amount in amounts
        ],
        batch_size=2000,
    )
    batch = payout_batch_create(actor=staff("olga"))
    document = etree.fromstring(batch.file.encode(), etree.XMLParser(huge_tree=True))
    assert pain001_schema().validate(document)
    expected = sum(Decimal(a).scaleb(-2) for a in amounts)
    assert Decimal(document.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:CtrlSum", namespaces=NS)) == expected
    assert document.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:NbOfTxs", namespaces=NS) == "10000"
    assert batch.control_sum_minor == sum(amounts) and batch.count == 10_000
    assert in_transit_minor() == sum(amounts)
    assert PayoutEvent.objects.filter(kind="payout.submitted").count() == 10_000
    assert_books_ok()
