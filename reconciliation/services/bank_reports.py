"""One booking, several bank reports: which line posts it, which lines only confirm it.

A bank reports a booking in an advice (camt.054, intraday) and again in the day's statement
(camt.053 or a CSV export), often under another bank reference (AcctSvcrRef) or none. The first
report stored holds the booking and is posted (matched or parked in suspense); every later report
of it is stored as a ``confirmation`` linked to that line (``confirms``) and posts nothing. What
cannot be told apart with certainty is stored ``ambiguous``: posted by nobody until a person
decides. The rules (README "Bank reports: notifications and statements"), tried in this order
for each booked line of a new page, against the booked lines of earlier files on the same
account (never the same statement's other pages: those are further bookings, see
``services.statements``):

1. The bank reference: the same ``dedupe_key`` (reference, direction, reversal, amount, day).
   Certain, whichever kinds the two reports are (a statement sent again under another Id).

Rules 2 and 3 only pair an advice with a statement: two statements (or two advices) are two
reports of different bookings unless rule 1 says otherwise, so a payout the bank really debited
twice is posted twice and explained, not hidden as a repeat.

2. A payment reference: the same EndToEndId, else UETR, else batch PmtInfId, with the same
   direction, reversal, amount and booking day. Certain when both files show that payment as
   often; when the counts differ, the new lines are ambiguous.
3. No common reference: the same direction, reversal, amount, booking day and counterparty (IBAN,
   else name). Two lines whose payment references differ are different bookings. Paired when
   both files show as many such lines, else ambiguous.

An earlier line already confirmed by a report of the new one's kind (advice or statement) is not
confirmed again by rules 2 and 3: a second same-looking line in the statement is a booking of its
own. Ambiguous, set-aside (ignored) and unbooked lines confirm nothing.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from core.exceptions import InvalidInput, InvalidTransition, NotFound
from core.queue import enqueue
from reconciliation.models import ReconciliationAction, StatementLine, StatementLineStatus

# The task that matches an import's new lines (``reconciliation.tasks``, which imports the services):
# enqueued here for a line released from review, by the import for its lines, and by itself to go on.
IMPORT_MATCH_TASK = "reconciliation.tasks.statement_import_match_task"

ADVICE_KINDS = frozenset({"camt054"})
CONFIRMATION = StatementLineStatus.CONFIRMATION.value
AMBIGUOUS = StatementLineStatus.AMBIGUOUS.value
# Lines that hold no booking a later report could be one of (rules 2 and 3; rule 1 still finds
# them by their key, which a booking line keeps unique).
_HOLD_NOTHING = frozenset({CONFIRMATION, AMBIGUOUS, StatementLineStatus.IGNORED.value})


def is_advice(kind: str) -> bool:
    return kind in ADVICE_KINDS


@dataclass(frozen=True, slots=True)
class Report:
    """A booked line as the rules compare it: of the new page (``line_id`` None) or stored."""

    sequence: int
    dedupe_key: str
    credit_debit: str
    reversal: bool
    amount: Decimal
    day: date | None
    end_to_end_id: str
    uetr: str
    batch_payment_information_id: str
    counterparty_iban: str
    counterparty_name: str
    line_id: int | None = None
    holds: bool = True  # holds a booking (not ambiguous, not set aside)
    confirms_id: int | None = None  # a confirmation: the line holding its booking
    advice: bool = False
    confirmed_by_advice: bool = False
    confirmed_by_statement: bool = False

    @property
    def values(self) -> tuple:
        return (self.credit_debit, self.reversal, self.amount, self.day)

    @property
    def party(self) -> str:
        return self.counterparty_iban or " ".join(self.counterparty_name.casefold().split())

    def references(self) -> dict[str, str]:
        refs = {"e2e": self.end_to_end_id, "uetr": self.uetr, "pmtinf": self.batch_payment_information_id}
        return {kind: value for kind, value in refs.items() if value}

    def differs_by_reference(self, other: "Report") -> bool:
        mine, theirs = self.references(), other.references()
        return any(mine[k] != theirs[k] for k in mine.keys() & theirs.keys())


@dataclass(frozen=True, slots=True)
class Decision:
    status: str  # ``confirmation`` or ``ambiguous``
    confirms_id: int | None
    note: str


_CANDIDATE_FIELDS = (
    "pk",
    "sequence",
    "dedupe_key",
    "credit_debit",
    "reversal",
    "amount",
    "booking_date",
    "end_to_end_id",
    "uetr",
    "batch_payment_information_id",
    "counterparty_iban",
    "counterparty_name",
    "statement__kind",
)


def _candidates(*, bank_account_id: int, statement_id: str, import_id: int, days: set[date | None]) -> list[Report]:
    """The booked lines of earlier files on those booking days: one query for the whole page.
    Confirmations come too, holding nothing: a third report of a booking (a statement sent again
    under another Id) carries the bank reference of the second, and rule 1 must still know it."""
    on_days = Q(booking_date__in=[d for d in days if d is not None])
    if None in days:
        on_days |= Q(booking_date__isnull=True)
    confirmed = StatementLine.objects.filter(confirms=OuterRef("pk"))
    rows = (
        StatementLine.objects.filter(on_days, bank_account_id=bank_account_id, bank_status="BOOK")
        .exclude(statement__statement_id=statement_id)
        .exclude(statement__statement_import_id=import_id)
        .annotate(
            by_advice=Exists(confirmed.filter(statement__kind__in=ADVICE_KINDS)),
            by_statement=Exists(confirmed.exclude(statement__kind__in=ADVICE_KINDS)),
        )
        .order_by("booking_date", "pk")
        .values_list(*_CANDIDATE_FIELDS, "status", "by_advice", "by_statement", "confirms_id")
    )
    return [
        Report(
            sequence=sequence,
            dedupe_key=key,
            credit_debit=cd,
            reversal=reversal,
            amount=amount,
            day=day,
            end_to_end_id=e2e,
            uetr=uetr,
            batch_payment_information_id=pmtinf,
            counterparty_iban=iban,
            counterparty_name=name,
            line_id=pk,
            holds=status not in _HOLD_NOTHING,
            advice=is_advice(kind),
            confirmed_by_advice=by_advice,
            confirmed_by_statement=by_statement,
            confirms_id=confirms_id,
        )
        for (
            pk,
            sequence,
            key,
            cd,
            reversal,
            amount,
            day,
            e2e,
            uetr,
            pmtinf,
            iban,
            name,
            kind,
            status,
            by_advice,
            by_statement,
            confirms_id,
        ) in rows
    ]


def reports_classify(
    reports: Iterable[Report], *, bank_account_id: int, statement_id: str, import_id: int, advice: bool
) -> dict[int, Decision]:
    """The booked lines of one new page that are later reports of an earlier file's booking, by
    sequence, with what they confirm (module docstring); the others hold bookings of their own.
    One query, whatever the page's size."""
    reports = list(reports)
    if not reports:
        return {}
    earlier = _candidates(
        bank_account_id=bank_account_id,
        statement_id=statement_id,
        import_id=import_id,
        days={r.day for r in reports},
    )
    if not earlier:
        return {}
    decisions: dict[int, Decision] = {}
    # A key seen on a confirmation names the line holding that booking; a holder wins a tie.
    by_key = {c.dedupe_key: c.confirms_id for c in earlier if c.confirms_id is not None}
    by_key.update((c.dedupe_key, c.line_id) for c in earlier if c.confirms_id is None)
    for report in reports:
        holder = by_key.get(report.dedupe_key)
        if holder is not None:
            decisions[report.sequence] = Decision(
                CONFIRMATION, holder, f"Reported before as line {holder} (same bank reference)."
            )
    taken = {d.confirms_id for d in decisions.values()}
    confirmed = "confirmed_by_advice" if advice else "confirmed_by_statement"
    open_earlier = [
        c for c in earlier if c.holds and c.advice != advice and c.line_id not in taken and not getattr(c, confirmed)
    ]
    for kind in ("e2e", "uetr", "pmtinf"):
        _pair(
            [r for r in reports if r.sequence not in decisions and kind in r.references()],
            [c for c in open_earlier if c.line_id not in taken and kind in c.references()],
            group=lambda r, kind=kind: (r.references()[kind], r.values),
            decisions=decisions,
            taken=taken,
            rule=f"same {kind.upper() if kind != 'pmtinf' else 'batch PmtInfId'}, amount, side and day",
        )
    _pair(
        [r for r in reports if r.sequence not in decisions],
        [c for c in open_earlier if c.line_id not in taken],
        group=lambda r: (r.values, r.party),
        decisions=decisions,
        taken=taken,
        rule="no common reference; same amount, side, day and counterparty",
        compatible=lambda new, old: not new.differs_by_reference(old),
    )
    return decisions


