"""The matching engine, exercised through a small domain matcher registered the way payouts and
campaigns register theirs: it ties incoming money to an 'invoice' account by remittance text."""

import functools
import threading
from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission
from django.db import OperationalError, connection

from bench.camt_gen import GenLine, GenStatement, write_camt053
from core.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from reconciliation import matching
from reconciliation.bank_selectors import open_exceptions
from reconciliation.matching import Applied, Proposal
from reconciliation.models import (
    AccountKind,
    JournalEntry,
    Match,
    MatchStatus,
    ReconciliationAction,
    StatementLine,
    StatementLineStatus,
    Suggestion,
)
from reconciliation.selectors import account_balance, ledger_verify_report
from reconciliation.services import Leg, account_get_or_create, ledger_entry_post
from reconciliation.services import matching as matching_service
from reconciliation.services.matching import (
    match_undo,
    statement_line_match_manual,
    statement_lines_match,
    suggestion_confirm,
    suspense_account,
    write_off_decide,
    write_off_request,
)
from reconciliation.services.statements import ledger_minor, platform_bank_account_create, statement_import
from reconciliation.tasks import statement_import_match_task

IBAN = "NL91ABNA0417164300"


class InvoiceMatcher:
    """Incoming money whose remittance names INV-<n> pays invoice n: bank → receivable."""

    name = "test_invoice"
    order = 30
    target_type = "invoice"

    def __init__(self):
        self.unapplied: list[str] = []

    def _receivable(self):
        return account_get_or_create(
            code="test:receivable:EUR",
            name="Receivable",
            kind=AccountKind.LIABILITY,
            currency="EUR",
            allow_overdraft=True,
        )

    def propose(self, lines):
        out = []
        for line in lines:
            if line.is_credit and "INV-" in line.remittance:
                number = line.remittance.split("INV-")[1].split()[0]
                out.append(
                    Proposal(line_id=line.pk, target_type="invoice", target_id=number, amount_minor=line.amount_minor)
                )
            elif line.is_credit and "maybe" in line.remittance:
                out.append(
                    Proposal(
                        line_id=line.pk,
                        target_type="invoice",
                        target_id="77",
                        amount_minor=0,
                        suggest=True,
                        score=60,
                        reason="amount and date look right",
                        data={"matcher": self.name},
                    )
                )
        return out

    def apply(self, proposals, *, lines):
        applied = []
        for p in proposals:
            line = lines[p.line_id]
            entry = ledger_entry_post(
                idempotency_key=f"test-invoice:{p.target_id}:{line.pk}",
                kind="invoice_paid",
                legs=[
                    Leg.debit(line.bank_account.ledger_account, ledger_minor(line)),
                    Leg.credit(self._receivable(), ledger_minor(line)),
                ],
            ).entry
            applied.append(
                Applied(
                    line_id=p.line_id,
                    target_type="invoice",
                    target_id=p.target_id,
                    amount_minor=ledger_minor(line),
                    entry=entry,
                )
            )
        return applied

    def unapply(self, match):
        self.unapplied.append(match.target_id)

    def propose_manual(self, line, target_id):
        return Proposal(line_id=line.pk, target_type="invoice", target_id=target_id, amount_minor=line.amount_minor)


@pytest.fixture
def invoice_matcher():
    matcher = matching.register(InvoiceMatcher())
    yield matcher
    matching._REGISTRY.pop(matcher.name)


@pytest.fixture
def bank():
    return platform_bank_account_create(name="Operating", iban=IBAN, currency="EUR")


def imported(tmp_path, lines, statement_id="S1"):
    path = tmp_path / f"{statement_id}.xml"
    write_camt053(
        path,
        [
            GenStatement(
                statement_id=statement_id, account_iban=IBAN, currency="EUR", opening_balance=Decimal(0), lines=lines
            )
        ],
    )
    statement_import(source=path, filename=path.name, origin="command", match=False)
    return list(StatementLine.objects.filter(statement__statement_id=statement_id).order_by("sequence"))


