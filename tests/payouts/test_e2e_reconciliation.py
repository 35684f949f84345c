"""From payouts to the bank statement and back: pain.001 out, a generated camt.053 in (one batch
booking, one return, one single transfer, one line without reference), matched by the payout
matchers; re-importing and re-matching change nothing; undoing restores the books."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from bench.camt_gen import GenLine, GenStatement, GenTx, write_camt053
from campaigns.models import RewardStatus
from campaigns.services import reward_expire
from core.exceptions import InvalidTransition
from payouts.matchers import EndToEndMatcher
from payouts.models import Payout, PayoutStatus, RouteRule
from payouts.selectors import payout_exceptions
from payouts.services import payout_batch_create, payout_execute, payouts_create_for_payable
from recipients.models import Person
from reconciliation.matching import line_candidates
from reconciliation.models import JournalEntry, Match, MatchStatus, StatementLine, StatementLineStatus, Suggestion
from reconciliation.selectors import account_balance
from reconciliation.services.matching import (
    match_undo,
    statement_line_match_manual,
    statement_lines_match,
    suggestion_confirm,
    suspense_account,
)
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

pytestmark = pytest.mark.django_db


def eur(minor: int) -> Decimal:
    return Decimal(minor).scaleb(-2)


def camt(tmp_path, lines, name="S1") -> tuple:
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
    return path, path.read_bytes()


def books() -> tuple:
    return (
        JournalEntry.objects.count(),
        Match.objects.count(),
        list(Payout.objects.order_by("id").values_list("status", "bank_debit_line_id", "bank_return_line_id")),
        list(StatementLine.objects.order_by("id").values_list("status", flat=True)),
    )


def test_batch_return_and_single_payouts_reconcile_and_undo(tmp_path, sandbox, debtor, brand, campaign):
    # given three file-rail payouts in one pain.001 batch and one instant payout settled by the rail
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    for _ in range(3):
        payable_reward(brand, account_iban=iban())
    payouts_create_for_payable()
    batch = payout_batch_create(actor=staff("olga"))
    filed = list(batch.payouts.order_by("id"))
    RouteRule.objects.all().delete()
    instant_reward = payable_reward(brand, account_iban=iban())
    (instant_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=instant_id)
    instant = Payout.objects.get(pk=instant_id)
    assert in_transit_minor() == 1_500 and bank_minor(debtor) == -500
    returned = filed[1]
    # when the bank's camt.053 arrives: the batch booked as one debit, one of its payouts
    # returned (AC04), the instant transfer, and a stray debit without any reference
    path, _ = camt(
        tmp_path,
        [
            GenLine(
                credit_debit="DBIT",
                batch=tuple(GenTx(amount=eur(p.amount_minor), end_to_end_id=p.end_to_end_id) for p in filed),
                payment_information_id=batch.payment_information_id,
                batch_message_id=batch.batch_id,
            ),
            GenLine(
                amount=eur(returned.amount_minor),
                credit_debit="CRDT",
                end_to_end_id=returned.end_to_end_id,
                return_reason="AC04",
            ),
            GenLine(amount=eur(500), credit_debit="DBIT", end_to_end_id=instant.end_to_end_id),
            GenLine(
                amount=eur(500),
                credit_debit="DBIT",
                counterparty_name="Giulia Rossi",
                counterparty_iban=None,
                remittance="no reference",
            ),
        ],
    )
    statement_import(source=path, filename=path.name, origin="command", match=False)
    result = statement_lines_match()
    # then every payout line is matched; the stray one (every payout is accounted for) is parked
    # in suspense; in transit is empty
    assert dict(result.matched) == {"payout_end_to_end": 1, "payout_return": 1, "payout_batch": 1}
    assert result.suggested == 0 and result.unmatched == 1
    statuses = {p.pk: p.status for p in Payout.objects.all()}
    assert statuses[returned.pk] == PayoutStatus.RETURNED
    assert [statuses[p.pk] for p in (filed[0], filed[2])] == [PayoutStatus.SETTLED, PayoutStatus.SETTLED]
    assert statuses[instant.pk] == PayoutStatus.SETTLED
    assert in_transit_minor() == 0
    assert payable_minor(returned.person_id) == 500 and payable_minor(instant_reward.person_id) == 0
    # the bank account mirrors the statement: -15.00 batch +5.00 return -5.00 instant -5.00 stray
    assert bank_minor(debtor) == -2_000
    assert account_balance(account_id=suspense_account("EUR").pk).posted_minor == -500
    assert_books_ok()
    # re-importing the same file and re-matching change nothing
    before = books()
    statement_import(source=path, filename=path.name, origin="command", match=False)
    assert statement_lines_match().lines_seen == 0 and books() == before
    # undoing the return puts the payout back to settled and the money back in the bank
    olga = staff("ops")
    return_match = Match.objects.get(matcher="payout_return", status=MatchStatus.ACTIVE)
    match_undo(match_id=return_match.pk, actor=olga, reason="wrong line")
    returned.refresh_from_db()
    assert returned.status == PayoutStatus.SETTLED and payable_minor(returned.person_id) == 0
    # undoing the batch booking puts its payouts back in transit
    batch_match = Match.objects.get(matcher="payout_batch", status=MatchStatus.ACTIVE)
    match_undo(match_id=batch_match.pk, actor=olga, reason="wrong line")
    assert set(batch.payouts.values_list("status", flat=True)) == {PayoutStatus.SUBMITTED}
    assert in_transit_minor() == 1_500
    assert_books_ok()
    # and matching the batch line again (by hand now: it sits in suspense) settles them again
    line = StatementLine.objects.get(pk=batch_match.line_id)
    assert line.status == StatementLineStatus.UNMATCHED
    assert f"payout_batch:{batch.pk}" in {c.key for c in line_candidates(line)}  # the explain page offers it
    statement_line_match_manual(line_id=line.pk, target_type="payout_batch", target_id=batch.batch_id, actor=olga)
    assert in_transit_minor() == 0
    assert set(batch.payouts.values_list("status", flat=True)) == {PayoutStatus.SETTLED}
    assert_books_ok()


def test_suggestion_confirmed_by_staff_settles_the_payout(tmp_path, sandbox, debtor, brand, campaign, settings):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "pending:5"}
    payable_reward(brand, account_iban=account)
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    assert payout.status == PayoutStatus.SUBMITTED
    path, _ = camt(
        tmp_path,
        [GenLine(amount=eur(500), credit_debit="DBIT", counterparty_iban=account, counterparty_name="Giulia Rossi")],
    )
    statement_import(source=path, filename=path.name, origin="command", match=False)
    statement_lines_match()
    suggestion = Suggestion.objects.get()
    assert suggestion.target_id == str(payout.pk) and "same IBAN" in suggestion.reason
    suggestion_confirm(suggestion_id=suggestion.pk, actor=staff("olga"))
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and in_transit_minor() == 0 and bank_minor(debtor) == -500
    assert_books_ok()


def test_exceptions_list_payouts_the_bank_has_not_shown(sandbox, debtor, brand, campaign, settings):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "pending:5"}
    payable_reward(brand, account_iban=account)
    payable_reward(brand, account_iban=iban())
    for payout_id in payouts_create_for_payable().created:
        payout_execute(payout_id=payout_id)
    assert payout_exceptions() == []
    later = payout_exceptions(today=timezone.localdate() + timedelta(days=7))
    assert {(e.kind, e.count) for e in later} == {("payouts_not_on_bank", 1), ("payouts_settled_unseen", 1)}


def test_a_debit_matched_again_after_an_undo_settles_with_a_new_entry(
    tmp_path, sandbox, debtor, brand, campaign, settings
):
    """Given a payout settled from its debit line in bulk and that match undone, when a later
    statement shows the debit again, the bulk path settles it once more with the next entry key
    (the first entry stays reversed) and the books balance."""
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "pending:5"}
    payable_reward(brand, account_iban=account)
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    line = GenLine(amount=eur(payout.amount_minor), credit_debit="DBIT", end_to_end_id=payout.end_to_end_id)
    path, _ = camt(tmp_path, [line], name="S1")
    statement_import(source=path, filename=path.name, origin="command", match=False)
    assert dict(statement_lines_match().matched) == {"payout_end_to_end": 1}
    first = Match.objects.get()
    assert first.entry.idempotency_key == f"payout:{payout_id}:settled:0"
    match_undo(match_id=first.pk, actor=staff("olga"), reason="booked on the wrong day")
    assert Payout.objects.get(pk=payout_id).status == PayoutStatus.SUBMITTED and in_transit_minor() > 0

    path, _ = camt(tmp_path, [line], name="S2")
    statement_import(source=path, filename=path.name, origin="command", match=False)
    assert dict(statement_lines_match().matched) == {"payout_end_to_end": 1}
    second = Match.objects.get(status=MatchStatus.ACTIVE)
    assert second.entry.idempotency_key == f"payout:{payout_id}:settled:1"
    assert Payout.objects.get(pk=payout_id).status == PayoutStatus.SETTLED and in_transit_minor() == 0
    assert_books_ok()


def test_a_line_in_another_currency_does_not_settle_a_payout_by_its_end_to_end_id(sandbox, debtor, brand, campaign):
    """Same EndToEndId and the same minor units, but USD against a EUR payout: no proposal (it
    would settle across currencies, and the books would refuse the whole matching chunk)."""
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    line = StatementLine(
        pk=1, end_to_end_id=payout.end_to_end_id, amount_minor=payout.amount_minor, currency="USD", credit_debit="DBIT"
    )
    assert EndToEndMatcher().propose([line]) == []
    line.currency = payout.currency
    assert [p.target_id for p in EndToEndMatcher().propose([line])] == [str(payout_id)]


def test_a_return_whose_money_went_back_to_the_brand_cannot_be_undone(tmp_path, sandbox, debtor, brand, campaign):
    reward = payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    path, _ = camt(
        tmp_path,
        [
            GenLine(amount=eur(payout.amount_minor), credit_debit="DBIT", end_to_end_id=payout.end_to_end_id),
            GenLine(
                amount=eur(payout.amount_minor),
                credit_debit="CRDT",
                end_to_end_id=payout.end_to_end_id,
                return_reason="AC04",
            ),
        ],
    )
    statement_import(source=path, filename=path.name, origin="command", match=False)
    statement_lines_match()
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.RETURNED and payable_minor(reward.person_id) == 500
    # nobody gives a new account: the money goes back to the campaign
    account = Person.objects.get(pk=reward.person_id).bank_accounts.get()
    reward_expire(reward=reward, account_seen=account.pk)
    reward.refresh_from_db()
    assert reward.status == RewardStatus.EXPIRED and payable_minor(reward.person_id) == 0
    before = books()

    with pytest.raises(InvalidTransition) as refused:
        match_undo(
            match_id=Match.objects.get(matcher="payout_return", status=MatchStatus.ACTIVE).pk,
            actor=staff("ops"),
            reason="wrong line",
        )

    assert refused.value.code == "payout_moved_on" and books() == before
    assert payable_minor(reward.person_id) == 0
    assert_books_ok()
