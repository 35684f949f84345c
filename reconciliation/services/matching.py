"""Explaining statement lines: the matching engine and the staff actions around it.

The engine takes new lines in chunks, each chunk in one short durable transaction with the lines
locked (``SKIP LOCKED``: two runs never process the same line), runs the registered matchers in
order (``reconciliation.matching``), records every match with its ledger entry, stores suggestions,
and parks the rest in the suspense account (bank ↔ suspense), so the ledger's bank account always
mirrors the statement. A staff match first reverses the line's suspense entry; undoing a match
reverses its entry and parks the line in suspense again. Every staff action writes an audit row in
the same transaction; write-offs need a second person (four-eyes).

A line that names an object (``Matcher.names``: a payout's EndToEndId) is matched to it or parked
with a note naming it; no other object of its kind is proposed, suggested or accepted by hand. A
parked line is tried again (``statement_lines_rematch``) when its domain learns something that may
make it fit (a pain.002 rejecting part of a batch booking).
"""

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import DatabaseError, transaction
from django.utils import timezone

from core.bulk import rows_insert
from core.exceptions import ApplicationError, Conflict, InvalidInput, InvalidTransition, NotFound, PermissionDenied
from reconciliation.bank_selectors import write_offs_waiting
from reconciliation.db import is_deadlock
from reconciliation.matching import (
    Applied,
    Named,
    Proposal,
    lines_named,
    matcher_by_name,
    matcher_for_target,
    matchers,
)
from reconciliation.models import (
    AccountKind,
    Match,
    MatchStatus,
    PlatformBankAccount,
    ReconciliationAction,
    StatementLine,
    StatementLineStatus,
    Suggestion,
    SuggestionStatus,
)
from reconciliation.services.accounts import account_get_or_create
from reconciliation.services.entries import EntrySpec, Leg, ledger_entries_post, ledger_entry_post, ledger_entry_reverse
from reconciliation.services.statements import ledger_minor

NEW = StatementLineStatus.NEW.value
OPEN_STATUSES = (
    StatementLineStatus.NEW,
    StatementLineStatus.UNMATCHED,
    StatementLineStatus.SUGGESTED,
    StatementLineStatus.EXCEPTION,
)
# What the tasks give one run (far below the 60 s task timeout): a chunk of 1,000 lines takes well
# under a second on a quiet machine, so this bounds a run that waits on locks, not a normal one.
MATCH_BUDGET_SECONDS = 20.0
ZERO_AMOUNT_NOTE = "0.00: the bank booked no money, so there is nothing to book or match."


logger = logging.getLogger(__name__)


@dataclass
class MatchRunResult:
    dry_run: bool
    lines_seen: int = 0
    matched: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    suggested: int = 0
    unmatched: int = 0
    ignored: int = 0  # 0.00 bookings set aside (``ZERO_AMOUNT_NOTE``)
    proposals: list[Proposal] = field(default_factory=list)
    failed_chunks: int = 0  # chunks that failed whole and were then matched line by line
    failed_lines: int = 0  # lines a matcher failed on alone: parked with the error (``matching_error``)
    left: int = 0  # lines not looked at: the run's time was up (``budget_seconds``)

    @property
    def matched_total(self) -> int:
        return sum(self.matched.values())

    def add(self, other: "MatchRunResult") -> None:
        self.lines_seen += other.lines_seen
        for name, n in other.matched.items():
            self.matched[name] += n
        self.suggested += other.suggested
        self.unmatched += other.unmatched
        self.ignored += other.ignored
        self.proposals.extend(other.proposals)
        self.failed_chunks += other.failed_chunks
        self.failed_lines += other.failed_lines
        self.left += other.left


def suspense_account(currency: str):
    return account_get_or_create(
        code=f"suspense:{currency}",
        name=f"Suspense {currency} (unexplained bank lines)",
        kind=AccountKind.LIABILITY,
        currency=currency,
        allow_overdraft=True,
        owner_type="platform",
    )