def books_state():
    return (
        JournalEntry.objects.count(),
        Match.objects.count(),
        Suggestion.objects.count(),
        list(StatementLine.objects.order_by("pk").values_list("status", flat=True)),
    )


@pytest.mark.django_db
def test_matched_unmatched_and_suggested_lines(tmp_path, bank, invoice_matcher):
    paid, stray, maybe, out = imported(
        tmp_path,
        [
            GenLine(amount=Decimal("12.50"), credit_debit="CRDT", remittance="INV-1"),
            GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance="who knows"),
            GenLine(amount=Decimal("4.00"), credit_debit="CRDT", remittance="maybe this"),
            GenLine(amount=Decimal("1.00"), credit_debit="DBIT", remittance="fee"),
        ],
    )

    result = statement_lines_match()

    assert dict(result.matched) == {"test_invoice": 1} and result.suggested == 1 and result.unmatched == 2
    for line in (paid, stray, maybe, out):
        line.refresh_from_db()
    assert paid.status == StatementLineStatus.MATCHED and paid.suspense_entry is None
    assert Match.objects.get(line=paid).target_id == "1"
    assert stray.status == StatementLineStatus.UNMATCHED and stray.suspense_entry is not None
    assert maybe.status == StatementLineStatus.SUGGESTED and Suggestion.objects.get(line=maybe).score == 60
    # The bank account mirrors the statement whatever was explained; suspense holds the rest.
    assert account_balance(account_id=bank.ledger_account_id).posted_minor == 1250 + 300 + 400 - 100
    assert account_balance(account_id=suspense_account("EUR").pk).posted_minor == 300 + 400 - 100
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_dry_run_writes_nothing_and_rerun_changes_nothing(tmp_path, bank, invoice_matcher):
    imported(
        tmp_path,
        [
            GenLine(amount=Decimal("12.50"), credit_debit="CRDT", remittance="INV-1"),
            GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance="stray"),
        ],
    )
    before = books_state()
    dry = statement_lines_match(dry_run=True)
    assert dry.dry_run and dict(dry.matched) == {"test_invoice": 1} and dry.unmatched == 1
    assert [p.target_id for p in dry.proposals] == ["1"]
    assert books_state() == before

    statement_lines_match()
    after_first = books_state()
    again = statement_lines_match()
    assert again.lines_seen == 0 and books_state() == after_first


