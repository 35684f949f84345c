"""Ledger benchmark: the workloads of /work/shared/bench/LEDGER_WORKLOADS.md (W1 single and 8
processes, W2 hot no-overdraft account, W3 balance reads, W4 batched postings), run through the
ledger's public services on PostgreSQL, checked after each phase, printed as a table and written
to ``bench-results/ledger.json``.

Run: ``make bench-ledger`` (``DATABASE_URL`` names the database; its ledger tables are truncated).
``--n`` runs a smaller smoke version that writes ``bench-results/ledger-smoke.json`` instead.

The ratio targets compare with the peer, django-hordak. ``--peer`` (``make bench-ledger PEER=1``)
measures it in the same run, each workload right after ours (``bench/peer/ledger.py``, in its own
virtualenv ``.venv-peer`` and its own database, writing ``bench-results/ledger-peer.json``);
without it the ratios are to the peer's published midpoints in LEDGER_WORKLOADS.md.

It is a benchmark, not a test: it never fails on a time. It exits non-zero only when a correctness
check fails, because figures from such a run are not figures.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
django.setup()

from django.apps import apps  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench.common import (  # noqa: E402
    PROJECT_DIR,
    RESULTS_DIR,
    format_table,
    format_targets,
    latency_ms,
    meta,
    pg_test_fsync_rate,
    rate_by_thirds,
    target,
    write_results,
)
from bench.ledger_workloads import (  # noqa: E402
    ACCOUNTS,
    AMOUNT_MINOR,
    CURRENCY,
    ERROR,
    OK,
    REFUSED,
    W1_FUNDING_MINOR,
    WORKERS,
    N,
    format_results,
    load_average,
    print_checks,
    results_name,
    run_transfers,
    w2_funding_minor,
)
from core.exceptions import InsufficientFunds  # noqa: E402
from reconciliation.models import Account, AccountKind, JournalEntry, Posting  # noqa: E402
from reconciliation.selectors import account_balance, ledger_verify_report  # noqa: E402
from reconciliation.services import EntrySpec, Leg, ledger_entries_post, ledger_entry_post  # noqa: E402

BATCH = 1_000  # W4: transfers per database transaction
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
# Each ratio target: workload, our figure, the peer baseline's key, unit, the ratio required.
VERSUS_PEER = (
    ("W1_single", "ok_per_s", "W1_single_per_s", "transfers/s", 2),
    ("W1_concurrent", "ok_per_s", "W1_concurrent_per_s", "transfers/s", 2),
    ("W2", "attempts_per_s", "W2_attempts_per_s", "attempts/s", 10),
    ("W3", "reads_per_s", "W3_reads_per_s", "reads/s", 10),
)
# The peer (django-hordak) runs in a virtualenv of its own: see bench/peer/.
PEER_PYTHON = PROJECT_DIR / ".venv-peer" / "bin" / "python"
PEER_TIMEOUT_S = 1800

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
                legs=[Leg.debit(source, W1_FUNDING_MINOR), Leg.credit(equity, W1_FUNDING_MINOR)],
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


def ledger_transfers(*, workers: int, n: int, pairs: Sequence[tuple[int, int]], key_prefix: str) -> dict:
    """Transfer i posts AMOUNT_MINOR from ``pairs[i mod len(pairs)]`` = (debited id, credited id) through
    ``ledger_entry_post``, one transaction each, with the idempotency key ``key_prefix:i``."""

    def prepare() -> list[list[Leg]]:
        accounts = Account.objects.in_bulk({account_id for pair in pairs for account_id in pair})
        return [[Leg.debit(accounts[dr], AMOUNT_MINOR), Leg.credit(accounts[cr], AMOUNT_MINOR)] for dr, cr in pairs]

    def attempt(legs_by_k: list[list[Leg]], i: int) -> str:
        legs = legs_by_k[i % len(pairs)]
        try:
            posted = ledger_entry_post(idempotency_key=f"{key_prefix}:{i}", kind=TRANSFER_KIND, legs=legs)
        except InsufficientFunds:
            return REFUSED
        return ERROR if posted.replayed else OK

    return run_transfers(workers=workers, n=n, prepare=prepare, attempt=attempt)


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
        .exclude(posted_minor=per_account * AMOUNT_MINOR)
        .exists(),
        "every_S_holds_the_rest": not Account.objects.filter(pk__in=source_ids)
        .exclude(posted_minor=W1_FUNDING_MINOR - per_account * AMOUNT_MINOR)
        .exists(),
    }
    result["observed"] = figures
    result["checks"] = {**checks, "all_passed": all(checks.values())}
    return result


def check_hot(result: dict, books: HotBooks, *, n: int, funded_minor: int) -> dict:
    expected_ok = min(n, funded_minor // AMOUNT_MINOR)
    figures = books_figures()
    funding = account_balance(account_id=books.funding.pk)
    recipients_total = sum(
        Account.objects.filter(pk__in=[a.pk for a in books.recipients]).values_list("posted_minor", flat=True)
    )
    checks = {
        f"ok_{expected_ok}": result["ok"] == expected_ok,
        f"refused_{n - expected_ok}": result["refused"] == n - expected_ok,
        "errors_0": result["errors"] == 0,
        "F_at_0.00": (funding.posted_minor, funding.held_minor) == (funded_minor - expected_ok * AMOUNT_MINOR, 0),
        "recipients_hold_the_successes": recipients_total == expected_ok * AMOUNT_MINOR,
        # A refusal writes nothing: no entry, no posting beyond the successes and the funding.
        **common_checks(figures, entries=expected_ok + 1),
    }
    result["observed"] = {**figures, "F_posted_minor": funding.posted_minor, "recipients_total_minor": recipients_total}
    result["checks"] = {**checks, "all_passed": all(checks.values())}
    return result


# --- workloads -----------------------------------------------------------------------------------


def workload_w1(run: str, *, phase: str, workers: int, n: int) -> tuple[dict, DisjointBooks]:
    books = setup_disjoint(run, phase)
    # S and D are assets: money leaving S credits it, money arriving in D debits it.
    pairs = [(d.pk, s.pk) for s, d in zip(books.sources, books.destinations, strict=True)]
    result = ledger_transfers(workers=workers, n=n, pairs=pairs, key_prefix=f"{run}:{phase}")
    return check_disjoint(result, books, n=n), books


def workload_w2(run: str, *, n: int) -> dict:
    funded = w2_funding_minor(n)
    books = setup_hot(run, funded_minor=funded)
    # F and R are liabilities: money leaving F debits it, money arriving in R credits it.
    pairs = [(books.funding.pk, r.pk) for r in books.recipients]
    result = ledger_transfers(workers=WORKERS, n=n, pairs=pairs, key_prefix=f"{run}:W2")
    return check_hot(result, books, n=n, funded_minor=funded)


def workload_w3(books: DisjointBooks, *, n: int) -> dict:
    """Read each D[k] once, one call at a time, through the public selector."""
    expected = (n // ACCOUNTS) * AMOUNT_MINOR
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
                    Leg.debit(books.destinations[i % ACCOUNTS], AMOUNT_MINOR),
                    Leg.credit(books.sources[i % ACCOUNTS], AMOUNT_MINOR),
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


# --- the peer, measured in the same run ----------------------------------------------------------


def peer_phases_run(*, n: int, run: str, phases: Sequence[str]) -> None:
    """Run the peer's ``phases`` now (``bench/peer/ledger.py``, in its own virtualenv and database);
    it adds their results to its result file of this run. A failed peer run is told, not fatal:
    its missing figures leave the ratios empty."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    command = [str(PEER_PYTHON), "-m", "bench.peer.ledger", "--n", str(n), "--run-id", run]
    command += [f"--phase={phase}" for phase in phases]
    completed = subprocess.run(command, cwd=PROJECT_DIR, env=env, timeout=PEER_TIMEOUT_S)
    if completed.returncode != 0:
        print(f"  peer {', '.join(phases)}: exit {completed.returncode}, its figures are not figures", flush=True)


