"""Issue 25: a bank line that names its payout is that payout's or nobody's; reversals reopen what
they reverse; bank charges never block a match; batch bookings match by their transactions'
EndToEndIds; a parked batch booking is matched again when a pain.002 makes it fit; pain.002 by UETR."""

import re
from decimal import Decimal

import pytest
from django.utils import timezone

from bench.camt_gen import GenLine, GenStatement, GenTx, write_camt053
from core.exceptions import InvalidInput
from payouts.models import Payout, PayoutBatch, PayoutItem, PayoutStatus, RouteRule
from payouts.pain002 import parse_pain002
from payouts.rails.sepa_file import uetr_for
from payouts.services import payout_batch_apply_pain002, payout_batch_create, payout_execute, payouts_create_for_payable
from recipients.models import NoticeKind
from recipients.models_notices import Notice
from reconciliation.matching import line_candidates
from reconciliation.models import JournalEntry, Match, StatementLine, StatementLineStatus, Suggestion
from reconciliation.selectors import account_balance_by_code
from reconciliation.services.matching import match_undo, statement_line_match_manual, statement_lines_match
from reconciliation.services.statements import statement_import
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import (
    DEBTOR_IBAN,
    assert_books_ok,
    bank_minor,
    iban,
    in_transit_minor,
    payable_minor,
    payable_reward,
    staff,
)

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def eur(minor: int) -> Decimal:
    return Decimal(minor).scaleb(-2)


def import_camt(tmp_path, lines, name="S1", *, strip_batch_block=False) -> None:
    path = tmp_path / f"{name}.xml"
    write_camt053(
        path,
        [
            GenStatement(
                statement_id=name,
                account_iban=DEBTOR_IBAN,
                currency="EUR",
                opening_balance=Decimal(0),
                lines=lines,
                booking_date=timezone.localdate(),
            )
        ],
        message_id=f"MSG-{name}",
    )
    if strip_batch_block:
        path.write_bytes(re.sub(rb"<Btch>.*?</Btch>", b"", path.read_bytes(), flags=re.S))
    statement_import(source=path, filename=path.name, origin="command", match=False)


def fees_minor() -> int:
    return account_balance_by_code(code="platform:bank_fees:EUR").posted_minor


def pending_payouts(settings, brand, n: int) -> list[Payout]:
    """``n`` sandbox payouts of 5.00, each to its own person, sent and waiting for the bank."""
    accounts = [iban() for _ in range(n)]
    settings.SANDBOX_FAILING_IBANS = {account: "pending:5" for account in accounts}
    for account in accounts:
        payable_reward(brand, account_iban=account)
    created = payouts_create_for_payable().created
    for payout_id in created:
        payout_execute(payout_id=payout_id)
    payouts = list(Payout.objects.filter(pk__in=created).order_by("id"))
    assert {p.status for p in payouts} == {PayoutStatus.SUBMITTED}
    return payouts


def file_batch(brand, n: int) -> PayoutBatch:
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    for _ in range(n):
        payable_reward(brand, account_iban=iban())
    payouts_create_for_payable()
    return payout_batch_create(actor=staff("olga"))


def pain002(batch: PayoutBatch, txs: str, group: str = "PART") -> bytes:
    return (
        '<?xml version="1.0"?><Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.002.001.10"><CstmrPmtStsRpt>'
        "<GrpHdr><MsgId>STS1</MsgId><CreDtTm>2026-01-15T10:00:00</CreDtTm></GrpHdr>"
        f"<OrgnlGrpInfAndSts><OrgnlMsgId>{batch.batch_id}</OrgnlMsgId><OrgnlMsgNmId>pain.001.001.09</OrgnlMsgNmId>"
        f"<GrpSts>{group}</GrpSts></OrgnlGrpInfAndSts><OrgnlPmtInfAndSts><OrgnlPmtInfId>"
        f"{batch.payment_information_id}</OrgnlPmtInfId>{txs}</OrgnlPmtInfAndSts></CstmrPmtStsRpt></Document>"
    ).encode()


def rejected(code: str, *, e2e: str = "", uetr: str = "") -> str:
    ids = (f"<OrgnlEndToEndId>{e2e}</OrgnlEndToEndId>" if e2e else "") + (
        f"<OrgnlUETR>{uetr}</OrgnlUETR>" if uetr else ""
    )
    return f"<TxInfAndSts>{ids}<TxSts>RJCT</TxSts><StsRsnInf><Rsn><Cd>{code}</Cd></Rsn></StsRsnInf></TxInfAndSts>"


# --- a line that names a payout --------------------------------------------------------------------


