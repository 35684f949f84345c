"""Reads for the reconciliation dashboard. Every figure is one aggregate query over indexed
columns (status, booking date, account), so the page stays fast on millions of lines.

Two registries the domains fill from their ``AppConfig.ready`` (payouts does): the dashboard's
exception lists (``register_exception_source``) and the bank postings made ahead of a statement
(``register_bank_postings_ahead``)."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Case, Count, Exists, F, OuterRef, Q, Sum, When
from django.utils import timezone
from django_q.models import OrmQ

from core.money import currency_exponent, minor_to_decimal
from reconciliation.models import (
    BankStatement,
    Match,
    MatchStatus,
    PlatformBankAccount,
    ReconciliationAction,
    StatementLine,
    StatementLineStatus,
)
from reconciliation.services.bank_reports import ADVICE_KINDS


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
    unexplained: Decimal | None = None

    @property
    def state(self) -> str:
        """``unexplained`` (a real discrepancy, or a statement that does not add up), ``timing``
        (a difference the lines the bank booked and the ledger does not hold yet explain: it closes
        as they are matched), ``ok``; ``none`` before any statement."""
        if self.difference is None:
            return "none"
        if self.unexplained or self.statement_mismatch:
            return "unexplained"
        return "timing" if self.difference else "ok"


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


# Postings to a bank ledger account that no bank line made (yet): a rail or a pain.002 said the
# money left or came back before any imported statement showed it. Domains that post such entries
# say how much per ledger account code, in minor units, signed as the bank account moved.
AheadSource = Callable[[], dict[str, int]]
_AHEAD_SOURCES: list[AheadSource] = []


def register_bank_postings_ahead(source: AheadSource) -> AheadSource:
    """Domains add what they posted to bank accounts ahead of the bank's statements (payouts
    settled or returned by their rail), a timing difference of the closing-balance check."""
    if source not in _AHEAD_SOURCES:
        _AHEAD_SOURCES.append(source)
    return source


def _postings_ahead() -> dict[str, int]:
    ahead: dict[str, int] = {}
    for source in _AHEAD_SOURCES:
        for code, minor in source().items():
            ahead[code] = ahead.get(code, 0) + minor
    return ahead


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


# Lines whose booking is in the ledger's bank account (matched, or parked in suspense).
POSTED = [
    StatementLineStatus.MATCHED,
    StatementLineStatus.UNMATCHED,
    StatementLineStatus.SUGGESTED,
    StatementLineStatus.WRITTEN_OFF,
]
# Lines the bank booked that are not in it yet: a timing difference, named, not hidden.
UNPOSTED = [StatementLineStatus.NEW, StatementLineStatus.EXCEPTION, StatementLineStatus.AMBIGUOUS]
_SIGNED = Case(When(credit_debit="DBIT", then=-F("amount")), default=F("amount"))


@dataclass(frozen=True)
class BalanceCheck:
    """One account's day: the bank's closing balance against the ledger's bank account.

    ``ledger_balance`` is the opening balance of the account's first statement (what the books
    start from) plus the ledger's bank account as of the day: its balance now less the lines
    booked after the day that it holds, and less ``ahead``, what it holds that no bank line
    posted yet (a payout its rail settled before any statement showed the debit). (Not by entry
    date: a payout's settlement is posted the day its debit is matched, which may be days after
    the booking.) ``unposted`` is what the
    bank booked up to the day that the ledger does not hold yet (new, held ambiguous, failed
    lines); what remains, ``unexplained``, is a discrepancy: a booking posted twice or missing,
    a posting to the bank account no bank line explains, or a statement missing."""

    bank_account: PlatformBankAccount
    statement: BankStatement  # the day's last statement page with a closing balance
    day: date
    closing_balance: Decimal
    ledger_balance: Decimal
    unposted: Decimal
    ahead: Decimal = Decimal(0)

    @property
    def difference(self) -> Decimal:
        return self.closing_balance - self.ledger_balance

    @property
    def unexplained(self) -> Decimal:
        return self.difference - self.unposted

    def describe(self) -> str:
        def shown(amount: Decimal) -> Decimal:
            cents = amount.quantize(Decimal(1).scaleb(-currency_exponent(self.bank_account.currency)))
            return cents if cents == amount else amount

        return (
            f"{self.bank_account.identifier} {self.bank_account.currency} on {self.day} (statement "
            f"{self.statement.statement_id}, #{self.statement.pk}): the bank says {shown(self.closing_balance)}, "
            f"the ledger {shown(self.ledger_balance)} (not counting {shown(self.ahead)} its rails posted ahead "
            f"of the bank's statements); difference {shown(self.difference)}, of which "
            f"{shown(self.unposted)} in lines not yet posted or held, {shown(self.unexplained)} unexplained"
        )


def _closing_days(bank: PlatformBankAccount, *, last: int | None) -> dict[date, BankStatement]:
    """Per closing day, the statement page whose closing balance closes it: of the day's
    statements the last the bank made (ElctrncSeqNb, creation time, then import order), of its
    pages the last. A page without a closing balance (the first pages of a paged statement)
    checks nothing, and neither does a statement an evening one of the same day follows."""
    pages = (
        BankStatement.objects.filter(
            bank_account=bank, closing_balance__isnull=False, closing_balance_date__isnull=False
        )
        .exclude(kind__in=ADVICE_KINDS)
        .order_by("pk")
    )
    if last is not None:
        days = list(
            pages.order_by("-closing_balance_date").values_list("closing_balance_date", flat=True).distinct()[:last]
        )
        if not days:
            return {}
        pages = pages.filter(closing_balance_date__gte=min(days))
    pages = list(pages)
    first_seen: dict[str, int] = {}
    for page in pages:
        first_seen.setdefault(page.statement_id, page.pk)
    earliest = datetime.min.replace(tzinfo=UTC)

    def made(page: BankStatement) -> tuple:
        sequence = page.electronic_sequence_number if page.electronic_sequence_number is not None else -1
        return (sequence, page.created_at_bank or earliest, first_seen[page.statement_id], page.page_number, page.part)

    by_day: dict[date, BankStatement] = {}
    for page in sorted(pages, key=made):
        by_day[page.closing_balance_date] = page
    return by_day


def statement_balance_checks(*, last: int | None = None) -> list[BalanceCheck]:
    """Every (or the ``last`` N) closing day of every bank account, checked (``BalanceCheck``).
    Per account: the day's pages, its first opening balance, and two sums grouped by booking day."""
    checks = []
    ahead_by_code = _postings_ahead()
    for bank in PlatformBankAccount.objects.select_related("ledger_account").order_by("iban", "other_id", "currency"):
        by_day = _closing_days(bank, last=last)
        if not by_day:
            continue
        first = (
            BankStatement.objects.filter(bank_account=bank, opening_balance__isnull=False)
            .exclude(kind__in=ADVICE_KINDS)
            .order_by(
                F("opening_balance_date").asc(nulls_last=True),
                F("created_at_bank").asc(nulls_last=True),
                "page_number",
                "pk",
            )
            .values_list("opening_balance", flat=True)
            .first()
        ) or Decimal(0)
        lines = StatementLine.objects.filter(bank_account=bank, booking_date__isnull=False)
        posted_after = dict(
            lines.filter(status__in=POSTED, booking_date__gt=min(by_day))
            .values("booking_date")
            .annotate(net=Sum(_SIGNED))
            .values_list("booking_date", "net")
        )
        unposted = dict(
            lines.filter(status__in=UNPOSTED)
            .values("booking_date")
            .annotate(net=Sum(_SIGNED))
            .values_list("booking_date", "net")
        )
        ledger_now = minor_to_decimal(bank.ledger_account.posted_minor, bank.currency)
        ahead = minor_to_decimal(ahead_by_code.get(bank.ledger_account.code, 0), bank.currency)
        for day, statement in sorted(by_day.items()):
            later = sum((net for booked, net in posted_after.items() if booked > day), Decimal(0))
            checks.append(
                BalanceCheck(
                    bank_account=bank,
                    statement=statement,
                    day=day,
                    closing_balance=statement.closing_balance,
                    ledger_balance=first + ledger_now - later - ahead,
                    ahead=ahead,
                    unposted=sum((net for booked, net in unposted.items() if booked <= day), Decimal(0)),
                )
            )
    return checks