def peer_measured(*, n: int, run: str) -> dict:
    """The peer baseline from the peer's result file of this run: a workload's figure only where
    the peer ran it in this run and its checks passed (None otherwise: no ratio)."""
    path = RESULTS_DIR / f"{results_name('ledger-peer', n)}.json"
    payload = json.loads(path.read_text()) if path.exists() else {}
    peer_meta = payload.get("meta", {})
    results = payload.get("results", {}) if peer_meta.get("run_id") == run else {}

    def figure(name: str, key: str) -> float | None:
        x = results.get(name)
        return x[key] if x and x["checks"]["all_passed"] else None

    return {
        "source": f"{peer_meta.get('peer', 'the peer')} measured in this run ({path.relative_to(PROJECT_DIR)})",
        **{baseline: figure(name, key) for name, key, baseline, _, _ in VERSUS_PEER},
        "load_average_by_phase": peer_meta.get("load_average_by_phase", {}) if results else {},
    }


# --- report --------------------------------------------------------------------------------------


def ratio(value: float | None, baseline: float | None) -> float | None:
    if value is None or not baseline:
        return None
    return round(value / baseline, 2)


def valid(result: dict, value: float) -> float | None:
    # Figures from a phase whose checks failed are not figures.
    return value if result["checks"]["all_passed"] else None


