"""The database itself keeps the books, whatever code or person talks to it.

Each test goes around the services with raw SQL and tries to break an invariant; PostgreSQL must
refuse and the books must be exactly as before. SQLite (the embedded demo) has no such guards,
so these run on PostgreSQL only.
"""

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from reconciliation.models import Account, Hold, JournalEntry, Posting
from reconciliation.selectors import ledger_verify_report
from reconciliation.services import Leg, ledger_entry_post, ledger_hold_commit, ledger_hold_void
from tests.reconciliation.factories import AccountFactory, hold, ledger_snapshot

pytestmark = pytest.mark.postgres

ACCOUNT = Account._meta.db_table
ENTRY = JournalEntry._meta.db_table
POSTING = Posting._meta.db_table
HOLD = Hold._meta.db_table


@pytest.fixture
def books(chart, funded_budget):
    """Funded budget, one posted reward, a pending, a committed and a voided hold."""
    entry = ledger_entry_post(
        idempotency_key="reward:1:approve",
        kind="reward_approve",
        legs=[Leg.debit(chart.budget, 1_000), Leg.credit(chart.payable, 1_000)],
    ).entry
    pending = hold(chart.budget, 2_000, key="hold:pending")
    committed = hold(chart.budget, 3_000, key="hold:committed")
    ledger_hold_commit(
        hold=committed,
        idempotency_key="reward:2:approve",
        kind="reward_approve",
        legs=[Leg.debit(chart.budget, 3_000), Leg.credit(chart.payable, 3_000)],
    )
    voided = hold(chart.budget, 500, key="hold:voided")
    ledger_hold_void(hold=voided)
    chart.entry, chart.pending, chart.committed, chart.voided = entry, pending, committed, voided
    chart.posting = entry.postings.order_by("pk").first()
    return chart


def new_entry_id(cursor, key="raw:1"):
    cursor.execute(
        f"INSERT INTO {ENTRY} (idempotency_key, kind, memo, effective_date, created_at, reference_type, "
        "reference_id, content_hash) VALUES (%s, 'raw', '', CURRENT_DATE, now(), '', '', '') RETURNING id",
        [key],
    )
    return cursor.fetchone()[0]


def insert_posting(cursor, entry_id, account, amount_minor, currency=None):
    cursor.execute(
        f"INSERT INTO {POSTING} (entry_id, account_id, amount_minor, currency, balance_after_minor) "
        "VALUES (%s, %s, %s, %s, 0)",
        [entry_id, account.pk, amount_minor, currency or account.currency],
    )


def assert_refused(books, match, attack):
    """Run ``attack(cursor)`` in a savepoint, expect the database to refuse it, and check that
    nothing changed and the books still verify."""
    before = ledger_snapshot()
    with pytest.raises(IntegrityError, match=match), transaction.atomic(), connection.cursor() as cursor:
        attack(cursor)
    assert ledger_snapshot() == before
    assert ledger_verify_report().ok


# --- journal entries must balance (checked at commit) ---------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_unbalanced_entry_is_refused_at_commit(chart, funded_budget):
    before = ledger_snapshot()

    # Money out of thin air: a credit with no debit. Each statement succeeds; the commit must not.
    with pytest.raises(IntegrityError, match="does not balance"), transaction.atomic(), connection.cursor() as cursor:
        entry_id = new_entry_id(cursor)
        insert_posting(cursor, entry_id, chart.payable, -500)

    assert ledger_snapshot() == before
    assert ledger_verify_report().ok


@pytest.mark.django_db(transaction=True)
def test_an_entry_balanced_in_total_but_not_per_currency_is_refused_at_commit(chart, funded_budget):
    usd = AccountFactory(code="brand:1:funds:USD", currency="USD")
    before = ledger_snapshot()

    with pytest.raises(IntegrityError, match="does not balance"), transaction.atomic(), connection.cursor() as cursor:
        entry_id = new_entry_id(cursor)
        insert_posting(cursor, entry_id, chart.payable, -500)
        insert_posting(cursor, entry_id, usd, 500)

    assert ledger_snapshot() == before


def test_an_unbalanced_entry_is_refused_when_constraints_are_checked_early(books):
    # Inside the test's transaction there is no commit, so ask for the deferred check now.
    def attack(cursor):
        entry_id = new_entry_id(cursor)
        insert_posting(cursor, entry_id, books.payable, -500)
        insert_posting(cursor, entry_id, books.fees, 499)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    assert_refused(books, "does not balance", attack)


# --- append-only ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        pytest.param(
            f"UPDATE {POSTING} SET amount_minor = amount_minor * 2 WHERE id = %(posting)s",
            "append-only",
            id="update posting amount",
        ),
        pytest.param(
            f"UPDATE {POSTING} SET account_id = %(fees)s WHERE id = %(posting)s",
            "append-only",
            id="move posting to another account",
        ),
        pytest.param(f"DELETE FROM {POSTING} WHERE id = %(posting)s", "append-only", id="delete posting"),
        pytest.param(
            f"DELETE FROM {POSTING} WHERE entry_id = %(entry)s", "append-only", id="delete both legs of an entry"
        ),
        pytest.param(
            f"UPDATE {ENTRY} SET idempotency_key = 'other' WHERE id = %(entry)s", "append-only", id="update entry"
        ),
        pytest.param(f"DELETE FROM {ENTRY} WHERE id = %(entry)s", "append-only", id="delete entry"),
    ],
)
def test_postings_and_entries_are_append_only(books, sql, match):
    params = {"posting": books.posting.pk, "entry": books.entry.pk, "fees": books.fees.pk}

    assert_refused(books, match, lambda cursor: cursor.execute(sql, params))


