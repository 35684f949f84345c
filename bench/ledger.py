"""Ledger benchmark: the workloads of /work/shared/bench/LEDGER_WORKLOADS.md (W1 single and 8
processes, W2 hot no-overdraft account, W3 balance reads, W4 batched postings), run through the
ledger's public services on PostgreSQL, checked after each phase, printed as a table and written
to ``bench-results/ledger.json``.

Run: ``make bench-ledger`` (``DATABASE_URL`` names the database; its ledger tables are truncated).
``--n`` runs a smaller smoke version that writes ``bench-results/ledger-smoke.json`` instead.

It is a benchmark, not a test: it never fails on a time. It exits non-zero only when a correctness
check fails, because figures from such a run are not figures.
"""

import argparse
import multiprocessing
import os
import sys
import time
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
django.setup()

from django.apps import apps  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402

from bench.common import (  # noqa: E402
    format_table,
    format_targets,
    latency_ms,
    meta,
    pg_test_fsync_rate,
    rate_by_thirds,
    target,
    write_results,
)
from core.exceptions import InsufficientFunds  # noqa: E402
from reconciliation.models import Account, AccountKind, JournalEntry, Posting  # noqa: E402
from reconciliation.selectors import account_balance, ledger_verify_report  # noqa: E402
from reconciliation.services import EntrySpec, Leg, ledger_entries_post, ledger_entry_post  # noqa: E402

N = 20_000
ACCOUNTS = 1_000  # k = i mod 1000 picks the accounts
WORKERS = 8
AMOUNT = 100  # 1.00 EUR in minor units
CURRENCY = "EUR"
W1_FUNDING = 2_000  # 20.00 EUR per source account
BATCH = 1_000  # W4: transfers per database transaction
BARRIER_TIMEOUT_S = 300
TRANSFER_KIND = "bench_transfer"

# The peer's figures on this machine class (LEDGER_WORKLOADS.md, midpoints of its two runs), used
# as the baseline for the ratio targets unless the peer was measured in the same run.
PEER_SPEC_MIDPOINTS = {
    "source": "LEDGER_WORKLOADS.md, midpoints of the published ranges (not measured in this run)",
    "W1_single_per_s": 595.0,
    "W1_concurrent_per_s": 1160.0,
    "W2_attempts_per_s": 139.5,
    "W3_reads_per_s": 690.0,
}

OK, REFUSED, ERROR = "ok", "refused", "error"


# --- setup (untimed) -----------------------------------------------------------------------------


def ledger_tables() -> list[str]:
    return [model._meta.db_table for model in apps.get_app_config("reconciliation").get_models()]


def reset_books() -> None:
    """Empty ledger tables. TRUNCATE is allowed: the append-only triggers are row-level."""
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(ledger_tables())} RESTART IDENTITY CASCADE")


def analyze_books() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(ledger_tables())}")


def create_accounts(prefix: str, count: int, *, kind: AccountKind, allow_overdraft: bool = False) -> list[Account]:
    """``count`` fresh accounts in one INSERT (setup is untimed; the balances start at zero as the
    account guard trigger demands), returned in index order."""
    Account.objects.bulk_create(
        [
            Account(
                code=f"bench:{prefix}:{k}:{CURRENCY}",
                name=f"bench {prefix} {k}",
                kind=kind,
                currency=CURRENCY,
                allow_overdraft=allow_overdraft,
            )
            for k in range(count)
        ]
    )
    by_code = {a.code: a for a in Account.objects.filter(code__startswith=f"bench:{prefix}:")}
    return [by_code[f"bench:{prefix}:{k}:{CURRENCY}"] for k in range(count)]


def create_account(code: str, *, kind: AccountKind, allow_overdraft: bool = False) -> Account:
    return create_accounts(code, 1, kind=kind, allow_overdraft=allow_overdraft)[0]


@dataclass
class DisjointBooks:
    """W1/W4 accounts: equity E funds every S[k]; transfer i moves S[k] → D[k]."""

    equity: Account
    sources: list[Account]
    destinations: list[Account]