def _suspense_spec(line: StatementLine, key: str, *, suspense=None) -> EntrySpec:
    """The entry parking ``line`` in suspense; ``suspense`` spares the look-up of its account
    when a caller parks many lines of one currency."""
    bank = line.bank_account.ledger_account
    suspense = suspense or suspense_account(line.currency)
    amount = ledger_minor(line)
    legs = (
        [Leg.debit(bank, amount), Leg.credit(suspense, amount)]
        if line.is_credit
        else [Leg.debit(suspense, amount), Leg.credit(bank, amount)]
    )
    return EntrySpec(
        idempotency_key=key,
        kind="suspense",
        legs=legs,
        memo=f"Unexplained bank line {line}"[:500],
        effective_date=line.booking_date,
        reference_type="statement_line",
        reference_id=str(line.pk),
    )


def _record_matches(applied: Sequence[Applied], matcher_name: str, lines: dict[int, StatementLine], actor) -> None:
    rows_insert(
        Match,
        [
            Match(
                line_id=a.line_id,
                matcher=matcher_name,
                target_type=a.target_type,
                target_id=a.target_id,
                amount_minor=a.amount_minor,
                entry=a.entry,
                created_by=actor,
            )
            for a in applied
        ],
        keys=False,
    )
    ids = [a.line_id for a in applied]
    StatementLine.objects.filter(pk__in=ids).update(status=StatementLineStatus.MATCHED, suspense_entry=None)
    for line_id in ids:
        lines[line_id].status = StatementLineStatus.MATCHED


_DEADLOCK_RETRIES = 3


def _match_chunk(ids: Sequence[int], *, dry_run: bool) -> MatchRunResult:
    """One chunk in its own transaction, retried whole when PostgreSQL breaks a deadlock with
    another run (runs sharing an import lock payouts and accounts of overlapping chunks). Its
    figures are counted only once it committed, so a retry counts nothing twice."""
    attempts = 0
    while True:
        result = MatchRunResult(dry_run=dry_run)
        try:
            _match_chunk_once(ids, result)
            return result
        except DatabaseError as exc:
            attempts += 1
            if not is_deadlock(exc) or attempts == _DEADLOCK_RETRIES:
                raise
            logger.warning("matching the chunk from line %s deadlocked; retrying it", ids[0] if ids else None)