def test_a_line_naming_a_payout_is_never_suggested_for_another_nor_confirmable_against_it(
    tmp_path, sandbox, debtor, brand, campaign, settings
):
    # given two people's payouts of 5.00 waiting for the bank, the first already seen leaving
    named, other = pending_payouts(settings, brand, 2)
    import_camt(tmp_path, [GenLine(amount=eur(500), credit_debit="DBIT", end_to_end_id=named.end_to_end_id)])
    statement_lines_match()
    # when the bank reports the first payout's EndToEndId on a second debit of the same amount
    import_camt(tmp_path, [GenLine(amount=eur(500), credit_debit="DBIT", end_to_end_id=named.end_to_end_id)], "S2")
    result = statement_lines_match()
    # then it is parked naming that payout, and nobody else's payout is suggested for it
    line = StatementLine.objects.get(statement__statement_id="S2")
    assert result.suggested == 0 and line.status == StatementLineStatus.UNMATCHED
    assert named.end_to_end_id in line.status_note
    assert not Suggestion.objects.filter(line=line).exists()
    # and staff are not offered the other person's payout, nor can they tie it to it
    assert f"payout:{other.pk}" not in {c.key for c in line_candidates(line)}
    before = (JournalEntry.objects.count(), Match.objects.count())
    with pytest.raises(InvalidInput) as refused:
        statement_line_match_manual(line_id=line.pk, target_type="payout", target_id=str(other.pk), actor=staff("o"))
    assert refused.value.code == "line_names_another_target"
    assert (JournalEntry.objects.count(), Match.objects.count()) == before
    other.refresh_from_db()
    assert other.status == PayoutStatus.SUBMITTED and other.bank_debit_line_id is None
    assert_books_ok()


# --- reversals --------------------------------------------------------------------------------------


def _assert_reopened(payout: Payout, debtor) -> None:
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.RETURNED
    assert payable_minor(payout.person_id) == 500 and in_transit_minor() == 0 and bank_minor(debtor) == 0
    assert Notice.objects.filter(payout=payout, kind=NoticeKind.RETURNED).exists()
    assert not PayoutItem.objects.filter(payout=payout, active=True).exists()
    assert not StatementLine.objects.exclude(status=StatementLineStatus.MATCHED).exists()
    assert_books_ok()


def test_a_reversal_of_a_matched_payout_debit_reopens_the_payout(tmp_path, sandbox, debtor, brand, campaign, settings):
    (payout,) = pending_payouts(settings, brand, 1)
    import_camt(tmp_path, [GenLine(amount=eur(500), credit_debit="DBIT", end_to_end_id=payout.end_to_end_id)])
    statement_lines_match()
    assert Payout.objects.get(pk=payout.pk).status == PayoutStatus.SETTLED

    import_camt(
        tmp_path,
        [GenLine(amount=eur(500), credit_debit="CRDT", reversal=True, end_to_end_id=payout.end_to_end_id)],
        "S2",
    )
    assert dict(statement_lines_match().matched) == {"reversal": 1}

    _assert_reopened(payout, debtor)


def test_a_debit_and_its_reversal_in_one_statement_are_paired(tmp_path, sandbox, debtor, brand, campaign, settings):
    (payout,) = pending_payouts(settings, brand, 1)
    import_camt(
        tmp_path,
        [
            GenLine(amount=eur(500), credit_debit="DBIT", end_to_end_id=payout.end_to_end_id),
            GenLine(amount=eur(500), credit_debit="CRDT", reversal=True, end_to_end_id=payout.end_to_end_id),
        ],
    )
    assert dict(statement_lines_match().matched) == {"payout_end_to_end": 1, "reversal": 1}

    _assert_reopened(payout, debtor)


def test_an_unexplained_line_and_its_reversal_in_one_statement_explain_each_other(tmp_path, debtor):
    import_camt(
        tmp_path,
        [
            GenLine(amount=eur(700), credit_debit="DBIT", remittance="stray", counterparty_iban=None),
            GenLine(amount=eur(700), credit_debit="CRDT", reversal=True, remittance="stray", counterparty_iban=None),
        ],
    )
    result = statement_lines_match()
    assert dict(result.matched) == {"reversal": 1} and result.unmatched == 0
    assert set(StatementLine.objects.values_list("status", flat=True)) == {StatementLineStatus.MATCHED}
    assert bank_minor(debtor) == 0 and JournalEntry.objects.count() == 0
    assert_books_ok()


# --- bank charges -----------------------------------------------------------------------------------