def setup_disjoint(run: str, phase: str) -> DisjointBooks:
    reset_books()
    equity = create_account(f"{phase}:E", kind=AccountKind.EQUITY, allow_overdraft=True)
    sources = create_accounts(f"{phase}:S", ACCOUNTS, kind=AccountKind.ASSET)
    destinations = create_accounts(f"{phase}:D", ACCOUNTS, kind=AccountKind.ASSET)
    ledger_entries_post(
        entries=[
            EntrySpec(
                idempotency_key=f"{run}:{phase}:fund:{k}",
                kind="bench_funding",
                legs=[Leg.debit(source, W1_FUNDING), Leg.credit(equity, W1_FUNDING)],
            )
            for k, source in enumerate(sources)
        ],
        all_or_nothing=True,
    )
    analyze_books()
    return DisjointBooks(equity=equity, sources=sources, destinations=destinations)


@dataclass
class HotBooks:
    """W2 accounts: equity E funds the no-overdraft budget F; attempt i moves F → R[k]."""

    equity: Account
    funding: Account
    recipients: list[Account]


def setup_hot(run: str, *, funded_minor: int) -> HotBooks:
    reset_books()
    equity = create_account("W2:E", kind=AccountKind.EQUITY, allow_overdraft=True)
    funding = create_account("W2:F", kind=AccountKind.LIABILITY, allow_overdraft=False)
    recipients = create_accounts("W2:R", ACCOUNTS, kind=AccountKind.LIABILITY)
    ledger_entry_post(
        idempotency_key=f"{run}:W2:fund",
        kind="bench_funding",
        legs=[Leg.debit(equity, funded_minor), Leg.credit(funding, funded_minor)],
    )
    analyze_books()
    return HotBooks(equity=equity, funding=funding, recipients=recipients)


# --- timed transfers in worker processes ---------------------------------------------------------


@dataclass
class WorkerResult:
    worker: int
    start: float = 0.0
    end: float = 0.0
    latencies: list[float] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    error_samples: list[str] = field(default_factory=list)
    crashed: str = ""


def _transfer_worker(
    worker: int,
    workers: int,
    n: int,
    pairs: Sequence[tuple[int, int]],
    key_prefix: str,
    barrier,
    out,
) -> None:
    """Worker ``worker`` posts transfers i ≡ worker (mod workers) in increasing order, one
    transaction each, through ``ledger_entry_post``; ``pairs[k]`` is (debited id, credited id).
     Its Django connection is its own: the parent
    closed every connection before forking, so the first query here opens a fresh one."""
    result = WorkerResult(worker=worker)
    try:
        accounts = Account.objects.in_bulk({account_id for pair in pairs for account_id in pair})
        legs_by_k = [[Leg.debit(accounts[dr], AMOUNT), Leg.credit(accounts[cr], AMOUNT)] for dr, cr in pairs]
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
        result.start = time.monotonic()
        for i in range(worker, n, workers):
            legs = legs_by_k[i % len(pairs)]
            key = f"{key_prefix}:{i}"
            began = time.monotonic()
            try:
                posted = ledger_entry_post(idempotency_key=key, kind=TRANSFER_KIND, legs=legs)
                outcome = ERROR if posted.replayed else OK
            except InsufficientFunds:
                outcome = REFUSED
            except Exception as exc:  # a benchmark counts every other failure as an error and goes on
                outcome = ERROR
                if len(result.error_samples) < 5:
                    result.error_samples.append(f"{key}: {type(exc).__name__}: {exc}")
            done = time.monotonic()
            result.latencies.append(done - began)
            result.outcomes.append(outcome)
            result.ends.append(done)
        result.end = time.monotonic()
    except BaseException:  # the parent must hear about a crash, or it would wait forever
        result.crashed = traceback.format_exc()
        barrier.abort()
    finally:
        connection.close()
        out.put(result)