def _pair(new, earlier, *, group, decisions, taken, rule, compatible=None) -> None:
    """Within each group, as many new lines as earlier ones: paired in order, each confirming
    one; another count: the new lines are ambiguous (which is which, or whether one is new, only
    a person can say)."""
    if not new or not earlier:
        return
    olds: dict[tuple, list[Report]] = defaultdict(list)
    for report in earlier:
        olds[group(report)].append(report)
    news: dict[tuple, list[Report]] = defaultdict(list)
    for report in new:
        news[group(report)].append(report)
    for key, fresh in news.items():
        old = olds.get(key, [])
        if compatible is not None:
            old = [o for o in old if all(compatible(n, o) for n in fresh)]
            fresh = [n for n in fresh if all(compatible(n, o) for o in old)]
        if not old or not fresh:
            continue
        if len(fresh) == len(old):
            for n, o in zip(fresh, old, strict=True):
                decisions[n.sequence] = Decision(
                    CONFIRMATION, o.line_id, f"Reported before as line {o.line_id} ({rule})."
                )
                taken.add(o.line_id)
            continue
        ids = ", ".join(str(o.line_id) for o in old[:5])
        for n in fresh:
            decisions[n.sequence] = Decision(
                AMBIGUOUS,
                None,
                f"{len(fresh)} line(s) here, {len(old)} in earlier reports (lines {ids}) with {rule}: "
                "say whether this one was reported before.",
            )