def test_a_return_with_the_bank_fee_deducted_matches_and_books_the_fee(
    tmp_path, sandbox, debtor, brand, campaign, settings
):
    (payout,) = pending_payouts(settings, brand, 1)
    import_camt(
        tmp_path,
        [
            GenLine(amount=eur(500), credit_debit="DBIT", end_to_end_id=payout.end_to_end_id),
            GenLine(amount=eur(450), credit_debit="CRDT", end_to_end_id=payout.end_to_end_id, return_reason="AC04"),
        ],
    )
    assert dict(statement_lines_match().matched) == {"payout_end_to_end": 1, "payout_return": 1}
    payout.refresh_from_db()
    # the person is owed the whole 5.00 again and asked for a new account; the bank kept 0.50
    assert payout.status == PayoutStatus.RETURNED and payout.reason_code == "AC04"
    assert Notice.objects.filter(payout=payout, kind=NoticeKind.RETURNED).exists()
    assert payable_minor(payout.person_id) == 500 and in_transit_minor() == 0
    assert bank_minor(debtor) == -50 and fees_minor() == 50
    assert_books_ok()


def test_a_debit_with_the_bank_fee_added_matches_and_books_the_fee(
    tmp_path, sandbox, debtor, brand, campaign, settings
):
    (payout,) = pending_payouts(settings, brand, 1)
    import_camt(tmp_path, [GenLine(amount=eur(535), credit_debit="DBIT", end_to_end_id=payout.end_to_end_id)])
    assert dict(statement_lines_match().matched) == {"payout_end_to_end": 1}
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and in_transit_minor() == 0
    assert bank_minor(debtor) == -535 and fees_minor() == 35
    assert_books_ok()


def test_staff_can_match_a_debit_with_the_bank_fee_by_hand(tmp_path, sandbox, debtor, brand, campaign, settings):
    (payout,) = pending_payouts(settings, brand, 1)
    import_camt(tmp_path, [GenLine(amount=eur(535), credit_debit="DBIT", end_to_end_id=payout.end_to_end_id)])
    statement_lines_match()
    match_undo(match_id=Match.objects.get().pk, actor=staff("olga"), reason="check the fee")
    assert Payout.objects.get(pk=payout.pk).status == PayoutStatus.SUBMITTED and fees_minor() == 0

    statement_line_match_manual(
        line_id=StatementLine.objects.get().pk, target_type="payout", target_id=str(payout.pk), actor=staff("ops")
    )

    assert Payout.objects.get(pk=payout.pk).status == PayoutStatus.SETTLED
    assert bank_minor(debtor) == -535 and fees_minor() == 35 and in_transit_minor() == 0
    assert_books_ok()


def test_a_difference_above_the_charge_limit_is_not_a_charge(tmp_path, sandbox, debtor, brand, campaign, settings):
    settings.PAYOUT_BANK_CHARGE_MAX_MINOR = 30
    (payout,) = pending_payouts(settings, brand, 1)
    import_camt(tmp_path, [GenLine(amount=eur(535), credit_debit="DBIT", end_to_end_id=payout.end_to_end_id)])
    assert statement_lines_match().matched_total == 0
    with pytest.raises(InvalidInput) as refused:
        statement_line_match_manual(
            line_id=StatementLine.objects.get().pk, target_type="payout", target_id=str(payout.pk), actor=staff("o")
        )
    assert refused.value.code == "amount_mismatch"
    assert Payout.objects.get(pk=payout.pk).status == PayoutStatus.SUBMITTED
    assert_books_ok()


# --- batch bookings ---------------------------------------------------------------------------------


def test_a_batch_booking_without_btch_matches_by_its_transactions_end_to_end_ids(
    tmp_path, sandbox, debtor, brand, campaign
):
    batch = file_batch(brand, 3)
    payouts = list(batch.payouts.order_by("id"))
    import_camt(
        tmp_path,
        [
            GenLine(
                credit_debit="DBIT", batch=tuple(GenTx(amount=eur(500), end_to_end_id=p.end_to_end_id) for p in payouts)
            )
        ],
        strip_batch_block=True,
    )
    line = StatementLine.objects.get()
    assert not (line.batch_payment_information_id or line.batch_message_id)

    assert dict(statement_lines_match().matched) == {"payout_batch": 1}
    assert set(batch.payouts.values_list("status", flat=True)) == {PayoutStatus.SETTLED}
    assert in_transit_minor() == 0 and bank_minor(debtor) == -1_500
    assert_books_ok()