@pytest.mark.django_db
def test_a_run_out_of_time_stops_between_chunks_and_the_next_goes_on(tmp_path, bank, invoice_matcher):
    strays = [GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance=f"stray {n}") for n in range(3)]
    imported(tmp_path, strays)

    first = statement_lines_match(chunk_size=1, budget_seconds=0)

    assert (first.lines_seen, first.left) == (1, 2)
    assert StatementLine.objects.filter(status=StatementLineStatus.NEW).count() == 2
    rest = [statement_lines_match(chunk_size=1, budget_seconds=0) for _ in range(3)]
    assert [(r.lines_seen, r.left) for r in rest] == [(1, 1), (1, 0), (0, 0)]
    assert not StatementLine.objects.filter(status=StatementLineStatus.NEW).exists()
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_an_import_match_task_out_of_time_enqueues_the_next_for_the_lines_left(
    tmp_path, bank, invoice_matcher, monkeypatch, django_capture_on_commit_callbacks
):
    lines = imported(
        tmp_path, [GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance=f"r{n}") for n in range(3)]
    )
    monkeypatch.setattr(matching_service, "MATCH_BUDGET_SECONDS", 0)
    monkeypatch.setattr(
        matching_service, "statement_lines_match", functools.partial(statement_lines_match, chunk_size=1)
    )

    with django_capture_on_commit_callbacks(execute=True) as follow_ups:
        statement_import_match_task(lines[0].statement.statement_import_id)

    assert len(follow_ups) == 2  # one task per line here: each run had time for one chunk of one
    assert not StatementLine.objects.filter(status=StatementLineStatus.NEW).exists()
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_manual_match_and_undo_restore_the_books(tmp_path, bank, invoice_matcher, admin_user):
    (stray,) = imported(tmp_path, [GenLine(amount=Decimal("3.00"), credit_debit="CRDT", remittance="no ref")])
    statement_lines_match()
    suspense = suspense_account("EUR")
    assert account_balance(account_id=suspense.pk).posted_minor == 300

    match = statement_line_match_manual(
        line_id=stray.pk, target_type="invoice", target_id="9", actor=admin_user, note="customer called"
    )
    assert match.created_by == admin_user and match.entry is not None
    assert account_balance(account_id=suspense.pk).posted_minor == 0
    assert ReconciliationAction.objects.filter(kind="manual_match", actor=admin_user).count() == 1

    undone = match_undo(match_id=match.pk, actor=admin_user, reason="wrong invoice")
    assert undone.status == MatchStatus.UNDONE and undone.undo_entry is not None
    assert invoice_matcher.unapplied == ["9"]
    stray.refresh_from_db()
    assert stray.status == StatementLineStatus.UNMATCHED
    assert account_balance(account_id=suspense.pk).posted_minor == 300
    assert account_balance(account_id=invoice_matcher._receivable().pk).posted_minor == 0
    with pytest.raises(InvalidTransition):
        match_undo(match_id=match.pk, actor=admin_user, reason="again")
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_confirming_a_suggestion_matches_the_line(tmp_path, bank, invoice_matcher, admin_user):
    (maybe,) = imported(tmp_path, [GenLine(amount=Decimal("4.00"), credit_debit="CRDT", remittance="maybe")])
    statement_lines_match()
    suggestion = Suggestion.objects.get(line=maybe)
    match = suggestion_confirm(suggestion_id=suggestion.pk, actor=admin_user)
    assert match.target_id == "77"
    suggestion.refresh_from_db()
    assert suggestion.status == "confirmed"
    assert ReconciliationAction.objects.filter(kind="confirm_suggestion").count() == 1
    with pytest.raises(InvalidTransition):
        suggestion_confirm(suggestion_id=suggestion.pk, actor=admin_user)