def _match_chunk_once(ids: Sequence[int], result: MatchRunResult) -> None:
    with transaction.atomic(durable=True):
        # Lines are read and locked by primary key, and ``new`` is checked in Python: with
        # ``status`` in the WHERE clause the planner, whose statistics say few lines are new,
        # scanned every new line of the import for each chunk — quadratic in the statement's size.
        # The read first drops lines another run has matched since (workers sharing an import
        # take turns over its chunks), so a chunk already done costs one read, not a row lock
        # each; the check after locking catches a line matched in between.
        open_ids = [
            pk for pk, status in StatementLine.objects.filter(pk__in=ids).values_list("pk", "status") if status == NEW
        ]
        lines = {
            line.pk: line
            for line in StatementLine.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(pk__in=open_ids)
            .defer("details")
            .order_by("pk")
            if line.status == StatementLineStatus.NEW
        }
        # A chunk's lines share one or two bank accounts: load those once rather than per line.
        accounts = PlatformBankAccount.objects.select_related("ledger_account").in_bulk(
            {line.bank_account_id for line in lines.values()}
        )
        for line in lines.values():
            line.bank_account = accounts[line.bank_account_id]
        result.lines_seen += len(lines)
        remaining = dict(lines)
        # A booking that rounds to 0 minor units (camt allows 0.00) moved no money: there is no
        # entry to post, and a matcher posting one would fail the whole chunk. It is set aside,
        # visible with its reason, instead of staying new for ever.
        nothing = [line for line in lines.values() if ledger_minor(line) == 0]
        if nothing and not result.dry_run:
            StatementLine.objects.filter(pk__in=[line.pk for line in nothing]).update(
                status=StatementLineStatus.IGNORED, status_note=ZERO_AMOUNT_NOTE
            )
        for line in nothing:
            remaining.pop(line.pk)
        result.ignored += len(nothing)
        suggestions: dict[int, list[Proposal]] = defaultdict(list)
        named = lines_named(list(remaining.values()))
        for matcher in matchers():
            if not remaining:
                break
            proposals = matcher.propose(list(remaining.values()))
            exact: dict[int, Proposal] = {}
            for proposal in proposals:
                if proposal.line_id not in remaining or not _named_allows(named, proposal):
                    continue
                if proposal.suggest:
                    suggestions[proposal.line_id].append(proposal)
                else:
                    exact.setdefault(proposal.line_id, proposal)
            if not exact:
                continue
            if result.dry_run:
                result.proposals.extend(exact.values())
                result.matched[matcher.name] += len(exact)
                for line_id in exact:
                    remaining.pop(line_id)
                continue
            applied = matcher.apply(list(exact.values()), lines=remaining)
            _record_matches(applied, matcher.name, remaining, actor=None)
            result.matched[matcher.name] += len(applied)
            for a in applied:
                remaining.pop(a.line_id, None)
            # A matcher may explain other lines of the chunk too (a reversal and its original
            # booked in the same statement explain each other): they are no longer new.
            for line_id in [pk for pk, line in remaining.items() if line.status != NEW]:
                remaining.pop(line_id)
        leftovers = list(remaining.values())
        if result.dry_run:
            result.proposals.extend(p for line in leftovers for p in suggestions.get(line.pk, []))
            result.suggested += sum(1 for line in leftovers if suggestions.get(line.pk))
            result.unmatched += sum(1 for line in leftovers if not suggestions.get(line.pk))
            transaction.set_rollback(True)
            return
        if not leftovers:
            return
        suspense = {currency: suspense_account(currency) for currency in {line.currency for line in leftovers}}
        posted = ledger_entries_post(
            entries=[
                _suspense_spec(line, f"line:{line.pk}:suspense:0", suspense=suspense[line.currency])
                for line in leftovers
            ],
            all_or_nothing=True,
        )
        entry_by_line = {int(e.reference_id): e for e in [*posted.posted, *posted.replayed]}
        Suggestion.objects.bulk_create(
            [
                Suggestion(
                    line_id=p.line_id,
                    matcher=p.data.get("matcher", ""),
                    target_type=p.target_type,
                    target_id=p.target_id,
                    score=p.score,
                    reason=p.reason[:255],
                )
                for line in leftovers
                for p in suggestions.get(line.pk, [])
            ],
            ignore_conflicts=True,
        )
        for line in leftovers:
            line.status = StatementLineStatus.SUGGESTED if suggestions.get(line.pk) else StatementLineStatus.UNMATCHED
            line.suspense_entry = entry_by_line[line.pk]
            if line.pk in named:
                line.status_note = _named_note(named[line.pk])
        StatementLine.objects.bulk_update(leftovers, ["status", "suspense_entry", "status_note"])
        result.suggested += sum(1 for line in leftovers if line.status == StatementLineStatus.SUGGESTED)
        result.unmatched += sum(1 for line in leftovers if line.status == StatementLineStatus.UNMATCHED)


def _named_allows(named: dict[int, Named], proposal: Proposal) -> bool:
    """A line that names an object is matched to it or to nothing of its kind, and suggested for
    nothing else at all (a suggestion is an invitation to confirm the wrong person's payout)."""
    name = named.get(proposal.line_id)
    if name is None:
        return True
    if proposal.suggest:
        return (proposal.target_type, proposal.target_id) == (name.target_type, name.target_id)
    return name.allows(proposal.target_type, proposal.target_id)