def test_a_parked_batch_booking_is_matched_when_a_pain002_rejects_the_missing_payout(
    tmp_path, sandbox, debtor, brand, campaign, django_capture_on_commit_callbacks
):
    # given a file of three payouts, and a booking of two of them (the bank names none by id)
    batch = file_batch(brand, 3)
    first, second, third = batch.payouts.order_by("id")
    import_camt(
        tmp_path,
        [
            GenLine(
                credit_debit="DBIT",
                batch=(GenTx(amount=eur(500)), GenTx(amount=eur(500))),
                payment_information_id=batch.payment_information_id,
            )
        ],
    )
    assert statement_lines_match().unmatched == 1
    # when the bank's pain.002 rejects the third
    report = parse_pain002(pain002(batch, rejected("AC04", e2e=third.end_to_end_id)))
    with django_capture_on_commit_callbacks(execute=True):  # the rematch task, enqueued with the failure
        assert payout_batch_apply_pain002(batch=batch, report=report) == {"failed": 1, "settled": 0}
    # then the parked booking settles the other two, out of suspense
    line = StatementLine.objects.get()
    assert line.status == StatementLineStatus.MATCHED and Match.objects.get().matcher == "payout_batch"
    statuses = dict(batch.payouts.values_list("pk", "status"))
    assert statuses == {first.pk: PayoutStatus.SETTLED, second.pk: PayoutStatus.SETTLED, third.pk: "failed"}
    assert in_transit_minor() == 0 and bank_minor(debtor) == -1_000
    assert account_balance_by_code(code="suspense:EUR").posted_minor == 0
    assert_books_ok()


def test_a_pain002_transaction_named_only_by_its_uetr_is_applied(sandbox, debtor, brand, campaign):
    batch = file_batch(brand, 2)
    first, second = batch.payouts.order_by("id")

    report = parse_pain002(pain002(batch, rejected("AC01", uetr=uetr_for(first.end_to_end_id).upper())))
    assert payout_batch_apply_pain002(batch=batch, report=report) == {"failed": 1, "settled": 0}

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.reason_code, second.status) == ("failed", "AC01", PayoutStatus.SUBMITTED)
    assert payable_minor(first.person_id) == 500
    assert_books_ok()


# --- matching by hand: the explain page's picker (issue 29) -----------------------------------------


def test_staff_match_a_line_by_picking_a_payout_not_by_typing_a_type_and_id(
    tmp_path, sandbox, debtor, brand, campaign, settings, admin_client
):
    # given two payouts of 5.00 waiting for the bank and a debit of 5.00 without any reference
    first, second = pending_payouts(settings, brand, 2)
    import_camt(tmp_path, [GenLine(amount=eur(500), credit_debit="DBIT", remittance="")])
    line = StatementLine.objects.get()
    url = f"/admin/reconciliation/statementline/{line.pk}/explain/"
    # the page offers both payouts, by EndToEndId, amount and date, and no free type field
    page = admin_client.get(url)
    choices = dict(page.context["form"].fields["target"].choices)
    assert choices.keys() >= {f"payout:{first.pk}", f"payout:{second.pk}"}
    assert first.end_to_end_id in choices[f"payout:{first.pk}"] and "€5.00" in choices[f"payout:{first.pk}"]
    assert "target_type" not in page.context["form"].fields
    # a target nobody offered is refused and nothing moves
    before = (JournalEntry.objects.count(), Match.objects.count())
    refused = admin_client.post(url, {"action": "match", "target": "payout:999999"})
    assert refused.status_code == 200 and refused.context["form"].errors["target"]
    assert (JournalEntry.objects.count(), Match.objects.count()) == before
    # picking the second payout matches the line to it
    admin_client.post(url, {"action": "match", "target": f"payout:{second.pk}", "reason": "checked with the bank"})
    second.refresh_from_db()
    assert second.bank_debit_line_id == line.pk
    assert Match.objects.get(line=line).target_id == str(second.pk)
    assert_books_ok()


def test_a_credit_offers_the_brands_it_could_be_the_top_up_of(tmp_path, debtor, brand, admin_client):
    import_camt(tmp_path, [GenLine(amount=eur(10_000), credit_debit="CRDT", remittance="our money")])
    line = StatementLine.objects.get()
    url = f"/admin/reconciliation/statementline/{line.pk}/explain/"
    choices = dict(admin_client.get(url).context["form"].fields["target"].choices)
    assert f"Top-up of Joy Shoes (reference {brand.funding_reference})" in choices.values()
    admin_client.post(url, {"action": "match", "target": f"brand_topup:{brand.pk}", "reason": "mail from the brand"})
    assert Match.objects.get(line=line).target_type == "brand_topup"
    assert account_balance_by_code(code=f"brand:{brand.pk}:funds:EUR").posted_minor == 10_000