# --- account balances come only from postings and holds --------------------------------------------


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        pytest.param(
            f"UPDATE {ACCOUNT} SET posted_minor = posted_minor + 1000000 WHERE id = %(budget)s",
            "only through postings",
            id="raise posted",
        ),
        pytest.param(
            f"UPDATE {ACCOUNT} SET posted_minor = 0 WHERE id = %(payable)s", "only through postings", id="zero posted"
        ),
        pytest.param(
            f"UPDATE {ACCOUNT} SET held_minor = 0 WHERE id = %(budget)s", "only through postings", id="drop held"
        ),
        pytest.param(
            f"UPDATE {ACCOUNT} SET currency = 'USD' WHERE id = %(budget)s",
            "currency and kind are fixed",
            id="change currency",
        ),
        pytest.param(
            f"UPDATE {ACCOUNT} SET kind = 'asset' WHERE id = %(payable)s",
            "currency and kind are fixed",
            id="change kind",
        ),
        pytest.param(f"DELETE FROM {ACCOUNT} WHERE id = %(fees)s", "cannot be deleted", id="delete account"),
        pytest.param(
            f"UPDATE {ACCOUNT} SET id = id + 1000000 WHERE id = %(payable)s",
            "fixed",
            id="renumber account",
        ),
        pytest.param(
            f"INSERT INTO {ACCOUNT} (code, name, kind, currency, owner_type, owner_id, allow_overdraft, is_active, "
            "posted_minor, held_minor, created_at) VALUES ('x:EUR', 'x', 'liability', 'EUR', '', '', false, true, "
            "500, 0, now())",
            "starts at zero",
            id="new account with a balance",
        ),
    ],
)
def test_account_balances_and_identity_cannot_be_edited(books, sql, match):
    params = {"budget": books.budget.pk, "payable": books.payable.pk, "fees": books.fees.pk}

    assert_refused(books, match, lambda cursor: cursor.execute(sql, params))


# --- postings that are individually wrong ----------------------------------------------------------


def test_a_raw_posting_cannot_overdraw_a_no_overdraft_account(books):
    def attack(cursor):
        entry_id = new_entry_id(cursor)
        # Balanced, but takes more than the budget has available (posted minus pending holds).
        available = Account.objects.get(pk=books.budget.pk).available_minor
        insert_posting(cursor, entry_id, books.budget, available + 1)
        insert_posting(cursor, entry_id, books.payable, -(available + 1))

    assert_refused(books, "account_no_overdraft", attack)


def test_a_raw_posting_cannot_spend_money_reserved_by_a_hold(books):
    def attack(cursor):
        entry_id = new_entry_id(cursor)
        # The budget's posted balance covers this, but part of it is held.
        insert_posting(cursor, entry_id, books.budget, 95_000)
        insert_posting(cursor, entry_id, books.payable, -95_000)

    assert Account.objects.get(pk=books.budget.pk).posted_minor >= 95_000
    assert_refused(books, "account_no_overdraft", attack)


@pytest.mark.parametrize(
    ("amount", "currency", "match"),
    [
        pytest.param(0, None, "posting_amount_not_zero", id="zero amount"),
        pytest.param(100, "USD", "does not match", id="currency other than the account's"),
    ],
)
def test_a_malformed_posting_is_refused(books, amount, currency, match):
    def attack(cursor):
        entry_id = new_entry_id(cursor)
        insert_posting(cursor, entry_id, books.payable, amount, currency)

    assert_refused(books, match, attack)


def test_a_raw_posting_or_hold_for_an_unknown_account_is_refused(books):
    ghost = Account(pk=10**9, currency="EUR")

    def posting(cursor):
        entry_id = new_entry_id(cursor)
        insert_posting(cursor, entry_id, books.payable, 100)
        insert_posting(cursor, entry_id, ghost, -100)

    def raw_hold(cursor):
        cursor.execute(
            f"INSERT INTO {HOLD} (idempotency_key, account_id, amount_minor, currency, status, memo, reference_type, "
            "reference_id, created_at) VALUES ('raw-hold', %s, 100, 'EUR', 'pending', '', '', '', %s)",
            [ghost.pk, timezone.now()],
        )

    assert_refused(books, "unknown account", posting)
    assert_refused(books, "unknown account", raw_hold)


def test_a_raw_posting_to_an_inactive_account_is_refused(books):
    Account.objects.filter(pk=books.fees.pk).update(is_active=False)

    def attack(cursor):
        entry_id = new_entry_id(cursor)
        insert_posting(cursor, entry_id, books.payable, 100)
        insert_posting(cursor, entry_id, books.fees, -100)

    assert_refused(books, "inactive", attack)