def _named_note(name: Named) -> str:
    return f"Names {name.label}, which cannot take it as it stands: match it to that or nothing."[:255]


def statement_lines_match(
    *,
    line_ids: Sequence[int] | None = None,
    dry_run: bool = False,
    chunk_size: int = 1000,
    budget_seconds: float | None = None,
) -> MatchRunResult:
    """Match every new line (or the given ones that are still new).

    Idempotent and re-runnable: only lines in status ``new`` are taken, under a row lock, and each
    chunk commits on its own, so a crash loses at most the chunk in flight (it stays ``new``). A
    chunk that fails is matched again line by line; a line that fails alone is parked in suspense
    with the error (``matching_error``), so no line jams the others or the next run. Only an error
    that stops even the parking is raised, at the end.
    ``dry_run`` runs the same proposals and rolls everything back; the result lists them.
    ``budget_seconds``: no chunk starts after it (the tasks pass ``MATCH_BUDGET_SECONDS``); the
    lines not looked at are counted in ``left`` and stay new for the next run.
    Must not be called inside another transaction (each chunk is durable).
    """
    result = MatchRunResult(dry_run=dry_run)
    if line_ids is None:
        ids = list(
            StatementLine.objects.filter(status=StatementLineStatus.NEW).order_by("pk").values_list("pk", flat=True)
        )
    else:
        # Each chunk checks which of its lines are still new, so the given ids need no query of
        # their own (for a large import that was one statement naming every line).
        ids = sorted(set(line_ids))
    failure: Exception | None = None
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    for start in range(0, len(ids), chunk_size):
        if start and deadline is not None and time.monotonic() >= deadline:
            result.left = len(ids) - start
            break
        chunk = ids[start : start + chunk_size]
        try:
            result.add(_match_chunk(chunk, dry_run=dry_run))
        except Exception:
            # One bad line must not hold back the thousand beside it: the chunk rolled back whole,
            # so its lines are tried again one by one, and only the line that fails alone is parked.
            logger.exception("matching lines %s–%s failed; matching them one by one", chunk[0], chunk[-1])
            result.failed_chunks += 1
            failure = _match_one_by_one(chunk, dry_run=dry_run, result=result) or failure
    if failure is not None:
        raise failure  # after the others: the task is marked failed, and its log says why
    return result


def _match_one_by_one(ids: Sequence[int], *, dry_run: bool, result: MatchRunResult) -> Exception | None:
    """Returns the first error that even parking a line could not get past (the database itself,
    most likely): those lines stay new for the next run."""
    failure = None
    for line_id in ids:
        try:
            result.add(_match_chunk([line_id], dry_run=dry_run))
        except Exception as exc:
            logger.exception("matching line %s failed on its own", line_id)
            result.failed_lines += 1
            if dry_run:
                continue
            try:
                _line_park_failed(line_id, exc)
            except Exception as park_exc:
                logger.exception("line %s could not be parked either; it stays new", line_id)
                failure = failure or park_exc
    return failure


def _line_park_failed(line_id: int, error: Exception) -> None:
    """A line a matcher fails on is parked in suspense with the error, so the books still mirror
    the bank and staff see it; when even the suspense entry fails it is set aside as ``exception``
    (no entry) instead of being retried for ever."""
    reason = f"Matching failed: {type(error).__name__}: {error}"[:255]
    with transaction.atomic(durable=True):
        line = (
            StatementLine.objects.select_for_update(of=("self",))
            .select_related("bank_account__ledger_account")
            .filter(pk=line_id, status=StatementLineStatus.NEW)
            .first()
        )
        if line is None:
            return  # matched or parked by another run meanwhile
        try:
            with transaction.atomic():
                line.suspense_entry = ledger_entry_post(
                    **_spec_kwargs(_suspense_spec(line, f"line:{line.pk}:suspense:0"))
                ).entry
            line.status = StatementLineStatus.UNMATCHED
        except ApplicationError as exc:
            line.suspense_entry = None
            line.status = StatementLineStatus.EXCEPTION
            reason = f"{reason[:150]}; not parked: {exc}"[:255]
        line.matching_error = reason
        line.save(update_fields=["status", "suspense_entry", "matching_error"])


