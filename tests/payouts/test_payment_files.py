"""Erased people out of the stored pain.001 copies (issue 18, payouts.payment_files): their creditor
name and IBAN are pseudonymised by EndToEndId, XML-aware, the file stays valid against its XSD and
its control sums hold; a file not downloaded yet stays whole until it is."""

from datetime import timedelta

import pytest
from django.utils import timezone
from lxml import etree

from core.retention import retention_purge
from payouts.models import Payout, PayoutBatch, RouteRule
from payouts.payment_files import pain001_payees_pseudonymise
from payouts.rails.sepa_file import PAIN001_NAMESPACE, pain001_schema
from payouts.services import payout_batch_create, payout_batch_download, payouts_create_for_payable
from recipients.services import person_erase
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import assert_books_ok, iban, payable_reward, staff

pytestmark = pytest.mark.django_db
NS = {"p": PAIN001_NAMESPACE}
ZOE = "Zoë D'Angelo & Figli"
ZOE_IN_FILE = "Zoe D'Angelo Figli"  # as the file spells it (EPC Latin, no '&')
MARCO = "Marco Bianchi"


@pytest.fixture
def file_route(db):
    return RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")


@pytest.fixture
def two_in_a_file(sandbox, debtor, brand, campaign, file_route):  # noqa: F811
    """Zoë and Marco paid in one pain.001 file, not downloaded yet."""
    zoe_iban, marco_iban = iban(), iban()
    zoe = payable_reward(brand, account_iban=zoe_iban, name=ZOE).person
    payable_reward(brand, account_iban=marco_iban, name=MARCO)
    assert len(payouts_create_for_payable().created) == 2
    batch = payout_batch_create(actor=staff("olga"))
    return zoe, zoe_iban, marco_iban, batch


def transactions(document: str) -> dict[str, tuple[str, str, str]]:
    """EndToEndId → (creditor name, IBAN, amount) of every transaction."""
    root = etree.fromstring(document.encode())
    return {
        tx.findtext("p:PmtId/p:EndToEndId", namespaces=NS): (
            tx.findtext("p:Cdtr/p:Nm", namespaces=NS),
            tx.findtext("p:CdtrAcct/p:Id/p:IBAN", namespaces=NS),
            tx.findtext("p:Amt/p:InstdAmt", namespaces=NS),
        )
        for tx in root.iterfind(".//p:CdtTrfTxInf", namespaces=NS)
    }


def control_sums(document: str) -> list[str | None]:
    root = etree.fromstring(document.encode())
    return [el.text for el in root.iter(f"{{{PAIN001_NAMESPACE}}}NbOfTxs", f"{{{PAIN001_NAMESPACE}}}CtrlSum")]


def valid(document: str) -> bool:
    return pain001_schema().validate(etree.fromstring(document.encode()))


def e2e_of(person) -> str:
    return Payout.objects.get(person=person).end_to_end_id


def test_erasure_pseudonymises_her_transaction_in_a_downloaded_file_and_nothing_else(two_in_a_file):
    zoe, zoe_iban, marco_iban, batch = two_in_a_file
    payout_batch_download(batch=batch, actor=staff("dora", "download_payoutbatch"))
    before = PayoutBatch.objects.get(pk=batch.pk).file
    assert ZOE_IN_FILE in before and zoe_iban in before  # the file names her, as the bank needs

    person_erase(person=zoe)

    after = PayoutBatch.objects.get(pk=batch.pk).file
    assert ZOE_IN_FILE not in after and "Zoe" not in after and zoe_iban not in after
    theirs, ours = transactions(before), transactions(after)
    mine = e2e_of(zoe)
    assert ours[mine] == ("(erased)", f"{zoe_iban[:2]}00ERASED", theirs[mine][2])
    assert {k: v for k, v in ours.items() if k != mine} == {k: v for k, v in theirs.items() if k != mine}
    assert MARCO in after and marco_iban in after
    assert control_sums(after) == control_sums(before)
    assert valid(after)
    assert_books_ok()


def test_a_file_not_downloaded_yet_pays_her_then_forgets_her(two_in_a_file):
    zoe, zoe_iban, _, batch = two_in_a_file

    person_erase(person=zoe)

    # the instruction for money she is owed is still whole until the bank has it
    assert zoe_iban in PayoutBatch.objects.get(pk=batch.pk).file
    handed_out = payout_batch_download(batch=batch, actor=staff("dora", "download_payoutbatch")).decode()
    assert zoe_iban in handed_out and ZOE_IN_FILE in handed_out and valid(handed_out)
    # and the copy we keep forgets her
    kept = PayoutBatch.objects.get(pk=batch.pk).file
    assert zoe_iban not in kept and ZOE_IN_FILE not in kept and valid(kept)
    assert control_sums(kept) == control_sums(handed_out)


def test_a_name_kept_for_the_bookkeeping_leaves_the_file_with_her_iban_when_its_period_ends(two_in_a_file, settings):
    zoe, zoe_iban, _, batch = two_in_a_file
    settings.PRIVACY_PAYOUT_NAME_KEEP_DAYS = 30
    payout_batch_download(batch=batch, actor=staff("dora", "download_payoutbatch"))

    person_erase(person=zoe)
    kept = PayoutBatch.objects.get(pk=batch.pk).file
    assert ZOE_IN_FILE in kept and zoe_iban in kept  # kept with the payout's name

    retention_purge(now=timezone.now() + timedelta(days=31), dry_run=False)

    purged = PayoutBatch.objects.get(pk=batch.pk).file
    assert ZOE_IN_FILE not in purged and zoe_iban not in purged and valid(purged)
    assert Payout.objects.get(person=zoe).creditor_name == "(erased)"


def test_names_that_look_like_xml_do_not_break_the_file(two_in_a_file):
    """A plain text replacement of a short name ('Id', 'EUR') rewrote tags and attributes."""
    _, _, _, batch = two_in_a_file
    document = PayoutBatch.objects.get(pk=batch.pk).file
    e2e = next(iter(transactions(document)))

    once, changed = pain001_payees_pseudonymise(document, {e2e})
    twice, again = pain001_payees_pseudonymise(once, {e2e})

    assert changed == 1 and again == 0 and twice == once
    assert valid(once) and "<Id>" in once and 'Ccy="EUR"' in once
    assert pain001_payees_pseudonymise(document, {"not-in-this-file"}) == (document, 0)