def build_targets(results: dict, peer: dict) -> list[dict]:
    w2, w4 = results["W2"], results["W4"]
    first, _, last = w2["ok_per_s_by_third_of_ok_window"]
    versus_peer = [
        {
            **target(
                f"{name}_vs_peer",
                ratio(valid(results[name], results[name][key]), peer[baseline]),
                unit=f"x peer {unit}",
                target=required,
            ),
            "baseline": peer["source"],
        }
        for name, key, baseline, unit, required in VERSUS_PEER
    ]
    return [
        *versus_peer,
        target(
            "W2_no_decay",
            ratio(valid(w2, last), first),
            unit="successes/s, last third / first third of the successes' window",
            target=0.8,
        ),
        target("W4_batched", valid(w4, w4["ok_per_s"]), unit="transfers/s", target=10_000),
    ]


def format_versus_peer(payload: dict) -> str:
    """Ours and the peer's figure per workload, side by side, with the 1-minute load average at
    each phase's start (the peer's published midpoints have none)."""
    results, peer = payload["results"], payload["peer"]
    ours_load = payload["meta"]["load_average_by_phase"]
    peer_load = peer.get("load_average_by_phase", {})
    rows = [
        (
            name,
            unit,
            valid(results[name], results[name][key]),
            peer[baseline],
            ratio(valid(results[name], results[name][key]), peer[baseline]),
            ours_load.get(name, [None])[0],
            peer_load.get(name, [None])[0],
        )
        for name, key, baseline, unit, _ in VERSUS_PEER
    ]
    rows.append(("W4", "transfers/s", valid(results["W4"], results["W4"]["ok_per_s"]), None, None, None, None))
    headers = ["workload", "figure", "ours", "peer", "ours/peer", "load ours", "load peer"]
    return format_table(headers, rows) + "\n(the peer has no batch API: W4 has no peer figure)"