def statement_lines_rematch(*, line_ids: Sequence[int]) -> int:
    """Try the parked lines ``line_ids`` (unmatched or suggested, in suspense) again, when an event
    outside the statement may have made one fit (a pain.002 rejected a payout of a batch booking).

    Each line in its own durable transaction, locked: the first matcher whose exact proposal it
    applies takes the line, its suspense entry is reversed and its open suggestions rejected, as
    for a staff match (``created_by`` empty: the engine matched it). A line that still fits nothing
    is left exactly as it was. Returns how many lines were matched. Must not be called inside
    another transaction."""
    matched = 0
    for line_id in sorted(set(line_ids)):
        with transaction.atomic(durable=True):
            line = (
                StatementLine.objects.select_for_update(of=("self",))
                .select_related("bank_account__ledger_account", "suspense_entry")
                .filter(pk=line_id, status__in=[StatementLineStatus.UNMATCHED, StatementLineStatus.SUGGESTED])
                .first()
            )
            if line is None:
                continue
            named = lines_named([line])
            for matcher in matchers():
                proposal = next((p for p in matcher.propose([line]) if not p.suggest and _named_allows(named, p)), None)
                if proposal is None:
                    continue
                _unpark(line)
                applied = matcher.apply([proposal], lines={line.pk: line})
                if not applied:
                    transaction.set_rollback(True)
                    break
                _record_matches(applied, matcher.name, {line.pk: line}, actor=None)
                Suggestion.objects.filter(line=line, status=SuggestionStatus.OPEN).update(
                    status=SuggestionStatus.REJECTED, decided_at=timezone.now()
                )
                matched += 1
                break
    return matched


# --- staff actions -------------------------------------------------------------------------------


def _lock_open_line(line_id: int) -> StatementLine:
    line = (
        StatementLine.objects.select_for_update(of=("self",))
        .select_related("bank_account__ledger_account")
        .filter(pk=line_id)
        .first()
    )
    if line is None:
        raise NotFound(f"No statement line {line_id}.")
    if line.status not in OPEN_STATUSES:
        raise InvalidTransition(f"Line {line_id} is {line.get_status_display().lower()}; it cannot be matched.")
    return line


def _unpark(line: StatementLine) -> None:
    if line.suspense_entry_id:
        ledger_entry_reverse(
            entry=line.suspense_entry,
            idempotency_key=f"line:{line.pk}:unpark:{line.suspense_entry_id}",
            memo=f"Bank line {line.pk} explained",
        )
        line.suspense_entry = None