@pytest.mark.django_db
def test_bank_reversal_undoes_the_original_match(tmp_path, bank, invoice_matcher):
    imported(
        tmp_path,
        [GenLine(amount=Decimal("12.50"), credit_debit="CRDT", remittance="INV-5", end_to_end_id="E2E-5")],
        statement_id="S1",
    )
    statement_lines_match()
    (reversal,) = imported(
        tmp_path,
        [
            GenLine(
                amount=Decimal("12.50"), credit_debit="DBIT", remittance="INV-5", end_to_end_id="E2E-5", reversal=True
            )
        ],
        statement_id="S2",
    )
    result = statement_lines_match()
    assert dict(result.matched) == {"reversal": 1}
    assert invoice_matcher.unapplied == ["5"]
    assert account_balance(account_id=bank.ledger_account_id).posted_minor == 0
    assert account_balance(account_id=invoice_matcher._receivable().pk).posted_minor == 0
    assert Match.objects.filter(status="active").count() == 2
    reversal.refresh_from_db()
    assert reversal.status == StatementLineStatus.MATCHED
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_write_off_needs_a_second_person(tmp_path, bank, django_user_model):
    (stray,) = imported(tmp_path, [GenLine(amount=Decimal("0.07"), credit_debit="CRDT", remittance="rounding")])
    statement_lines_match()
    alice = django_user_model.objects.create_user("alice", password="x-alice-1", is_staff=True)
    bob = django_user_model.objects.create_user("bob", password="x-bob-1", is_staff=True)
    approve = Permission.objects.get(codename="approve_write_off")
    alice.user_permissions.add(approve)
    bob.user_permissions.add(approve)
    alice = django_user_model.objects.get(pk=alice.pk)
    bob = django_user_model.objects.get(pk=bob.pk)
    carol = django_user_model.objects.create_user("carol", password="x-carol-1", is_staff=True)

    request = write_off_request(line_id=stray.pk, actor=alice, reason="bank rounding, under 1 EUR")
    entries = JournalEntry.objects.count()
    with pytest.raises(PermissionDenied):
        write_off_decide(action_id=request.pk, approver=alice, approve=True)
    with pytest.raises(PermissionDenied):
        write_off_decide(action_id=request.pk, approver=carol, approve=True)
    assert JournalEntry.objects.count() == entries

    decided = write_off_decide(action_id=request.pk, approver=bob, approve=True)
    assert decided.status == "approved" and decided.approved_by == bob
    stray.refresh_from_db()
    assert stray.status == StatementLineStatus.WRITTEN_OFF
    assert account_balance(account_id=suspense_account("EUR").pk).posted_minor == 0
    assert ledger_verify_report().ok


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_runs_match_each_line_once(tmp_path, bank, invoice_matcher):
    imported(tmp_path, [GenLine(amount=Decimal(i + 1), credit_debit="CRDT", remittance=f"INV-{i}") for i in range(200)])
    barrier = threading.Barrier(2)
    errors = []

    def run():
        try:
            barrier.wait()
            statement_lines_match(chunk_size=20)
        except Exception as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert Match.objects.count() == 200
    assert StatementLine.objects.filter(status=StatementLineStatus.MATCHED).count() == 200
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_lines_named_again_after_they_were_matched_are_left_alone(tmp_path, bank, invoice_matcher):
    """Given a run that matched one line, when a second run is handed that line's id together with
    a new line's (as a task retried after a crash would be), only the new line is matched."""
    (first,) = imported(tmp_path, [GenLine(amount=Decimal("5.00"), credit_debit="CRDT", remittance="INV-5")])
    statement_lines_match(line_ids=[first.pk])
    (second,) = imported(
        tmp_path, [GenLine(amount=Decimal("6.00"), credit_debit="CRDT", remittance="INV-6")], statement_id="S2"
    )
    run = statement_lines_match(line_ids=[first.pk, second.pk])
    assert run.lines_seen == 1 and dict(run.matched) == {"test_invoice": 1}
    assert sorted(Match.objects.values_list("line_id", flat=True)) == [first.pk, second.pk]
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_a_chunk_that_fails_whole_is_matched_line_by_line(tmp_path, bank, invoice_matcher, monkeypatch):
    lines = imported(
        tmp_path, [GenLine(amount=Decimal("1.00"), credit_debit="CRDT", remittance=f"INV-{i}") for i in range(1, 5)]
    )
    real, chunks = matching_service._match_chunk_once, []

    def first_chunk_fails(ids, result):
        chunks.append(list(ids))
        if len(chunks) == 1:
            raise RuntimeError("the database hiccuped")
        real(ids, result)

    monkeypatch.setattr(matching_service, "_match_chunk_once", first_chunk_fails)
    result = statement_lines_match(chunk_size=2)

    assert [line.status for line in StatementLine.objects.order_by("sequence")] == [StatementLineStatus.MATCHED] * 4
    assert [len(c) for c in chunks] == [2, 1, 1, 2] and len(lines) == 4
    assert (result.failed_chunks, result.failed_lines, result.matched_total) == (1, 0, 4)
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_a_line_a_matcher_fails_on_is_parked_with_the_error_and_jams_nothing(tmp_path, bank, invoice_matcher):
    """Given a chunk with one line the matcher raises on (an odd code it cannot read), the others of
    the chunk are matched, the bad one is parked in suspense with the error, and nothing stays new."""
    real_apply = invoice_matcher.apply

    def apply(proposals, *, lines):
        if any(p.target_id == "BAD" for p in proposals):
            raise ValueError("invoice BAD has a code I cannot read")
        return real_apply(proposals, lines=lines)

    invoice_matcher.apply = apply
    paid, bad, other = imported(
        tmp_path,
        [
            GenLine(amount=Decimal("1.00"), credit_debit="CRDT", remittance="INV-1"),
            GenLine(amount=Decimal("2.00"), credit_debit="CRDT", remittance="INV-BAD"),
            GenLine(amount=Decimal("4.00"), credit_debit="CRDT", remittance="INV-3"),
        ],
    )
    result = statement_lines_match()
    for line in (paid, bad, other):
        line.refresh_from_db()
    assert [paid.status, bad.status, other.status] == ["matched", "unmatched", "matched"]
    assert bad.matching_error.startswith("Matching failed: ValueError: invoice BAD") and bad.suspense_entry_id
    assert (result.failed_chunks, result.failed_lines) == (1, 1)
    assert account_balance(account_id=bank.ledger_account_id).posted_minor == 700
    assert account_balance(account_id=suspense_account("EUR").pk).posted_minor == 200
    assert ledger_verify_report().ok
    # A second run finds nothing to do: the parked line is no longer new.
    assert statement_lines_match().lines_seen == 0