def run_transfers(*, workers: int, n: int, pairs: Sequence[tuple[int, int]], key_prefix: str) -> dict:
    """Fork ``workers`` processes, release them together, and aggregate their timings into the
    spec's result shape (checks are added by the caller)."""
    context = multiprocessing.get_context("fork")
    # No connection may cross the fork: two processes on one socket corrupt each other.
    connections.close_all()
    barrier = context.Barrier(workers)
    out = context.Queue()
    processes = [
        context.Process(target=_transfer_worker, args=(w, workers, n, pairs, key_prefix, barrier, out))
        for w in range(workers)
    ]
    for process in processes:
        process.start()
    results: list[WorkerResult] = [out.get() for _ in processes]
    for process in processes:
        process.join()
    crashed = [r.crashed for r in results if r.crashed]
    if crashed:
        raise RuntimeError("A benchmark worker crashed:\n" + "\n".join(crashed))

    start = min(r.start for r in results)
    end = max(r.end for r in results)
    outcomes = [o for r in results for o in r.outcomes]
    latencies = [t for r in results for t in r.latencies]
    ok_ends = [t for r in results for o, t in zip(r.outcomes, r.ends, strict=True) if o == OK]
    wall = end - start
    ok = outcomes.count(OK)
    return {
        "workers": workers,
        "attempts": len(outcomes),
        "ok": ok,
        "refused": outcomes.count(REFUSED),
        "errors": outcomes.count(ERROR),
        "wall_s": round(wall, 3),
        "attempts_per_s": round(len(outcomes) / wall, 1),
        "ok_per_s": round(ok / wall, 1),
        "latency_all": latency_ms(latencies),
        "ok_per_s_by_third": rate_by_thirds(ok_ends, start=start, end=end),
        # When refusals follow the successes (W2: F runs dry after 75 % of the attempts), the last
        # third of the run is mostly refusals; decay is judged on the window that holds the successes.
        "ok_per_s_by_third_of_ok_window": rate_by_thirds(ok_ends, start=start, end=max(ok_ends, default=start)),
        "attempts_per_s_by_third": rate_by_thirds([t for r in results for t in r.ends], start=start, end=end),
        "error_samples": [s for r in results for s in r.error_samples][:5],
    }


# --- checks --------------------------------------------------------------------------------------


def books_figures() -> dict:
    """Independent SQL over the postings (not the code under test): counts, debits vs credits,
    entries that do not balance per currency, and accounts whose stored balance differs from the
    sum of their postings."""
    post, acc = Posting._meta.db_table, Account._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*), COALESCE(SUM(amount_minor) FILTER (WHERE amount_minor > 0), 0), "
            f"COALESCE(-SUM(amount_minor) FILTER (WHERE amount_minor < 0), 0) FROM {post}"
        )
        postings, debits, credits = cursor.fetchone()
        cursor.execute(
            f"SELECT COUNT(*) FROM (SELECT entry_id FROM {post} GROUP BY entry_id, currency "
            f"HAVING SUM(amount_minor) <> 0) AS bad"
        )
        unbalanced = cursor.fetchone()[0]
        cursor.execute(
            f"""SELECT COUNT(*) FROM {acc} a
                  LEFT JOIN (SELECT account_id, SUM(amount_minor) AS total FROM {post} GROUP BY account_id) s
                    ON s.account_id = a.id
                 WHERE a.posted_minor <> CASE WHEN a.kind IN ('asset', 'expense') THEN COALESCE(s.total, 0)
                                              ELSE -COALESCE(s.total, 0) END"""
        )
        drifted = cursor.fetchone()[0]
    return {
        "entries": JournalEntry.objects.count(),
        "postings": postings,
        "debits_minor": debits,
        "credits_minor": credits,
        "unbalanced_entries": unbalanced,
        "balances_differing_from_postings": drifted,
    }


def common_checks(figures: dict, *, entries: int) -> dict:
    return {
        f"entries_{entries}": figures["entries"] == entries,
        f"postings_{2 * entries}": figures["postings"] == 2 * entries,
        "debits_equal_credits": figures["debits_minor"] == figures["credits_minor"],
        "no_entry_unbalanced_per_currency": figures["unbalanced_entries"] == 0,
        "balances_equal_sums_of_postings": figures["balances_differing_from_postings"] == 0,
        "ledger_verify_report_ok": ledger_verify_report().ok,
    }


def check_disjoint(result: dict, books: DisjointBooks, *, n: int) -> dict:
    per_account = n // ACCOUNTS
    figures = books_figures()
    dest_ids = [a.pk for a in books.destinations]
    source_ids = [a.pk for a in books.sources]
    checks = {
        f"ok_{n}_refused_0_errors_0": (result["ok"], result["refused"], result["errors"]) == (n, 0, 0),
        **common_checks(figures, entries=n + ACCOUNTS),
        "every_D_holds_its_transfers": not Account.objects.filter(pk__in=dest_ids)
        .exclude(posted_minor=per_account * AMOUNT)
        .exists(),
        "every_S_holds_the_rest": not Account.objects.filter(pk__in=source_ids)
        .exclude(posted_minor=W1_FUNDING - per_account * AMOUNT)
        .exists(),
    }
    result["observed"] = figures
    result["checks"] = {**checks, "all_passed": all(checks.values())}
    return result