def print_report(payload: dict) -> None:
    m, r = payload["meta"], payload["results"]
    fsync = m["pg_test_fsync_fdatasync_ops_per_s"]
    print()
    print(
        f"Ledger benchmark  n={payload['n']:,}  cpus={m['cpus']}  "
        f"pg_test_fsync fdatasync={'n/a' if fsync is None else f'{fsync:,.0f} ops/s'}  "
        f"PostgreSQL {m['postgres']}  commit {m['git_commit']}"
    )
    print(format_results(r, transfers=("W1_single", "W1_concurrent", "W2", "W4")))
    print(f"(W4 latency is per call of {BATCH:,} transfers; replaying one W4 batch posted {r['W4']['replay_posted']})")
    print()
    print(f"Peer baseline: {payload['peer']['source']}")
    print(format_versus_peer(payload))
    print()
    print(format_targets(payload["targets"]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=N, help="transfers per workload (the spec's is 20000; less: smoke)")
    parser.add_argument(
        "--peer",
        action="store_true",
        help="also run django-hordak through W1-W3 in this run, each right after ours, and take the ratios from it "
        "(needs .venv-peer: make bench-ledger PEER=1)",
    )
    args = parser.parse_args(argv)
    n = args.n
    if n <= 0 or n % ACCOUNTS:
        parser.error(f"--n must be a positive multiple of {ACCOUNTS}")
    if args.peer and not PEER_PYTHON.exists():
        parser.error(f"--peer needs the peer's virtualenv {PEER_PYTHON}: make bench-ledger PEER=1 creates it")
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
    loads: dict[str, list[float]] = {}
    run_meta = meta(
        postgres_version=postgres,
        fsync_rate=fsync,
        database=connection.settings_dict["NAME"],
        synchronous_commit=synchronous_commit,
        fsync=fsync_setting,
        run_id=run,
        load_average_by_phase=loads,
    )
    print(f"cpus={run_meta['cpus']}  fdatasync={fsync} ops/s  PostgreSQL {postgres}", flush=True)

    # With --peer, the peer runs each workload right after ours: the two figures of a ratio are
    # neighbours in time on this shared machine, as in bench/ab.py.
    results: dict = {}
    print("W1 single process …", flush=True)
    loads["W1_single"] = load_average()
    results["W1_single"], _ = workload_w1(run, phase="W1s", workers=1, n=n)
    print_checks("W1_single", results["W1_single"]["checks"])
    if args.peer:
        peer_phases_run(n=n, run=run, phases=["W1_single"])
    print(f"W1 {WORKERS} processes …", flush=True)
    loads["W1_concurrent"] = load_average()
    results["W1_concurrent"], w1_books = workload_w1(run, phase="W1c", workers=WORKERS, n=n)
    print_checks("W1_concurrent", results["W1_concurrent"]["checks"])
    print("W3 balance reads …", flush=True)
    loads["W3"] = load_average()
    results["W3"] = workload_w3(w1_books, n=n)
    print_checks("W3", results["W3"]["checks"])
    if args.peer:
        peer_phases_run(n=n, run=run, phases=["W1_concurrent", "W3"])
    print(f"W2 hot no-overdraft account, {WORKERS} processes …", flush=True)
    loads["W2"] = load_average()
    results["W2"] = workload_w2(run, n=n)
    print_checks("W2", results["W2"]["checks"])
    if args.peer:
        peer_phases_run(n=n, run=run, phases=["W2"])
    print(f"W4 batched, {BATCH:,} per transaction …", flush=True)
    loads["W4"] = load_average()
    results["W4"] = workload_w4(run, n=n)
    print_checks("W4", results["W4"]["checks"])
    run_meta["load_average_at_end"] = load_average()

    peer = peer_measured(n=n, run=run) if args.peer else PEER_SPEC_MIDPOINTS
    payload = {
        "n": n,
        "meta": run_meta,
        "results": results,
        "peer": peer,
        "targets": build_targets(results, peer),
        "all_checks_passed": all(x["checks"]["all_passed"] for x in results.values()),
    }
    path = write_results(results_name("ledger", n), payload)
    print_report(payload)
    print(f"\nWritten {path.relative_to(PROJECT_DIR)}", flush=True)
    if not payload["all_checks_passed"]:
        print("SOME CHECKS FAILED: the figures above are not valid.", file=sys.stderr)
        return 1
    if args.peer and any(peer[baseline] is None for _, _, baseline, _, _ in VERSUS_PEER):
        print("The peer's run failed or its checks did: the ratios to it are missing.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
