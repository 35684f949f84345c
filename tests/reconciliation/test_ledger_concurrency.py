"""Real concurrent writers on PostgreSQL: each thread has its own connection, a barrier lines them
up, and the database alone decides who wins. No sleeps and no timing assertions: every outcome is
counted, and a thread that never finishes fails the test."""

import contextlib
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from core.exceptions import HoldNotPending, InsufficientFunds
from reconciliation.models import Account, Hold, HoldStatus, JournalEntry
from reconciliation.selectors import account_balance, ledger_verify_report
from reconciliation.services import (
    HoldSpec,
    Leg,
    ledger_entry_post,
    ledger_hold_commit,
    ledger_hold_void,
    ledger_holds_create,
    ledger_holds_expire,
)
from tests.reconciliation.factories import AccountFactory, BudgetAccountFactory, fund, hold

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS = 8
JOIN_TIMEOUT = 60


def run_concurrently(work, n=WRITERS):
    """Run ``work(i)`` in ``n`` threads released together; return each thread's result or exception."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def worker(i):
        try:
            barrier.wait(timeout=JOIN_TIMEOUT)
            results[i] = work(i)
        except Exception as exc:  # the test inspects every outcome, errors included
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a writer never finished (lock wait without end?)"
    return results


def callers_transaction(in_transaction):
    """Business services post inside their own durable transaction (STYLE 4); scripts and tasks may
    call the ledger outside one. The ledger takes a different path for each, so races run on both."""
    return transaction.atomic(durable=True) if in_transaction else contextlib.nullcontext()


in_both_modes = pytest.mark.parametrize(
    "in_transaction", [False, True], ids=["autocommit", "inside caller's transaction"]
)


@in_both_modes
def test_writers_racing_for_a_no_overdraft_budget_spend_it_exactly_once(chart, in_transaction):
    transfers, amount = 40, 100
    fund(chart.budget, transfers * amount, source=chart.equity)

    def spend_ten_times(i):
        outcomes = []
        for attempt in range(10):
            try:
                with callers_transaction(in_transaction):
                    ledger_entry_post(
                        idempotency_key=f"reward:{i}:{attempt}",
                        kind="reward_approve",
                        legs=[Leg.debit(chart.budget, amount), Leg.credit(chart.payable, amount)],
                    )
                outcomes.append("posted")
            except InsufficientFunds:
                outcomes.append("insufficient_funds")
        return outcomes

    results = run_concurrently(spend_ten_times)

    counts = Counter(outcome for outcomes in results for outcome in outcomes)
    assert counts == {"posted": transfers, "insufficient_funds": WRITERS * 10 - transfers}
    assert account_balance(account_id=chart.budget.pk).posted_minor == 0
    assert account_balance(account_id=chart.payable.pk).posted_minor == transfers * amount
    assert JournalEntry.objects.filter(kind="reward_approve").count() == transfers
    assert ledger_verify_report().ok


@in_both_modes
def test_the_same_idempotency_key_submitted_at_once_posts_one_entry(chart, in_transaction):
    fund(chart.budget, 10_000, source=chart.equity)

    def submit(_):
        with callers_transaction(in_transaction):
            return ledger_entry_post(
                idempotency_key="reward:1:approve",
                kind="reward_approve",
                legs=[Leg.debit(chart.budget, 2_500), Leg.credit(chart.payable, 2_500)],
            )

    results = run_concurrently(submit)

    assert all(not isinstance(r, Exception) for r in results), results
    assert len({r.entry.pk for r in results}) == 1
    assert sorted(r.replayed for r in results) == [False] + [True] * (WRITERS - 1)
    assert JournalEntry.objects.filter(idempotency_key="reward:1:approve").count() == 1
    assert account_balance(account_id=chart.payable.pk).posted_minor == 2_500
    assert ledger_verify_report().ok


@pytest.mark.parametrize("per_call", [1, 2], ids=["one hold per call", "two holds per call"])
def test_holds_racing_for_a_budget_reserve_it_exactly_once(chart, per_call):
    fund(chart.budget, 10 * 1_000, source=chart.equity)

    def reserve(i):
        outcomes = []
        for attempt in range(3):
            specs = [HoldSpec(f"hold:{i}:{attempt}:{n}", 1_000) for n in range(per_call)]
            try:
                ledger_holds_create(account=chart.budget, currency="EUR", holds=specs)
                outcomes.append("held")
            except InsufficientFunds:
                outcomes.append("insufficient_funds")
        return outcomes

    results = run_concurrently(reserve)

    counts = Counter(outcome for outcomes in results for outcome in outcomes)
    assert counts == {"held": 10 // per_call, "insufficient_funds": WRITERS * 3 - 10 // per_call}
    balance = account_balance(account_id=chart.budget.pk)
    assert (balance.posted_minor, balance.held_minor) == (10_000, 10_000)
    assert Hold.objects.count() == 10
    assert ledger_verify_report().ok


def test_the_same_hold_keys_submitted_at_once_reserve_once(chart):
    fund(chart.budget, 10_000, source=chart.equity)
    specs = [HoldSpec("hold:a", 1_000), HoldSpec("hold:b", 2_000)]

    def submit(_):
        return [h.pk for h in ledger_holds_create(account=chart.budget, currency="EUR", holds=specs)]

    results = run_concurrently(submit)

    assert all(not isinstance(r, Exception) for r in results), results
    assert len({tuple(r) for r in results}) == 1
    assert Hold.objects.count() == 2
    assert account_balance(account_id=chart.budget.pk).held_minor == 3_000
    assert ledger_verify_report().ok


@pytest.mark.parametrize("same_key", [True, False], ids=["retries with one key", "different keys"])
def test_one_hold_committed_by_many_at_once_is_committed_once(chart, same_key):
    fund(chart.budget, 10_000, source=chart.equity)
    held = hold(chart.budget, 4_000, key="hold:1")

    def commit(i):
        return ledger_hold_commit(
            hold=Hold.objects.get(pk=held.pk),
            idempotency_key="reward:1:approve" if same_key else f"reward:1:approve:{i}",
            kind="reward_approve",
            legs=[Leg.debit(chart.budget, 3_000), Leg.credit(chart.payable, 3_000)],
        )

    results = run_concurrently(commit)

    successes = [r for r in results if not isinstance(r, Exception)]
    errors = [r for r in results if isinstance(r, Exception)]
    if same_key:
        assert errors == []
        assert len({r.entry.pk for r in successes}) == 1
        assert sorted(r.replayed for r in successes) == [False] + [True] * (WRITERS - 1)
    else:
        assert len(successes) == 1 and successes[0].replayed is False
        assert len(errors) == WRITERS - 1
        assert all(isinstance(e, HoldNotPending) for e in errors), errors
    held.refresh_from_db()
    assert (held.status, held.committed_amount_minor) == (HoldStatus.COMMITTED, 3_000)
    assert JournalEntry.objects.filter(kind="reward_approve").count() == 1
    balance = account_balance(account_id=chart.budget.pk)
    assert (balance.posted_minor, balance.held_minor) == (7_000, 0)
    assert ledger_verify_report().ok


def test_commit_and_void_racing_on_one_hold_resolve_it_once(chart):
    fund(chart.budget, 10_000, source=chart.equity)
    held = hold(chart.budget, 4_000, key="hold:1")

    def commit_or_void(i):
        if i % 2:
            return ledger_hold_void(hold=Hold.objects.get(pk=held.pk))
        return ledger_hold_commit(
            hold=Hold.objects.get(pk=held.pk),
            idempotency_key=f"reward:1:{i}",
            kind="reward_approve",
            legs=[Leg.debit(chart.budget, 4_000), Leg.credit(chart.payable, 4_000)],
        )

    results = run_concurrently(commit_or_void)

    held.refresh_from_db()
    errors = [r for r in results if isinstance(r, Exception)]
    assert all(isinstance(e, HoldNotPending) for e in errors), errors
    first_time = [r for r in results if not isinstance(r, Exception) and not r.replayed]
    assert len(first_time) == 1
    if held.status == HoldStatus.COMMITTED:
        # Every void lost; the other commits (other keys) were refused.
        assert len(errors) == WRITERS - 1
        assert account_balance(account_id=chart.budget.pk).posted_minor == 6_000
    else:
        # The voids after the first are replays; every commit was refused.
        assert held.status == HoldStatus.VOIDED
        assert len(errors) == WRITERS // 2
        assert account_balance(account_id=chart.budget.pk).posted_minor == 10_000
    assert account_balance(account_id=chart.budget.pk).held_minor == 0
    assert ledger_verify_report().ok


@in_both_modes
def test_opposite_transfers_between_two_accounts_never_deadlock(chart, in_transaction):
    alice = fund(
        AccountFactory(code="recipient:alice:payable:EUR", allow_overdraft=False), 100_000, source=chart.equity
    )
    bob = fund(AccountFactory(code="recipient:bob:payable:EUR", allow_overdraft=False), 100_000, source=chart.equity)

    def transfer_back_and_forth(i):
        # Half the writers send alice -> bob, half bob -> alice, each listing its legs in its own
        # order: only the service's lock order keeps them from waiting on each other forever.
        source, target = (alice, bob) if i % 2 else (bob, alice)
        for n in range(25):
            with callers_transaction(in_transaction):
                ledger_entry_post(
                    idempotency_key=f"move:{i}:{n}",
                    kind="transfer",
                    legs=[Leg.debit(source, 10 + i), Leg.credit(target, 10 + i)],
                )
        return "done"

    results = run_concurrently(transfer_back_and_forth)

    assert results == ["done"] * WRITERS
    # Writers 1,3,5,7 move alice -> bob, writers 0,2,4,6 bob -> alice, 25 times each.
    to_bob = 25 * sum(10 + i for i in range(1, WRITERS, 2))
    to_alice = 25 * sum(10 + i for i in range(0, WRITERS, 2))
    assert account_balance(account_id=alice.pk).posted_minor == 100_000 - to_bob + to_alice
    assert account_balance(account_id=bob.pk).posted_minor == 100_000 + to_bob - to_alice
    assert ledger_verify_report().ok


def _wait_until_waiting_or_done(count, thread):
    """Poll until ``count`` sessions of this database wait for a lock, or ``thread`` has finished
    (a correct lock order may let it through without waiting)."""
    deadline = time.monotonic() + JOIN_TIMEOUT
    while time.monotonic() < deadline and thread.is_alive():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0] >= count:
                return
        time.sleep(0.01)
    assert not thread.is_alive(), f"never saw {count} sessions waiting for a lock"


def interleave(gate, first, second):
    """Force the interleaving that busy writers produce only by chance: a third session holds the
    ``gate`` account row; ``first`` runs until it waits for the gate, ``second`` runs until it waits
    too, then the gate opens. Returns {"first": result or error, "second": result or error}."""
    gate_locked, release_gate = threading.Event(), threading.Event()
    outcomes = {}

    def hold_gate():
        try:
            with transaction.atomic():
                list(Account.objects.select_for_update().filter(pk=gate.pk))
                gate_locked.set()
                release_gate.wait(JOIN_TIMEOUT)
        finally:
            connection.close()

    def run(name, call):
        try:
            outcomes[name] = call()
        except Exception as exc:  # a deadlock victim, or a refusal the test inspects
            outcomes[name] = exc
        finally:
            connection.close()

    locker = threading.Thread(target=hold_gate)
    locker.start()
    assert gate_locked.wait(JOIN_TIMEOUT)
    threads = [locker]
    for waiting, (name, call) in enumerate([("first", first), ("second", second)], start=1):
        threads.append(threading.Thread(target=run, args=(name, call)))
        threads[-1].start()
        _wait_until_waiting_or_done(waiting, threads[-1])
    release_gate.set()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


def test_a_hold_commit_and_a_plain_post_on_the_same_accounts_do_not_deadlock(db):
    # Ids in creation order: gate < low < budget. The commit takes budget -> (gate, low), the post
    # low -> budget. The commit's hold release locks budget; the gate then stops it before its
    # postings lock gate and low, while the post locks low and waits for budget.
    gate = AccountFactory(code="platform:fees:EUR")
    low = AccountFactory(code="brand:1:funds:EUR")
    budget = fund(BudgetAccountFactory(), 10_000, source=AccountFactory(code="equity:EUR", kind="equity"))
    held = hold(budget, 1_000, key="hold:1")

    def commit():
        return ledger_hold_commit(
            hold=held,
            idempotency_key="reward:1:approve",
            kind="reward_approve",
            legs=[Leg.debit(budget, 1_000), Leg.credit(gate, 100), Leg.credit(low, 900)],
        )

    def post():
        # Inside the caller's transaction, as every business service posts (STYLE 4): no retry
        # can hide a deadlock there.
        with transaction.atomic(durable=True):
            return ledger_entry_post(
                idempotency_key="allocate:1", kind="allocate", legs=[Leg.debit(low, 500), Leg.credit(budget, 500)]
            )

    outcomes = interleave(gate, commit, post)

    assert not isinstance(outcomes["first"], Exception), outcomes["first"]
    assert not isinstance(outcomes["second"], Exception), outcomes["second"]
    assert ledger_verify_report().ok


def test_expiring_holds_and_committing_one_of_them_do_not_deadlock(db):
    # Hold ids in creation order: h1 (budget) < on_gate (gate) < h2 (budget), all due. Expiry locks
    # h1 and budget, then waits at the gate; the commit of h2 locks h2 and waits for budget.
    equity = AccountFactory(code="equity:EUR", kind="equity")
    budget = fund(BudgetAccountFactory(), 10_000, source=equity)
    gate = fund(BudgetAccountFactory(), 10_000, source=equity)
    payable = AccountFactory(code="recipient:1:payable:EUR")
    due = timezone.now() - timedelta(minutes=1)
    h1, on_gate, h2 = (
        hold(account, 1_000, key=key, expires_at=due)
        for key, account in [("hold:1", budget), ("hold:gate", gate), ("hold:2", budget)]
    )

    def expire():
        return ledger_holds_expire()

    def commit():
        return ledger_hold_commit(
            hold=h2,
            idempotency_key="reward:2:approve",
            kind="reward_approve",
            legs=[Leg.debit(budget, 1_000), Leg.credit(payable, 1_000)],
        )

    outcomes = interleave(gate, expire, commit)

    # Either may win the race for h2; the loser may only fail because of the hold's own state.
    expired, committed = outcomes["first"], outcomes["second"]
    assert not isinstance(expired, Exception), expired
    assert not isinstance(committed, Exception) or isinstance(committed, HoldNotPending), committed
    h2.refresh_from_db()
    assert h2.status == (HoldStatus.EXPIRED if isinstance(committed, HoldNotPending) else HoldStatus.COMMITTED)
    assert Hold.objects.filter(pk__in=[h1.pk, on_gate.pk], status=HoldStatus.EXPIRED).count() == 2
    assert ledger_verify_report().ok