def check_hot(result: dict, books: HotBooks, *, n: int, funded_minor: int) -> dict:
    expected_ok = min(n, funded_minor // AMOUNT)
    figures = books_figures()
    funding = account_balance(account_id=books.funding.pk)
    recipients_total = sum(
        Account.objects.filter(pk__in=[a.pk for a in books.recipients]).values_list("posted_minor", flat=True)
    )
    checks = {
        f"ok_{expected_ok}": result["ok"] == expected_ok,
        f"refused_{n - expected_ok}": result["refused"] == n - expected_ok,
        "errors_0": result["errors"] == 0,
        "F_at_0.00": (funding.posted_minor, funding.held_minor) == (funded_minor - expected_ok * AMOUNT, 0),
        "recipients_hold_the_successes": recipients_total == expected_ok * AMOUNT,
        # A refusal writes nothing: no entry, no posting beyond the successes and the funding.
        **common_checks(figures, entries=expected_ok + 1),
    }
    result["observed"] = {**figures, "F_posted_minor": funding.posted_minor, "recipients_total_minor": recipients_total}
    result["checks"] = {**checks, "all_passed": all(checks.values())}
    return result


def print_checks(name: str, checks: dict) -> None:
    verdict = "all passed" if checks["all_passed"] else "FAILED"
    listed = ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in checks.items() if k != "all_passed")
    print(f"  checks {name}: {verdict}: {listed}", flush=True)


# --- workloads -----------------------------------------------------------------------------------


def workload_w1(run: str, *, phase: str, workers: int, n: int) -> tuple[dict, DisjointBooks]:
    books = setup_disjoint(run, phase)
    # S and D are assets: money leaving S credits it, money arriving in D debits it.
    pairs = [(d.pk, s.pk) for s, d in zip(books.sources, books.destinations, strict=True)]
    result = run_transfers(workers=workers, n=n, pairs=pairs, key_prefix=f"{run}:{phase}")
    return check_disjoint(result, books, n=n), books


