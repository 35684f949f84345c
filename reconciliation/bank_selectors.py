"""Reads for the reconciliation dashboard. Every figure is one aggregate query over indexed
columns (status, booking date, account), so the page stays fast on millions of lines."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, F, Q, Sum
from django.utils import timezone
from django_q.models import OrmQ

from core.money import minor_to_decimal
from reconciliation.models import (
    BankStatement,
    Match,
    MatchStatus,
    PlatformBankAccount,
    Posting,
    ReconciliationAction,
    StatementLine,
    StatementLineStatus,
)


def write_offs_waiting():
    """Write-off requests no second person has decided yet (a decision is its own row)."""
    return ReconciliationAction.objects.filter(
        kind=ReconciliationAction.Kind.WRITE_OFF,
        status=ReconciliationAction.Status.PENDING_APPROVAL,
        decision__isnull=True,
    )


OPEN = [
    StatementLineStatus.UNMATCHED,
    StatementLineStatus.SUGGESTED,
    StatementLineStatus.NEW,
    StatementLineStatus.EXCEPTION,
]
AGING_BUCKETS = [
    (0, 1, "0–1 days"),
    (2, 3, "2–3 days"),
    (4, 7, "4–7 days"),
    (8, 30, "8–30 days"),
    (31, None, "over 30 days"),
]


@dataclass(frozen=True)
class CountAmount:
    label: str
    count: int
    amount: Decimal


@dataclass(frozen=True)
class AccountPosition:
    bank_account: PlatformBankAccount
    statement: BankStatement | None
    closing_balance: Decimal | None
    ledger_balance: Decimal | None
    difference: Decimal | None
    open_lines_amount: Decimal
    statement_mismatch: Decimal | None


@dataclass(frozen=True)
class OpenException:
    kind: str
    title: str
    count: int
    amount: Decimal
    link: str = ""


ExceptionSource = Callable[[], list[OpenException]]
_EXCEPTION_SOURCES: list[ExceptionSource] = []


def register_exception_source(source: ExceptionSource) -> ExceptionSource:
    """Domains add their own exception lists (e.g. payouts submitted but never seen on the bank)."""
    if source not in _EXCEPTION_SOURCES:
        _EXCEPTION_SOURCES.append(source)
    return source


def _count_and_gross(qs) -> tuple[int, Decimal]:
    """How many lines and how much money moved on them, in either direction."""
    row = qs.aggregate(
        n=Count("pk"),
        credits=Sum("amount", filter=Q(credit_debit="CRDT")),
        debits=Sum("amount", filter=Q(credit_debit="DBIT")),
    )
    return row["n"], (row["credits"] or Decimal(0)) + (row["debits"] or Decimal(0))


def activity(*, since: date, label: str) -> list[CountAmount]:
    base = StatementLine.objects.filter(booking_date__gte=since).exclude(status=StatementLineStatus.IGNORED)
    matched = _count_and_gross(base.filter(status=StatementLineStatus.MATCHED))
    unmatched = _count_and_gross(base.filter(status__in=OPEN))
    return [
        CountAmount(f"{label}: matched", matched[0], matched[1]),
        CountAmount(f"{label}: unmatched", unmatched[0], unmatched[1]),
    ]


def unmatched_aging(*, today: date | None = None) -> list[CountAmount]:
    today = today or timezone.localdate()
    buckets = []
    for low, high, label in AGING_BUCKETS:
        qs = StatementLine.objects.filter(status__in=OPEN, booking_date__lte=today - timedelta(days=low))
        if high is not None:
            qs = qs.filter(booking_date__gte=today - timedelta(days=high))
        count, amount = _count_and_gross(qs)
        buckets.append(CountAmount(label, count, amount))
    return buckets


def _ledger_balance_on(account_id: int, day: date | None) -> int:
    """The bank account's ledger balance at the end of ``day`` (by effective date: an entry posted
    today for yesterday's booking counts for yesterday). Bank accounts are assets: debit-normal."""
    qs = Posting.objects.filter(account_id=account_id)
    if day is not None:
        qs = qs.filter(entry__effective_date__lte=day)
    return qs.aggregate(t=Sum("amount_minor"))["t"] or 0


def account_positions() -> list[AccountPosition]:
    """Per bank account: the newest statement's closing balance against the ledger's bank account
    on that day; the open (unexplained) lines are the first explanation of a difference."""
    positions = []
    for bank in PlatformBankAccount.objects.select_related("ledger_account").order_by("iban", "other_id", "currency"):
        statement = (
            BankStatement.objects.filter(bank_account=bank, closing_balance__isnull=False)
            .order_by("-closing_balance_date", "-pk")
            .first()
        )
        ledger = minor_to_decimal(
            _ledger_balance_on(bank.ledger_account_id, statement.closing_balance_date if statement else None),
            bank.currency,
        )
        closing = statement.closing_balance if statement else None
        _, open_amount = _count_and_gross(
            StatementLine.objects.filter(bank_account=bank, status=StatementLineStatus.NEW)
        )
        positions.append(
            AccountPosition(
                bank_account=bank,
                statement=statement,
                closing_balance=closing,
                ledger_balance=ledger,
                difference=(closing - ledger) if closing is not None else None,
                open_lines_amount=open_amount,
                statement_mismatch=statement.balance_difference if statement else None,
            )
        )
    return positions