def account_positions() -> list[AccountPosition]:
    """Per bank account: the newest closing balance against the ledger's bank account that day
    (``BalanceCheck``); the lines not yet posted are the first explanation of a difference."""
    latest = {c.bank_account.pk: c for c in statement_balance_checks(last=1)}
    positions = []
    for bank in PlatformBankAccount.objects.select_related("ledger_account").order_by("iban", "other_id", "currency"):
        check = latest.get(bank.pk)
        positions.append(
            AccountPosition(
                bank_account=bank,
                statement=check.statement if check else None,
                closing_balance=check.closing_balance if check else None,
                ledger_balance=(
                    check.ledger_balance if check else minor_to_decimal(bank.ledger_account.posted_minor, bank.currency)
                ),
                difference=check.difference if check else None,
                open_lines_amount=check.unposted if check else Decimal(0),
                statement_mismatch=check.statement.balance_difference if check else None,
                unexplained=check.unexplained if check else None,
            )
        )
    return positions


def unconfirmed_advices():
    """Bookings only a camt.054 reported, on a day a later statement of the account already
    closed: the statement did not confirm them (the balance check shows whether it booked them)."""
    closed = (
        BankStatement.objects.filter(bank_account=OuterRef("bank_account"), closing_balance_date__isnull=False)
        .exclude(kind__in=ADVICE_KINDS)
        .filter(closing_balance_date__gte=OuterRef("booking_date"))
    )
    confirmed = StatementLine.objects.filter(confirms=OuterRef("pk")).exclude(statement__kind__in=ADVICE_KINDS)
    return (
        StatementLine.objects.filter(statement__kind__in=ADVICE_KINDS, bank_status="BOOK")
        .exclude(status__in=[StatementLineStatus.CONFIRMATION, StatementLineStatus.IGNORED])
        .filter(Exists(closed))
        .exclude(Exists(confirmed))
    )


