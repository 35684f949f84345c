"""Reads from the books. Balances are materialised, so every balance read is one indexed row."""

from dataclasses import dataclass, field

from django.db import connection
from django.db.models import F, Q, Sum

from core.exceptions import NotFound
from reconciliation.models import DEBIT_NORMAL_KINDS, Account, Hold, HoldStatus, JournalEntry, Posting
from reconciliation.test_books import TEST_BOOKS_PREFIX


@dataclass(frozen=True)
class Balance:
    account_id: int
    currency: str
    posted_minor: int
    held_minor: int

    @property
    def available_minor(self) -> int:
        return self.posted_minor - self.held_minor


_BALANCE_SQL = f"SELECT currency, posted_minor, held_minor FROM {Account._meta.db_table} WHERE id = %s"


def account_balance(*, account_id: int) -> Balance:
    """One indexed row. Plain SQL because this is the hottest read of the product (every ingest,
    every dashboard tile): the ORM's query building costs four times the database's work here."""
    with connection.cursor() as cursor:
        cursor.execute(_BALANCE_SQL, [account_id])
        row = cursor.fetchone()
    if row is None:
        raise NotFound(f"No account {account_id}.")
    return Balance(account_id=account_id, currency=row[0], posted_minor=row[1], held_minor=row[2])


def account_balance_by_code(*, code: str) -> Balance:
    row = Account.objects.filter(code=code).values_list("pk", "currency", "posted_minor", "held_minor").first()
    if row is None:
        raise NotFound(f"No account {code}.")
    return Balance(account_id=row[0], currency=row[1], posted_minor=row[2], held_minor=row[3])


@dataclass(frozen=True)
class StatementLine:
    posting_id: int
    entry_id: int
    created_at: object
    effective_date: object
    kind: str
    memo: str
    idempotency_key: str
    debit_minor: int
    credit_minor: int
    balance_after_minor: int


@dataclass(frozen=True)
class StatementPage:
    account: Account
    lines: list[StatementLine]
    next_cursor: int | None


def account_statement(*, account: Account, after_posting_id: int | None = None, limit: int = 50) -> StatementPage:
    """One page of an account's postings, oldest first, with the running balance stored by the
    posting trigger: keyset pagination on (account, id), so page 10,000 costs what page 1 does."""
    qs = Posting.objects.filter(account=account).select_related("entry").order_by("id")
    if after_posting_id is not None:
        qs = qs.filter(id__gt=after_posting_id)
    rows = list(qs[: limit + 1])
    lines = [
        StatementLine(
            posting_id=p.pk,
            entry_id=p.entry_id,
            created_at=p.entry.created_at,
            effective_date=p.entry.effective_date,
            kind=p.entry.kind,
            memo=p.entry.memo,
            idempotency_key=p.entry.idempotency_key,
            debit_minor=p.debit_minor,
            credit_minor=p.credit_minor,
            balance_after_minor=p.balance_after_minor,
        )
        for p in rows[:limit]
    ]
    next_cursor = lines[-1].posting_id if len(rows) > limit else None
    return StatementPage(account=account, lines=lines, next_cursor=next_cursor)


@dataclass
class TrialBalanceRow:
    currency: str
    debit_balances_minor: int = 0
    credit_balances_minor: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    @property
    def difference_minor(self) -> int:
        return self.debit_balances_minor - self.credit_balances_minor


def trial_balance() -> list[TrialBalanceRow]:
    """Per currency: the sum of debit-normal balances against credit-normal ones. In balanced books
    the difference is zero (every entry moved as much on one side as on the other)."""
    rows: dict[str, TrialBalanceRow] = {}
    totals = Account.objects.values("currency", "kind").annotate(total=Sum("posted_minor")).order_by("currency", "kind")
    for item in totals:
        row = rows.setdefault(item["currency"], TrialBalanceRow(currency=item["currency"]))
        total = item["total"] or 0
        row.by_kind[item["kind"]] = total
        if item["kind"] in DEBIT_NORMAL_KINDS:
            row.debit_balances_minor += total
        else:
            row.credit_balances_minor += total
    return list(rows.values())


@dataclass
class VerifyReport:
    accounts_checked: int = 0
    entries_checked: int = 0
    postings_checked: int = 0
    balance_mismatches: list[tuple[str, int, int]] = field(default_factory=list)
    held_mismatches: list[tuple[str, int, int]] = field(default_factory=list)
    unbalanced_entries: list[tuple[int, str, int]] = field(default_factory=list)
    short_entries: list[int] = field(default_factory=list)
    overdrawn_accounts: list[tuple[str, int]] = field(default_factory=list)
    mixed_books_entries: list[int] = field(default_factory=list)
    trial_balance: list[TrialBalanceRow] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.balance_mismatches
            or self.held_mismatches
            or self.unbalanced_entries
            or self.short_entries
            or self.overdrawn_accounts
            or self.mixed_books_entries
            or any(row.difference_minor for row in self.trial_balance)
        )