# --- holds move pending -> committed | voided | expired exactly once -----------------------------


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        pytest.param(
            f"UPDATE {HOLD} SET status = 'committed', resolved_at = now(), committed_amount_minor = 1, "
            "commit_entry_id = %(entry)s WHERE id = %(committed)s",
            "already committed",
            id="commit a committed hold again",
        ),
        pytest.param(
            f"UPDATE {HOLD} SET status = 'voided', resolved_at = now(), committed_amount_minor = NULL, "
            "commit_entry_id = NULL WHERE id = %(committed)s",
            "already committed",
            id="void a committed hold",
        ),
        pytest.param(
            f"UPDATE {HOLD} SET resolved_at = now() WHERE id = %(voided)s",
            "already voided",
            id="void a voided hold again",
        ),
        pytest.param(
            f"UPDATE {HOLD} SET status = 'pending', resolved_at = NULL WHERE id = %(voided)s",
            "already voided",
            id="reopen a voided hold",
        ),
        pytest.param(f"DELETE FROM {HOLD} WHERE id = %(pending)s", "cannot be deleted", id="delete a pending hold"),
        pytest.param(f"DELETE FROM {HOLD} WHERE id = %(voided)s", "cannot be deleted", id="delete a voided hold"),
        pytest.param(
            f"UPDATE {HOLD} SET amount_minor = 1 WHERE id = %(pending)s", "are fixed", id="shrink a pending hold"
        ),
        pytest.param(
            f"UPDATE {HOLD} SET account_id = %(payable)s WHERE id = %(pending)s", "are fixed", id="move a pending hold"
        ),
        pytest.param(
            f"UPDATE {HOLD} SET status = 'committed', resolved_at = now() WHERE id = %(pending)s",
            "hold_status_coherent",
            id="commit without an entry",
        ),
        pytest.param(
            f"UPDATE {HOLD} SET status = 'committed', resolved_at = now(), committed_amount_minor = 1, "
            "commit_entry_id = %(committed_entry)s WHERE id = %(pending)s",
            "hold_commit_entry_unique",
            id="commit with another hold's entry",
        ),
    ],
)
def test_holds_resolve_exactly_once_and_never_change_otherwise(books, sql, match):
    params = {
        "pending": books.pending.pk,
        "committed": books.committed.pk,
        "voided": books.voided.pk,
        "entry": books.entry.pk,
        "payable": books.payable.pk,
        "committed_entry": Hold.objects.get(pk=books.committed.pk).commit_entry_id,
    }

    assert_refused(books, match, lambda cursor: cursor.execute(sql, params))


@pytest.mark.parametrize(
    ("status", "amount", "currency", "match"),
    [
        pytest.param("pending", 10**9, "EUR", "account_no_overdraft", id="more than available"),
        pytest.param("committed", 100, "EUR", "created pending", id="created already resolved"),
        pytest.param("pending", 100, "USD", "does not match", id="other currency"),
        pytest.param("pending", 0, "EUR", "hold_amount_positive", id="zero"),
    ],
)
def test_a_raw_hold_insert_is_checked(books, status, amount, currency, match):
    def attack(cursor):
        cursor.execute(
            f"INSERT INTO {HOLD} (idempotency_key, account_id, amount_minor, currency, status, memo, reference_type, "
            "reference_id, created_at) VALUES ('raw-hold', %s, %s, %s, %s, '', '', '', %s)",
            [books.budget.pk, amount, currency, status, timezone.now()],
        )

    assert_refused(books, match, attack)


def test_a_raw_hold_on_an_inactive_account_is_refused(books):
    Account.objects.filter(pk=books.budget.pk).update(is_active=False)

    def attack(cursor):
        cursor.execute(
            f"INSERT INTO {HOLD} (idempotency_key, account_id, amount_minor, currency, status, memo, reference_type, "
            "reference_id, created_at) VALUES ('raw-hold', %s, 100, 'EUR', 'pending', '', '', '', %s)",
            [books.budget.pk, timezone.now()],
        )

    assert_refused(books, "inactive", attack)


def test_a_raw_void_of_a_pending_hold_releases_it_exactly(books):
    # The one legal raw change: pending -> voided. The trigger keeps held_minor in step.
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {HOLD} SET status = 'voided', resolved_at = now() WHERE id = %s", [books.pending.pk])

    assert Account.objects.get(pk=books.budget.pk).held_minor == 0
    assert ledger_verify_report().ok


def test_an_account_kind_outside_the_chart_is_refused(books):
    def attack(cursor):
        cursor.execute(
            f"INSERT INTO {ACCOUNT} (code, name, kind, currency, owner_type, owner_id, allow_overdraft, is_active, "
            "posted_minor, held_minor, created_at) "
            "VALUES ('x:EUR', 'x', 'cash', 'EUR', '', '', false, true, 0, 0, now())"
        )

    assert_refused(books, "account_kind_valid", attack)
