"""What /work/shared/bench/LEDGER_WORKLOADS.md fixes for every ledger measured, ours
(``bench/ledger.py``) and the peer's (``bench/peer/ledger.py``), so that both are measured the same
way: the sizes and amounts, the timed transfers (``workers`` forked processes, each with its own
database connection, load what they need and wait on one barrier; worker ``w`` then runs the
indices ``i ≡ w (mod workers)`` in increasing order, each call timed on the client's wall clock),
the result shape, and the printed table.

Imports ``django.db`` only (no project app), so the peer's virtualenv runs this very module.
"""

import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, connections

from bench.common import format_table, latency_ms, rate_by_thirds

N = 20_000
ACCOUNTS = 1_000  # k = i mod 1000 picks the accounts
WORKERS = 8
CURRENCY = "EUR"
AMOUNT_MINOR = 100  # every transfer moves 1.00 EUR
W1_FUNDING_MINOR = 2_000  # 20.00 EUR per W1 source account

OK, REFUSED, ERROR = "ok", "refused", "error"
BARRIER_TIMEOUT_S = 300

# A worker's state: what ``prepare`` loaded before the barrier, handed to every ``attempt``.
Prepare = Callable[[], Any]
Attempt = Callable[[Any, int], str]


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


def _transfer_worker(worker: int, workers: int, n: int, prepare: Prepare, attempt: Attempt, barrier, out) -> None:
    """Its Django connection is its own: the parent closed every connection before forking, so the
    first query here opens a fresh one."""
    result = WorkerResult(worker=worker)
    try:
        state = prepare()
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
        result.start = time.monotonic()
        for i in range(worker, n, workers):
            began = time.monotonic()
            try:
                outcome = attempt(state, i)
            except Exception as exc:  # a benchmark counts every other failure as an error and goes on
                outcome = ERROR
                if len(result.error_samples) < 5:
                    result.error_samples.append(f"transfer {i}: {type(exc).__name__}: {exc}")
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


def run_transfers(*, workers: int, n: int, prepare: Prepare, attempt: Attempt) -> dict:
    """Fork ``workers`` processes, release them together, and aggregate their timings into the
    spec's result shape (checks are added by the caller).

    ``prepare()`` runs in each worker before the barrier (untimed); ``attempt(state, i)`` is one
    timed call that returns OK, REFUSED or ERROR (an exception counts as ERROR, with a sample).
    """
    context = multiprocessing.get_context("fork")
    # No connection may cross the fork: two processes on one socket corrupt each other.
    connections.close_all()
    barrier = context.Barrier(workers)
    out = context.Queue()
    processes = [
        context.Process(target=_transfer_worker, args=(w, workers, n, prepare, attempt, barrier, out))
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


def w2_funding_minor(n: int) -> int:
    """What E puts into W2's budget F: 15,000.00 EUR for 20,000 attempts, so a quarter is refused."""
    return (n * 3 // 4) * AMOUNT_MINOR


def results_name(base: str, n: int) -> str:
    """The result file's name: the spec's N writes ``<base>.json``, a smoke run ``<base>-smoke.json``."""
    return base if n == N else f"{base}-smoke"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages: figures from a shared 2-core machine need them beside."""
    return [round(x, 2) for x in os.getloadavg()]


def print_checks(name: str, checks: dict) -> None:
    verdict = "all passed" if checks["all_passed"] else "FAILED"
    listed = ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in checks.items() if k != "all_passed")
    print(f"  checks {name}: {verdict}: {listed}", flush=True)


def format_results(results: dict, *, transfers: Sequence[str]) -> str:
    """The table of one ledger's results: the transfer workloads named, then W3's reads if run."""
    rows = []
    for name in transfers:
        x = results[name]
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
    if "W3" in results:
        w3 = results["W3"]
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
    return format_table(headers, rows)