def statement_line_match_manual(
    *, line_id: int, target_type: str, target_id: str, actor, note: str = "", suggestion: Suggestion | None = None
) -> Match:
    """Tie an open line to a business object by hand (or by confirming a suggestion).

    The domain matcher for ``target_type`` validates it (amount, direction, state) and applies it;
    the line's suspense entry is reversed in the same transaction. Raises InvalidInput (no matcher
    for that type, the matcher refuses, or the line names another object:
    ``line_names_another_target``), InvalidTransition (line already explained), Conflict
    (the target has moved on)."""
    matcher = matcher_for_target(target_type)
    if matcher is None:
        raise InvalidInput(f"Nothing can be matched to a {target_type!r}.", code="unknown_target_type")
    with transaction.atomic(durable=True):
        line = _lock_open_line(line_id)
        proposal = matcher.propose_manual(line, str(target_id))
        name = lines_named([line]).get(line.pk)
        if name is not None and (proposal.target_type, proposal.target_id) != (name.target_type, name.target_id):
            raise InvalidInput(
                f"This line names {name.label}: it cannot be matched to anything else.",
                code="line_names_another_target",
            )
        _unpark(line)
        applied = matcher.apply([proposal], lines={line.pk: line})
        if not applied:
            raise Conflict(f"{target_type} {target_id} can no longer take this line.", code="target_moved_on")
        _record_matches(applied, matcher.name, {line.pk: line}, actor=actor)
        Suggestion.objects.filter(line=line, status=SuggestionStatus.OPEN).update(
            status=SuggestionStatus.REJECTED, decided_by=actor, decided_at=timezone.now()
        )
        if suggestion is not None:
            Suggestion.objects.filter(pk=suggestion.pk).update(status=SuggestionStatus.CONFIRMED)
        ReconciliationAction.objects.create(
            kind=(
                ReconciliationAction.Kind.CONFIRM_SUGGESTION if suggestion else ReconciliationAction.Kind.MANUAL_MATCH
            ),
            line=line,
            actor=actor,
            reason=note[:500],
            detail={"target_type": target_type, "target_id": str(target_id)},
        )
        return Match.objects.get(line=line, status=MatchStatus.ACTIVE)


def suggestion_confirm(*, suggestion_id: int, actor) -> Match:
    suggestion = Suggestion.objects.filter(pk=suggestion_id, status=SuggestionStatus.OPEN).first()
    if suggestion is None:
        raise InvalidTransition("That suggestion is no longer open.")
    return statement_line_match_manual(
        line_id=suggestion.line_id,
        target_type=suggestion.target_type,
        target_id=suggestion.target_id,
        actor=actor,
        note=f"Confirmed suggestion: {suggestion.reason}",
        suggestion=suggestion,
    )


def match_undo(*, match_id: int, actor, reason: str) -> Match:
    """Undo an active match: the domain change is undone by its matcher, the match's ledger entry is
    reversed, and the line goes back to suspense (unmatched). Raises InvalidTransition if the match
    was already undone."""
    if not reason.strip():
        raise InvalidInput("Say why the match is undone.", code="reason_required")
    with transaction.atomic(durable=True):
        match = Match.objects.select_for_update().filter(pk=match_id).first()
        if match is None:
            raise NotFound(f"No match {match_id}.")
        if match.status != MatchStatus.ACTIVE:
            raise InvalidTransition("This match has already been undone.")
        line = (
            StatementLine.objects.select_for_update(of=("self",))
            .select_related("bank_account__ledger_account")
            .get(pk=match.line_id)
        )
        matcher = matcher_by_name(match.matcher)
        if matcher is not None:
            matcher.unapply(match)
        undo_entry = None
        if match.entry_id:
            undo_entry = ledger_entry_reverse(
                entry=match.entry, idempotency_key=f"match:{match.pk}:undo", memo=f"Undo match {match.pk}: {reason}"
            ).entry
        now = timezone.now()
        Match.objects.filter(pk=match.pk).update(
            status=MatchStatus.UNDONE, undone_at=now, undone_by=actor, undo_entry=undo_entry
        )
        parked = ledger_entry_post(**_spec_kwargs(_suspense_spec(line, f"line:{line.pk}:suspense:undo:{match.pk}")))
        StatementLine.objects.filter(pk=line.pk).update(
            status=StatementLineStatus.UNMATCHED, suspense_entry=parked.entry, status_note=reason[:255]
        )
        ReconciliationAction.objects.create(
            kind=ReconciliationAction.Kind.UNDO_MATCH,
            line=line,
            actor=actor,
            reason=reason[:500],
            detail={"match_id": match.pk, "target_type": match.target_type, "target_id": match.target_id},
        )
        match.refresh_from_db()
        return match


def _spec_kwargs(spec: EntrySpec) -> dict:
    return {
        "idempotency_key": spec.idempotency_key,
        "kind": spec.kind,
        "legs": spec.legs,
        "memo": spec.memo,
        "effective_date": spec.effective_date,
        "reference_type": spec.reference_type,
        "reference_id": spec.reference_id,
    }