def statement_line_report_decide(*, line_id: int, actor, confirms_line_id: int | None, reason: str) -> StatementLine:
    """A person's answer for an ``ambiguous`` line: the same booking as line ``confirms_line_id``
    (it becomes a confirmation of it and posts nothing), or a booking of its own
    (``confirms_line_id`` None: it becomes ``new`` and is matched and posted like any line).

    One durable transaction with its audit row and the match task. Raises NotFound,
    InvalidTransition (the line is not ambiguous), InvalidInput (no reason; the other line is not a
    booking the first could report: another account, amount, side or a line that holds none)."""
    if not reason.strip():
        raise InvalidInput("Say why.", code="reason_required")
    with transaction.atomic(durable=True):
        line = (
            StatementLine.objects.select_for_update(of=("self",)).select_related("statement").filter(pk=line_id).first()
        )
        if line is None:
            raise NotFound(f"No statement line {line_id}.")
        if line.status != AMBIGUOUS:
            raise InvalidTransition(
                f"Line {line_id} is {line.get_status_display().lower()}, not waiting for a decision."
            )
        if confirms_line_id is not None:
            other = (
                StatementLine.objects.select_related("statement")
                .filter(pk=confirms_line_id)
                .exclude(status__in=_HOLD_NOTHING)
                .first()
            )
            same = other is not None and (
                other.bank_account_id,
                other.credit_debit,
                other.reversal,
                other.amount,
                other.bank_status,
            ) == (line.bank_account_id, line.credit_debit, line.reversal, line.amount, line.bank_status)
            if not same:
                raise InvalidInput(
                    f"Line {confirms_line_id} is not a booking line {line_id} can report (account, amount and side).",
                    code="not_the_same_booking",
                )
            # A booking is reported once per kind of report: a second advice (or statement) line
            # of it would leave one of the bank's two bookings posted by nobody.
            advice = is_advice(line.statement.kind)
            kinds = other.confirmations.values_list("statement__kind", flat=True)
            if is_advice(other.statement.kind) == advice or any(is_advice(k) == advice for k in kinds):
                raise InvalidInput(
                    f"Line {confirms_line_id} is already reported by a file of this kind: line {line_id} is another "
                    "booking.",
                    code="booking_already_reported",
                )
            line.status, line.confirms_id = CONFIRMATION, other.pk
            line.counterparty_name = line.counterparty_iban = line.remittance = ""
            line.details = []
        else:
            line.status = StatementLineStatus.NEW
            enqueue(
                IMPORT_MATCH_TASK,
                line.statement.statement_import_id,
                task_name=f"match-line-{line_id}",
            )
        line.status_note = reason[:255]
        line.save(
            update_fields=[
                "status",
                "confirms",
                "status_note",
                "counterparty_name",
                "counterparty_iban",
                "remittance",
                "details",
            ]
        )
        ReconciliationAction.objects.create(
            kind=(
                ReconciliationAction.Kind.SET_ASIDE_DUPLICATE
                if confirms_line_id is not None
                else ReconciliationAction.Kind.CONFIRM_BOOKING
            ),
            line=line,
            actor=actor,
            reason=reason[:500],
            detail={"confirms": confirms_line_id},
        )
        return line