# The dashboard looks at each account's last month of statements; ledger_verify at all of them.
DASHBOARD_DAYS = 31


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
    off = [c for c in statement_balance_checks(last=DASHBOARD_DAYS) if c.unexplained]
    rows.append(
        OpenException(
            "closing_balance_vs_ledger",
            "Statement days whose closing balance differs from the ledger's bank account",
            len(off),
            sum((c.unexplained for c in off), Decimal(0)),
        )
    )
    count, amount = _count_and_gross(StatementLine.objects.filter(status=StatementLineStatus.AMBIGUOUS))
    rows.append(
        OpenException(
            "ambiguous_reports",
            "Lines that may repeat an earlier report: say which booking they are (posted by nobody until then)",
            count,
            amount,
            "reconciliation/statementline/?status__exact=ambiguous",
        )
    )
    count, amount = _count_and_gross(unconfirmed_advices())
    rows.append(
        OpenException(
            "unconfirmed_advices",
            "Bookings a camt.054 notified that the day's statement did not confirm",
            count,
            amount,
            "reconciliation/statementline/?unconfirmed_advice=1",
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
    balance_differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.stale_new_lines or self.short_statements or self.stuck_match_tasks or self.balance_differences)


def bank_verify_report(*, now=None, limit: int = 100) -> BankVerifyReport:
    """What the bank side must satisfy besides the ledger: no line stays ``new`` past the sweeps
    (``STUCK_AFTER``), every statement page stored a line for each entry, every closing balance
    equals the ledger's bank account that day but for lines not yet posted (``BalanceCheck``),
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
    report.balance_differences = [c.describe() for c in statement_balance_checks() if c.unexplained][:limit]
    for queued in OrmQ.objects.filter(lock__lt=cutoff).order_by("lock")[: limit * 10]:
        if queued.func() in _MATCH_TASKS:
            report.stuck_match_tasks.append(
                f"{queued.name() or queued.func()} queued since {queued.lock:%Y-%m-%d %H:%M}"
            )
    return report