def workload_w2(run: str, *, n: int) -> dict:
    funded = (n * 3 // 4) * AMOUNT  # 15,000.00 EUR for 20,000 attempts
    books = setup_hot(run, funded_minor=funded)
    # F and R are liabilities: money leaving F debits it, money arriving in R credits it.
    pairs = [(books.funding.pk, r.pk) for r in books.recipients]
    result = run_transfers(workers=WORKERS, n=n, pairs=pairs, key_prefix=f"{run}:W2")
    return check_hot(result, books, n=n, funded_minor=funded)


def workload_w3(books: DisjointBooks, *, n: int) -> dict:
    """Read each D[k] once, one call at a time, through the public selector."""
    expected = (n // ACCOUNTS) * AMOUNT
    connection.ensure_connection()
    latencies: list[float] = []
    wrong = 0
    start = time.monotonic()
    for account in books.destinations:
        began = time.monotonic()
        balance = account_balance(account_id=account.pk)
        latencies.append(time.monotonic() - began)
        if (balance.posted_minor, balance.available_minor, balance.currency) != (expected, expected, CURRENCY):
            wrong += 1
    wall = time.monotonic() - start
    checks = {"reads_1000": len(latencies) == ACCOUNTS, "wrong_balances_0": wrong == 0}
    return {
        "workers": 1,
        "reads": len(latencies),
        "wall_s": round(wall, 4),
        "reads_per_s": round(len(latencies) / wall, 1),
        "latency": latency_ms(latencies),
        "wrong_balances": wrong,
        "checks": {**checks, "all_passed": all(checks.values())},
    }


def workload_w4(run: str, *, n: int) -> dict:
    """The W1 transfers through ``ledger_entries_post``, 1,000 per transaction; then one batch again."""
    books = setup_disjoint(run, "W4")
    batches = [
        [
            EntrySpec(
                idempotency_key=f"{run}:W4:{i}",
                kind=TRANSFER_KIND,
                legs=[
                    Leg.debit(books.destinations[i % ACCOUNTS], AMOUNT),
                    Leg.credit(books.sources[i % ACCOUNTS], AMOUNT),
                ],
            )
            for i in range(first, min(first + BATCH, n))
        ]
        for first in range(0, n, BATCH)
    ]
    connection.ensure_connection()
    latencies: list[float] = []
    ok_ends: list[float] = []
    ok = errors = 0
    error_samples: list[str] = []
    start = time.monotonic()
    for batch in batches:
        began = time.monotonic()
        try:
            posted = len(ledger_entries_post(entries=batch, all_or_nothing=True).posted)
        except Exception as exc:  # a benchmark counts a failed batch as errors and goes on
            posted = 0
            error_samples.append(f"{batch[0].idempotency_key}: {type(exc).__name__}: {exc}")
        done = time.monotonic()
        latencies.append(done - began)
        ok += posted
        errors += len(batch) - posted
        ok_ends.extend([done] * posted)
    end = time.monotonic()
    wall = end - start

    entries_before = JournalEntry.objects.count()
    replay = ledger_entries_post(entries=batches[0], all_or_nothing=True)
    replay_posted = len(replay.posted) + (JournalEntry.objects.count() - entries_before)
    result = {
        "workers": 1,
        "attempts": n,
        "ok": ok,
        "refused": 0,
        "errors": errors,
        "wall_s": round(wall, 3),
        "attempts_per_s": round(n / wall, 1),
        "ok_per_s": round(ok / wall, 1),
        "batch_size": BATCH,
        "latency_unit": f"one ledger_entries_post call of {BATCH} transfers",
        "latency_all": latency_ms(latencies),
        "ok_per_s_by_third": rate_by_thirds(ok_ends, start=start, end=end),
        "error_samples": error_samples[:5],
        "replay_posted": replay_posted,
        "replay_replayed": len(replay.replayed),
    }
    check_disjoint(result, books, n=n)
    replay_checks = {
        "replay_posted_0": replay_posted == 0,
        f"replay_replayed_{len(batches[0])}": len(replay.replayed) == len(batches[0]),
    }
    checks = {k: v for k, v in result["checks"].items() if k != "all_passed"} | replay_checks
    result["checks"] = {**checks, "all_passed": all(checks.values())}
    return result


# --- report --------------------------------------------------------------------------------------


def ratio(value: float | None, baseline: float | None) -> float | None:
    if value is None or not baseline:
        return None
    return round(value / baseline, 2)


def build_targets(results: dict, peer: dict) -> list[dict]:
    w1s, w1c, w2, w3, w4 = (results[k] for k in ("W1_single", "W1_concurrent", "W2", "W3", "W4"))

    def valid(result: dict, value: float) -> float | None:
        # Figures from a phase whose checks failed are not figures.
        return value if result["checks"]["all_passed"] else None

    first, _, last = w2["ok_per_s_by_third_of_ok_window"]
    return [
        target(
            "W1_single_vs_peer",
            ratio(valid(w1s, w1s["ok_per_s"]), peer["W1_single_per_s"]),
            unit="x peer transfers/s",
            target=2,
        ),
        target(
            "W1_concurrent_vs_peer",
            ratio(valid(w1c, w1c["ok_per_s"]), peer["W1_concurrent_per_s"]),
            unit="x peer transfers/s",
            target=2,
        ),
        target(
            "W2_vs_peer",
            ratio(valid(w2, w2["attempts_per_s"]), peer["W2_attempts_per_s"]),
            unit="x peer attempts/s",
            target=10,
        ),
        target(
            "W2_no_decay",
            ratio(valid(w2, last), first),
            unit="successes/s, last third / first third of the successes' window",
            target=0.8,
        ),
        target(
            "W3_vs_peer",
            ratio(valid(w3, w3["reads_per_s"]), peer["W3_reads_per_s"]),
            unit="x peer reads/s",
            target=10,
        ),
        target("W4_batched", valid(w4, w4["ok_per_s"]), unit="transfers/s", target=10_000),
    ]


def print_report(payload: dict) -> None:
    m, r = payload["meta"], payload["results"]
    fsync = m["pg_test_fsync_fdatasync_ops_per_s"]
    print()
    print(
        f"Ledger benchmark  n={payload['n']:,}  cpus={m['cpus']}  "
        f"pg_test_fsync fdatasync={'n/a' if fsync is None else f'{fsync:,.0f} ops/s'}  "
        f"PostgreSQL {m['postgres']}  commit {m['git_commit']}"
    )
    rows = []
    for name in ("W1_single", "W1_concurrent", "W2", "W4"):
        x = r[name]
        rows.append(
            (
                name,
                x["workers"],
                x["attempts"],
                x["ok"],
                x["refused"],
                x["errors"],
                x["wall_s"],
                x["attempts_per_s"],
                x["ok_per_s"],
                x["latency_all"]["p50_ms"],
                x["latency_all"]["p99_ms"],
                " / ".join(f"{v:,.0f}" for v in x["ok_per_s_by_third"]),
                "pass" if x["checks"]["all_passed"] else "FAIL",
            )
        )
    w3 = r["W3"]
    rows.append(
        (
            "W3 (reads)",
            1,
            w3["reads"],
            w3["reads"] - w3["wrong_balances"],
            0,
            w3["wrong_balances"],
            w3["wall_s"],
            w3["reads_per_s"],
            w3["reads_per_s"],
            w3["latency"]["p50_ms"],
            w3["latency"]["p99_ms"],
            "",
            "pass" if w3["checks"]["all_passed"] else "FAIL",
        )
    )
    headers = ["workload", "procs", "attempts", "ok", "refused", "errors", "wall s", "att/s", "ok/s"]
    headers += ["p50 ms", "p99 ms", "ok/s by third", "checks"]
    print(format_table(headers, rows))
    print(f"(W4 latency is per call of {BATCH:,} transfers; replaying one W4 batch posted {r['W4']['replay_posted']})")
    print()
    print(f"Peer baseline: {payload['peer']['source']}")
    print(format_targets(payload["targets"]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=N, help="transfers per workload (the spec's is 20000; less: smoke)")
    args = parser.parse_args(argv)
    n = args.n
    if n <= 0 or n % ACCOUNTS:
        parser.error(f"--n must be a positive multiple of {ACCOUNTS}")
    run = uuid.uuid4().hex[:8]
    call_command("migrate", verbosity=0)  # as the other benchmarks: a fresh database works too

    print("Measuring pg_test_fsync (fdatasync, 1 s) …", flush=True)
    fsync = pg_test_fsync_rate()
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
        cursor.execute("SHOW synchronous_commit")
        synchronous_commit = cursor.fetchone()[0]
        cursor.execute("SHOW fsync")
        fsync_setting = cursor.fetchone()[0]
    run_meta = meta(
        postgres_version=postgres,
        fsync_rate=fsync,
        database=connection.settings_dict["NAME"],
        synchronous_commit=synchronous_commit,
        fsync=fsync_setting,
        run_id=run,
    )
    print(f"cpus={run_meta['cpus']}  fdatasync={fsync} ops/s  PostgreSQL {postgres}", flush=True)

    results: dict = {}
    print("W1 single process …", flush=True)
    results["W1_single"], _ = workload_w1(run, phase="W1s", workers=1, n=n)
    print_checks("W1_single", results["W1_single"]["checks"])
    print(f"W1 {WORKERS} processes …", flush=True)
    results["W1_concurrent"], w1_books = workload_w1(run, phase="W1c", workers=WORKERS, n=n)
    print_checks("W1_concurrent", results["W1_concurrent"]["checks"])
    print("W3 balance reads …", flush=True)
    results["W3"] = workload_w3(w1_books, n=n)
    print_checks("W3", results["W3"]["checks"])
    print(f"W2 hot no-overdraft account, {WORKERS} processes …", flush=True)
    results["W2"] = workload_w2(run, n=n)
    print_checks("W2", results["W2"]["checks"])
    print(f"W4 batched, {BATCH:,} per transaction …", flush=True)
    results["W4"] = workload_w4(run, n=n)
    print_checks("W4", results["W4"]["checks"])

    peer = PEER_SPEC_MIDPOINTS
    payload = {
        "n": n,
        "meta": run_meta,
        "results": results,
        "peer": peer,
        "targets": build_targets(results, peer),
        "all_checks_passed": all(x["checks"]["all_passed"] for x in results.values()),
    }
    path = write_results("ledger" if n == N else "ledger-smoke", payload)
    print_report(payload)
    print(f"\nWritten {path.relative_to(path.parent.parent)}", flush=True)
    if not payload["all_checks_passed"]:
        print("SOME CHECKS FAILED: the figures above are not valid.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