def statement_line_move_to_suspense(*, line_id: int, actor, reason: str) -> StatementLine:
    """Staff decide a line stays unexplained for now: open suggestions are rejected, the line is
    (or stays) parked in suspense with the reason."""
    if not reason.strip():
        raise InvalidInput("Say why the line goes to suspense.", code="reason_required")
    with transaction.atomic(durable=True):
        line = _lock_open_line(line_id)
        if line.suspense_entry_id is None:
            line.suspense_entry = ledger_entry_post(
                **_spec_kwargs(_suspense_spec(line, f"line:{line.pk}:suspense:staff"))
            ).entry
        Suggestion.objects.filter(line=line, status=SuggestionStatus.OPEN).update(
            status=SuggestionStatus.REJECTED, decided_by=actor, decided_at=timezone.now()
        )
        line.status = StatementLineStatus.UNMATCHED
        line.status_note = reason[:255]
        line.save(update_fields=["status", "suspense_entry", "status_note"])
        ReconciliationAction.objects.create(
            kind=ReconciliationAction.Kind.MOVE_TO_SUSPENSE, line=line, actor=actor, reason=reason[:500]
        )
        return line


def statement_line_duplicate_decide(*, line_id: int, actor, duplicate: bool, reason: str = "") -> StatementLine:
    """A person's answer for a line flagged ``possible_duplicate`` (the same booking twice in one file).

    Not a duplicate: the flag is cleared and the line stays as it is. A duplicate: the line is set
    aside (``ignored``) and its suspense entry reversed, so the ledger's bank account holds what the
    bank booked once; a matched line must have its match undone first. One durable transaction
    with its audit row. Raises NotFound, InvalidTransition (not flagged, already matched, or
    confirmed by another report), InvalidInput (a duplicate without a reason).
    """
    if duplicate and not reason.strip():
        raise InvalidInput("Say why the line is a duplicate.", code="reason_required")
    with transaction.atomic(durable=True):
        line = (
            StatementLine.objects.select_for_update(of=("self",))
            .select_related("bank_account__ledger_account", "suspense_entry")
            .filter(pk=line_id)
            .first()
        )
        if line is None:
            raise NotFound(f"No statement line {line_id}.")
        if not line.possible_duplicate:
            raise InvalidTransition(f"Line {line_id} is not flagged as a possible duplicate.")
        if duplicate:
            if line.status not in OPEN_STATUSES:
                raise InvalidTransition(
                    f"Line {line_id} is {line.get_status_display().lower()}: undo its match before setting it aside."
                )
            if line.confirmations.exists():
                # Another file reported this very booking: the bank booked it, so it is no duplicate.
                raise InvalidTransition(
                    f"Line {line_id} is confirmed by another report of the bank: it is a booking of its own.",
                    code="booking_confirmed",
                )
            _unpark(line)
            Suggestion.objects.filter(line=line, status=SuggestionStatus.OPEN).update(
                status=SuggestionStatus.REJECTED, decided_by=actor, decided_at=timezone.now()
            )
            line.status = StatementLineStatus.IGNORED
            line.status_note = f"Duplicate: {reason}"[:255]
        line.possible_duplicate = False
        line.save(update_fields=["status", "status_note", "possible_duplicate", "suspense_entry"])
        ReconciliationAction.objects.create(
            kind=(
                ReconciliationAction.Kind.SET_ASIDE_DUPLICATE
                if duplicate
                else ReconciliationAction.Kind.CONFIRM_BOOKING
            ),
            line=line,
            actor=actor,
            reason=reason[:500],
            detail={"review_note": line.review_note},
        )
        return line