@pytest.mark.django_db
def test_a_line_that_cannot_even_be_parked_is_set_aside_as_an_exception(tmp_path, bank, invoice_matcher, monkeypatch):
    (line,) = imported(tmp_path, [GenLine(amount=Decimal("2.00"), credit_debit="CRDT", remittance="INV-1")])

    def refuse(*args, **kwargs):
        raise InvalidInput("the suspense account is closed", code="account_inactive")

    monkeypatch.setattr(invoice_matcher, "apply", lambda proposals, *, lines: refuse())
    monkeypatch.setattr(matching_service, "ledger_entry_post", refuse)
    statement_lines_match()
    line.refresh_from_db()
    assert (line.status, line.suspense_entry_id) == (StatementLineStatus.EXCEPTION, None)
    assert "not parked: the suspense account is closed" in line.matching_error
    exceptions = {row.kind: row.count for row in open_exceptions()}
    assert exceptions["matching_failed"] == 1 and exceptions["unmatched_lines"] == 1


@pytest.mark.django_db
def test_a_deadlocked_chunk_is_retried_whole_and_counted_once(tmp_path, bank, invoice_matcher, monkeypatch):
    imported(tmp_path, [GenLine(amount=Decimal("1.00"), credit_debit="CRDT", remittance=f"INV-{i}") for i in (1, 2)])
    real, attempts = matching_service._record_matches, []

    def deadlock_once(*args, **kwargs):
        attempts.append(1)
        real(*args, **kwargs)  # written in the chunk's transaction, then PostgreSQL picks it as the victim
        if len(attempts) == 1:
            cause = type("DeadlockDetected", (Exception,), {"sqlstate": "40P01"})("deadlock detected")
            raise OperationalError("deadlock detected") from cause

    monkeypatch.setattr(matching_service, "_record_matches", deadlock_once)
    result = statement_lines_match()
    assert len(attempts) == 2
    assert result.lines_seen == 2 and result.matched_total == 2 and result.failed_chunks == 0
    assert StatementLine.objects.filter(status=StatementLineStatus.MATCHED).count() == 2


@pytest.mark.django_db
def test_a_zero_amount_booking_is_set_aside_with_its_reason_and_jams_nothing(tmp_path, bank, invoice_matcher):
    """camt allows 0.00 (seen in real files): it moves no money, so it is booked nowhere, and the
    lines around it — one naming an invoice — are matched as usual."""
    paid, zero, stray = imported(
        tmp_path,
        [
            GenLine(amount=Decimal("12.50"), credit_debit="CRDT", remittance="INV-1"),
            GenLine(amount=Decimal("0.00"), credit_debit="CRDT", remittance="INV-2"),
            GenLine(amount=Decimal("3.00"), credit_debit="DBIT", remittance="who knows"),
        ],
    )

    result = statement_lines_match()

    assert (result.matched_total, result.unmatched, result.ignored) == (1, 1, 1)
    for line in (paid, zero, stray):
        line.refresh_from_db()
    assert [paid.status, zero.status, stray.status] == ["matched", "ignored", "unmatched"]
    assert zero.status_note == matching_service.ZERO_AMOUNT_NOTE and zero.suspense_entry is None
    assert not StatementLine.objects.filter(status=StatementLineStatus.NEW).exists()
    assert account_balance(account_id=bank.ledger_account_id).posted_minor == 1250 - 300
    assert ledger_verify_report().ok