def ledger_verify_report(*, limit: int = 100) -> VerifyReport:
    """Recompute the books from the postings and compare with what is stored: each account's
    materialised balance and held amount, each entry's balance per currency, the trial balance,
    and no-overdraft accounts. Set-based SQL, so it reads each table once."""
    report = VerifyReport()
    acc = Account._meta.db_table
    post = Posting._meta.db_table
    hold = Hold._meta.db_table
    entry = JournalEntry._meta.db_table
    debit_kinds = tuple(k.value for k in DEBIT_NORMAL_KINDS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT a.code, a.posted_minor,
                   COALESCE(CASE WHEN a.kind IN (%s, %s) THEN s.total ELSE -s.total END, 0)
              FROM {acc} a
              LEFT JOIN (SELECT account_id, SUM(amount_minor) AS total FROM {post} GROUP BY account_id) s
                ON s.account_id = a.id
             WHERE a.posted_minor <> COALESCE(CASE WHEN a.kind IN (%s, %s) THEN s.total ELSE -s.total END, 0)
             LIMIT %s
            """,
            [*debit_kinds, *debit_kinds, limit],
        )
        report.balance_mismatches = [tuple(r) for r in cursor.fetchall()]
        cursor.execute(
            f"""
            SELECT a.code, a.held_minor, COALESCE(h.total, 0)
              FROM {acc} a
              LEFT JOIN (SELECT account_id, SUM(amount_minor) AS total FROM {hold}
                          WHERE status = %s GROUP BY account_id) h ON h.account_id = a.id
             WHERE a.held_minor <> COALESCE(h.total, 0)
             LIMIT %s
            """,
            [HoldStatus.PENDING.value, limit],
        )
        report.held_mismatches = [tuple(r) for r in cursor.fetchall()]
        cursor.execute(
            f"""SELECT entry_id, currency, SUM(amount_minor) FROM {post}
                 GROUP BY entry_id, currency HAVING SUM(amount_minor) <> 0 LIMIT %s""",
            [limit],
        )
        report.unbalanced_entries = [tuple(r) for r in cursor.fetchall()]
        cursor.execute(
            f"""SELECT e.id FROM {entry} e LEFT JOIN {post} p ON p.entry_id = e.id
                 GROUP BY e.id HAVING COUNT(p.id) < 2 LIMIT %s""",
            [limit],
        )
        report.short_entries = [r[0] for r in cursor.fetchall()]
        # Test mode's money never meets the platform's real books (reconciliation.test_books): an
        # entry posting to a testmode: account and to a live platform account is a leak.
        cursor.execute(
            f"""SELECT p.entry_id FROM {post} p JOIN {acc} a ON a.id = p.account_id
                 GROUP BY p.entry_id
                HAVING MAX(CASE WHEN a.code LIKE %s THEN 1 ELSE 0 END) = 1
                   AND MAX(CASE WHEN a.code LIKE %s OR a.code LIKE %s OR a.code LIKE %s THEN 1 ELSE 0 END) = 1
                 LIMIT %s""",
            [f"{TEST_BOOKS_PREFIX}%", "platform:%", "payouts:%", "suspense:%", limit],
        )
        report.mixed_books_entries = [r[0] for r in cursor.fetchall()]
        cursor.execute(f"SELECT COUNT(*) FROM {post}")
        report.postings_checked = cursor.fetchone()[0]
    report.accounts_checked = Account.objects.count()
    report.entries_checked = JournalEntry.objects.count()
    report.overdrawn_accounts = [
        (code, posted - held)
        for code, posted, held in Account.objects.filter(
            Q(allow_overdraft=False, posted_minor__lt=F("held_minor")) | Q(held_minor__lt=0)
        ).values_list("code", "posted_minor", "held_minor")[:limit]
    ]
    report.trial_balance = trial_balance()
    return report


def accounts_by_owner(*, owner_type: str, owner_id: str) -> dict[str, Account]:
    return {a.code: a for a in Account.objects.filter(owner_type=owner_type, owner_id=str(owner_id))}


def hold_pending_total(*, account: Account) -> int:
    return Hold.objects.filter(account=account, status=HoldStatus.PENDING).aggregate(t=Sum("amount_minor"))["t"] or 0