def write_off_request(*, line_id: int, actor, reason: str) -> ReconciliationAction:
    """Ask for a parked line to be written off. Nothing moves until someone else approves."""
    if not reason.strip():
        raise InvalidInput("Say why the line is written off.", code="reason_required")
    with transaction.atomic(durable=True):
        line = _lock_open_line(line_id)
        if line.status != StatementLineStatus.UNMATCHED:
            raise InvalidTransition("Only an unmatched line in suspense can be written off.")
        if write_offs_waiting().filter(line=line).exists():
            raise Conflict("A write-off for this line is already waiting for approval.", code="write_off_pending")
        return ReconciliationAction.objects.create(
            kind=ReconciliationAction.Kind.WRITE_OFF,
            status=ReconciliationAction.Status.PENDING_APPROVAL,
            line=line,
            actor=actor,
            reason=reason[:500],
        )


def write_off_decide(*, action_id: int, approver, approve: bool) -> ReconciliationAction:
    """Four-eyes: a second staff member (not the requester, with ``approve_write_off``) approves or
    rejects the request ``action_id``. Approval moves the line's amount from suspense to the
    write-offs account.

    The decision is a new audit row (the table is append-only): ``decides`` the request, its
    requester as ``actor``, the approver as ``approved_by``, the request's reason, the decision's
    time; it is returned. One durable transaction with the ledger entry; the request's row lock
    and the unique ``decides`` keep a request from being decided twice. Raises PermissionDenied
    (no permission, or the requester), NotFound, InvalidTransition (already decided, or the line
    left suspense)."""
    if not approver.has_perm("reconciliation.approve_write_off"):
        raise PermissionDenied("You may not approve write-offs.")
    with transaction.atomic(durable=True):
        action = ReconciliationAction.objects.select_for_update().filter(pk=action_id).first()
        if action is None or action.kind != ReconciliationAction.Kind.WRITE_OFF or action.decides_id:
            raise NotFound(f"No write-off request {action_id}.")
        if not write_offs_waiting().filter(pk=action.pk).exists():
            raise InvalidTransition("This write-off has already been decided.")
        if action.actor_id == approver.pk:
            raise PermissionDenied("A write-off needs a second person: you asked for this one.")
        now = timezone.now()
        decision = ReconciliationAction(
            kind=ReconciliationAction.Kind.WRITE_OFF,
            line_id=action.line_id,
            actor_id=action.actor_id,
            approved_by=approver,
            reason=action.reason,
            decided_at=now,
            decides=action,
        )
        if not approve:
            decision.status = ReconciliationAction.Status.REJECTED
            decision.save()
            return decision
        line = _lock_open_line(action.line_id)
        if line.status != StatementLineStatus.UNMATCHED or line.suspense_entry_id is None:
            raise InvalidTransition("The line is no longer in suspense.")
        write_offs = account_get_or_create(
            code=f"platform:write_offs:{line.currency}",
            name=f"Written-off bank differences {line.currency}",
            kind=AccountKind.EXPENSE,
            currency=line.currency,
            allow_overdraft=True,
            owner_type="platform",
        )
        suspense = suspense_account(line.currency)
        amount = ledger_minor(line)
        legs = (
            [Leg.debit(suspense, amount), Leg.credit(write_offs, amount)]
            if line.is_credit
            else [Leg.debit(write_offs, amount), Leg.credit(suspense, amount)]
        )
        entry = ledger_entry_post(
            idempotency_key=f"line:{line.pk}:write_off:{action.pk}",
            kind="write_off",
            legs=legs,
            memo=f"Write-off of bank line {line.pk}: {action.reason}"[:500],
            reference_type="statement_line",
            reference_id=str(line.pk),
        ).entry
        StatementLine.objects.filter(pk=line.pk).update(status=StatementLineStatus.WRITTEN_OFF)
        decision.status = ReconciliationAction.Status.APPROVED
        decision.detail = {"entry_id": entry.pk, "amount_minor": amount, "currency": line.currency}
        decision.save()
        return decision
