"""A/B of two commits on this machine: each benchmark run for OLD and NEW alternately (old, new,
old, new, …), every run on a fresh PostgreSQL database, best run per phase, new/old per phase.

Run: ``python -m bench.ab OLD NEW [--n 2000] [--api N] [--ledger N] [--rounds 2]`` or
``make bench-ab OLD=4702ea0 NEW=HEAD ARGS="--n 2000"``. OLD and NEW are git refs, resolved
once at the start (a branch that moves meanwhile does not change the run); each is checked out
with ``git worktree add --detach`` under the system temp directory, with this interpreter's
virtualenv linked in as its ``.venv``, and removed at the end (``--keep`` keeps them). Both
sides run with the same interpreter, so only the code differs. Each run's output goes to
``bench-results/ab-logs/``.

``bench.ingest --n N`` always runs; ``--api N`` adds ``bench.api --n N`` and ``--ledger N``
adds ``bench.ledger --n N`` (a multiple of 1,000). A run gets a database of its own, created
from ``--database-url``'s server (default ``DATABASE_URL``, else the local server) and dropped
after it. The figure of a phase is its throughput (events/s, requests/s, transfers/s, reads/s:
higher is better); a phase one side lacks (e.g. bench-ingest's floor before it existed) is
listed with that side blank and no ratio. A run whose checks failed counts for nothing.

Alternating, rather than all old runs then all new ones, spreads the machine's drift (other
work, a warming disk, the load of other sessions) over both sides; best of the rounds drops
the runs that someone else's work slowed most. Only the ratios mean something; a ratio within
the spread of a side's own runs (both are printed) is noise. Each phase's new/old is a target:
≥ 0.9 (issue 26: later changes keep the ingestion phases at ≥ 0.9× of ``4702ea0``, the make
target's default OLD), printed MET / NOT MET. Prints a table and the JSON it writes to
``bench-results/ab.json``.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from bench.common import (
    PROJECT_DIR,
    RESULTS_DIR,
    admin_sql,
    format_table,
    format_targets,
    python_reference_ms,
    target,
    with_database,
    write_results,
)

# Throughput keys of a phase's figures, by preference: the first one present is the phase's figure.
RATE_KEYS = {
    "ingest": ("events_per_s",),
    "api": ("req_per_s", "events_per_s"),
    # W2 is a hot account that refuses once drained: its figure is the attempts, as in its target.
    "ledger": ("reads_per_s", "ok_per_s"),
}
RATE_OVERRIDES = {("ledger", "W2"): "attempts_per_s"}
RUN_TIMEOUT_S = 1800
# new/old a phase must keep (issue 26, against the baseline 4702ea0).
RATIO_TARGET = 0.9


@dataclass
class Side:
    label: str  # "old" or "new"
    ref: str
    commit: str
    tree: Path | None = None


@dataclass(frozen=True)
class Bench:
    name: str
    module: str
    n: int


def git(*args: str, cwd: Path = PROJECT_DIR) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def phase_rates(bench: str, results: dict) -> dict[str, tuple[str, float]]:
    """phase → (figure's key, value) for every phase of a result file that has a throughput."""
    rates = {}
    for phase, figures in results.items():
        if not isinstance(figures, dict):
            continue
        keys = (RATE_OVERRIDES[(bench, phase)],) if (bench, phase) in RATE_OVERRIDES else RATE_KEYS[bench]
        for key in keys:
            if isinstance(figures.get(key), int | float):
                rates[phase] = (key, float(figures[key]))
                break
    return rates


def run_one(side: Side, bench: Bench, *, server_url: str, python: str, log_dir: Path, round_no: int) -> dict:
    """One benchmark run of one side on a database of its own; its phases' rates, or why none."""
    if not (side.tree / f"{bench.module.replace('.', '/')}.py").exists():
        return {"missing": True}
    database = f"ab_{bench.name}_{side.label}_{round_no}_{uuid.uuid4().hex[:6]}"
    results_dir = side.tree / "bench-results"
    shutil.rmtree(results_dir, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    env |= {"DATABASE_URL": with_database(server_url, database), "DJANGO_SETTINGS_MODULE": "config.settings.bench"}
    log = log_dir / f"{round_no}-{side.label}-{bench.name}.log"
    admin_sql(server_url, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    began = time.monotonic()
    try:
        with log.open("w") as out:
            proc = subprocess.run(
                [python, "-m", bench.module, "--n", str(bench.n)],
                cwd=side.tree,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=RUN_TIMEOUT_S,
            )
    except subprocess.TimeoutExpired:
        return {"failed": f"timed out after {RUN_TIMEOUT_S} s", "log": str(log)}
    finally:
        admin_sql(server_url, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
    seconds = round(time.monotonic() - began, 1)
    written = sorted(results_dir.glob("*.json")) if results_dir.is_dir() else []
    if proc.returncode != 0 or len(written) != 1:
        return {"failed": f"exit {proc.returncode}, {len(written)} result files", "log": str(log), "s": seconds}
    payload = json.loads(written[0].read_text())
    return {"rates": phase_rates(bench.name, payload.get("results", {})), "s": seconds, "log": str(log)}


def summarise(benches: list[Bench], runs: list[dict]) -> list[dict]:
    """Per bench and phase: each side's runs, its best, and new/old of the bests."""
    rows = []
    for bench in benches:
        phases: dict[str, dict] = {}
        for run in runs:
            if run["bench"] != bench.name:
                continue
            for phase, (key, value) in run.get("rates", {}).items():
                entry = phases.setdefault(phase, {"metric": key, "old": [], "new": []})
                entry[run["side"]].append(value)
        for phase, entry in phases.items():
            old = max(entry["old"], default=None)
            new = max(entry["new"], default=None)
            rows.append(
                {
                    "bench": bench.name,
                    "phase": phase,
                    "metric": entry["metric"],
                    "old_runs": entry["old"],
                    "new_runs": entry["new"],
                    "old_best": old,
                    "new_best": new,
                    "new_over_old": round(new / old, 3) if old and new is not None else None,
                }
            )
    return rows


def worktree_add(side: Side, parent: Path) -> None:
    side.tree = parent / f"{side.label}-{side.commit[:10]}"
    git("worktree", "add", "--detach", str(side.tree), side.commit)
    if sys.prefix != sys.base_prefix:
        # bench.api starts the worktree's .venv/bin/gunicorn: the same virtualenv as this interpreter.
        (side.tree / ".venv").symlink_to(Path(sys.prefix))


def worktree_remove(side: Side) -> None:
    venv = side.tree / ".venv"
    if venv.is_symlink():
        venv.unlink()  # the link only, before git removes what is left of the tree
    git("worktree", "remove", "--force", str(side.tree))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="git ref of the baseline, e.g. 4702ea0")
    parser.add_argument("new", help="git ref to compare with it, e.g. main")
    parser.add_argument("--n", type=int, default=2000, help="bench.ingest --n (default 2000)")
    parser.add_argument("--api", type=int, metavar="N", help="also bench.api --n N")
    parser.add_argument("--ledger", type=int, metavar="N", help="also bench.ledger --n N (a multiple of 1,000)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per side, alternated (default 2)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL server to create each run's database on (its database name is only connected to)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the worktrees")
    args = parser.parse_args(argv)
    benches = [Bench("ingest", "bench.ingest", args.n)]
    if args.api:
        benches.append(Bench("api", "bench.api", args.api))
    if args.ledger:
        benches.append(Bench("ledger", "bench.ledger", args.ledger))
    sides = [
        Side(label, ref, git("rev-parse", "--verify", f"{ref}^{{commit}}"))
        for label, ref in (("old", args.old), ("new", args.new))
    ]
    parent = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    log_dir = RESULTS_DIR / "ab-logs"
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    python = sys.executable
    runs: list[dict] = []
    load_at_start = os.getloadavg()
    try:
        for side in sides:
            worktree_add(side, parent)
        # Per round and benchmark, old then new: the two runs compared are neighbours in time.
        for round_no in range(1, args.rounds + 1):
            for bench in benches:
                for side in sides:
                    label = f"round {round_no}, {side.label} ({side.commit[:10]}), {bench.module} --n {bench.n}"
                    print(f"{label} …", flush=True)
                    load = os.getloadavg()
                    outcome = run_one(
                        side, bench, server_url=args.database_url, python=python, log_dir=log_dir, round_no=round_no
                    )
                    if "failed" in outcome:
                        print(f"  FAILED ({outcome['failed']}): not counted; log {outcome['log']}", flush=True)
                    elif "missing" in outcome:
                        print(f"  {bench.module} does not exist at {side.commit[:10]}: skipped", flush=True)
                    else:
                        summary = ", ".join(f"{p} {v:,.1f}" for p, (_, v) in outcome["rates"].items())
                        print(f"  {outcome['s']} s: {summary}", flush=True)
                    runs.append(
                        {"round": round_no, "side": side.label, "bench": bench.name, "load_average": load, **outcome}
                    )
    finally:
        if not args.keep:
            for side in sides:
                if side.tree is not None:
                    worktree_remove(side)
            shutil.rmtree(parent, ignore_errors=True)

    rows = summarise(benches, runs)
    targets = [
        target(f"{r['bench']}.{r['phase']} new/old", r["new_over_old"], unit="ratio", target=RATIO_TARGET)
        for r in rows
        if r["old_best"] is not None and r["new_best"] is not None
    ]
    with psycopg.connect(args.database_url) as conn:
        postgres = conn.execute("SHOW server_version").fetchone()[0]
    payload = {
        "meta": {
            "old": {"ref": args.old, "commit": sides[0].commit},
            "new": {"ref": args.new, "commit": sides[1].commit},
            "benches": {b.name: {"module": b.module, "n": b.n} for b in benches},
            "rounds": args.rounds,
            "order": "per round and benchmark, old then new; each run on a fresh database",
            "best_of": "the highest figure of a side's runs whose checks passed",
            "cpus": os.cpu_count(),
            "postgres": postgres,
            "python": sys.version.split()[0],
            "python_reference_ms": python_reference_ms(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": os.getloadavg(),
        },
        "phases": rows,
        "runs": runs,
        "targets": targets,
    }
    path = write_results("ab", payload)

    def runs_text(values: list[float]) -> str:
        return " / ".join(f"{v:,.1f}" for v in values) if values else "-"

    print()
    print(f"old {args.old} = {sides[0].commit[:10]}, new {args.new} = {sides[1].commit[:10]}, best of {args.rounds}")
    table = [
        (r["bench"], r["phase"], r["metric"], runs_text(r["old_runs"]), runs_text(r["new_runs"]))
        + (r["old_best"], r["new_best"], r["new_over_old"])
        for r in rows
    ]
    print(format_table(["bench", "phase", "figure", "old runs", "new runs", "old best", "new best", "new/old"], table))
    print()
    print(format_targets(targets))
    print()
    print(json.dumps({r["bench"] + "." + r["phase"]: r["new_over_old"] for r in rows}, indent=2))
    print(f"Written {path.relative_to(path.parent.parent)}", flush=True)
    failed = [r for r in runs if "failed" in r]
    if failed:
        print(f"{len(failed)} run(s) failed and were not counted.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