def open_exceptions() -> list[OpenException]:
    rows = []
    count, amount = _count_and_gross(StatementLine.objects.filter(status__in=OPEN))
    rows.append(
        OpenException(
            "unmatched_lines",
            "Bank lines nobody explained yet",
            count,
            amount,
            "reconciliation/statementline/?status__in=new,unmatched,suggested,exception",
        )
    )
    count, amount = _count_and_gross(StatementLine.objects.exclude(matching_error="").filter(status__in=OPEN))
    rows.append(
        OpenException(
            "matching_failed",
            "Bank lines a matcher failed on (parked with the error)",
            count,
            amount,
            "reconciliation/statementline/?matching_failed=1",
        )
    )
    count, amount = _count_and_gross(StatementLine.objects.filter(amount_mismatch=True, status__in=OPEN))
    rows.append(
        OpenException(
            "detail_amount_mismatch",
            "Bank lines whose transaction details do not add up to the booking",
            count,
            amount,
            "reconciliation/statementline/?amount_mismatch__exact=1",
        )
    )
    count, amount = _count_and_gross(StatementLine.objects.filter(possible_duplicate=True))
    rows.append(
        OpenException(
            "possible_duplicates",
            "Bookings a file repeats: confirm or set aside",
            count,
            amount,
            "reconciliation/statementline/?possible_duplicate__exact=1",
        )
    )
    mismatched = Match.objects.filter(status=MatchStatus.ACTIVE).exclude(line__amount_minor=F("amount_minor"))
    mismatched = mismatched.exclude(matcher="reversal")
    rows.append(
        OpenException(
            "amount_mismatch",
            "Matches whose amount differs from the bank line",
            mismatched.count(),
            Decimal(0),
            "reconciliation/match/?amount_mismatch=1",
        )
    )
    bad_statements = BankStatement.objects.filter(
        (~Q(balance_difference=0) & Q(balance_difference__isnull=False)) | ~Q(balance_note="")
    )
    rows.append(
        OpenException(
            "statement_balance",
            "Statements whose opening balance + entries ≠ closing balance, or that cannot be checked",
            bad_statements.count(),
            bad_statements.aggregate(t=Sum("balance_difference"))["t"] or Decimal(0),
            "reconciliation/bankstatement/?balance_mismatch=1",
        )
    )
    rows.append(
        OpenException(
            "write_off_pending",
            "Write-offs waiting for a second approver",
            write_offs_waiting().count(),
            Decimal(0),
            "reconciliation/reconciliationaction/?waiting=1",
        )
    )
    for source in _EXCEPTION_SOURCES:
        rows.extend(source())
    return rows


def dashboard(*, today: date | None = None) -> dict:
    today = today or timezone.localdate()
    week_start = today - timedelta(days=today.weekday())
    aging = unmatched_aging(today=today)
    return {
        "today": today,
        "activity": activity(since=today, label="Today") + activity(since=week_start, label="This week"),
        "aging": aging,
        "aging_max": max((abs(b.amount) for b in aging), default=Decimal(0)) or Decimal(1),
        "positions": account_positions(),
        "exceptions": open_exceptions(),
    }


# --- the bank side of ledger_verify ----------------------------------------------------------------

# The sweep matches new lines every 5 minutes; a line still new after three sweeps is stuck.
STUCK_AFTER = timedelta(seconds=getattr(settings, "STATEMENT_MATCH_STUCK_AFTER_SECONDS", 900))
_MATCH_TASKS = (
    "reconciliation.tasks.statement_import_match_task",
    "reconciliation.tasks.statement_lines_match_sweep_task",
)


@dataclass
class BankVerifyReport:
    stale_new_lines: list[str] = field(default_factory=list)
    short_statements: list[str] = field(default_factory=list)
    stuck_match_tasks: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.stale_new_lines or self.short_statements or self.stuck_match_tasks)


def bank_verify_report(*, now=None, limit: int = 100) -> BankVerifyReport:
    """What the bank side must satisfy besides the ledger: no line stays ``new`` past the sweeps
    (``STUCK_AFTER``), every statement page stored a line for each entry it did not already know,
    and no match task waits in the queue past the same limit."""
    now = now or timezone.now()
    cutoff = now - STUCK_AFTER
    report = BankVerifyReport()
    stale = StatementLine.objects.filter(status=StatementLineStatus.NEW, created_at__lt=cutoff)
    stale_count = stale.count()
    if stale_count:
        oldest = stale.order_by("created_at").values_list("pk", "created_at").first()
        report.stale_new_lines.append(
            f"{stale_count} line(s) still new after {STUCK_AFTER}; the oldest is line {oldest[0]} "
            f"from {oldest[1]:%Y-%m-%d %H:%M}"
        )
    short = (
        BankStatement.objects.annotate(stored=Count("lines"))
        .exclude(stored=F("entry_count") - F("known_count"))
        .values_list("pk", "statement_id", "page_number", "part", "entry_count", "known_count", "stored")
        .order_by("pk")[:limit]
    )
    for pk, statement_id, page, part, entries, known, stored in short:
        report.short_statements.append(
            f"statement {statement_id} (#{pk}, page {page}, part {part}): {entries} entries, {known} known "
            f"from earlier files, but {stored} line(s) stored"
        )
    for queued in OrmQ.objects.filter(lock__lt=cutoff).order_by("lock")[: limit * 10]:
        if queued.func() in _MATCH_TASKS:
            report.stuck_match_tasks.append(
                f"{queued.name() or queued.func()} queued since {queued.lock:%Y-%m-%d %H:%M}"
            )
    return report
