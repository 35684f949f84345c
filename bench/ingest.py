"""Ingestion benchmark: ``event_ingest`` one event per call with 1 and 8 processes, and
``event_ingest_bulk`` with 1,000 events per call from 1 and from 2 callers at once, on
PostgreSQL, with every rule feature on (fee, IBAN-country condition, per-person count and amount
caps, per-IBAN caps, campaign-wide count caps, all four fraud signals). Every event is a new
person with a new IBAN, so each one resolves a person, encrypts an IBAN, evaluates the caps and
reserves money on the budget.

Last, the database floor (PostgreSQL only, ``bench.ingest_floor``): the rows the bulk phase
writes for as many events, by COPY in one transaction with every constraint and trigger on. Each
phase's events/s divided by the floor's is printed (``÷ floor``) and written (``vs_floor``):
how close the engine comes to what the database alone needs.

Run: ``make bench-ingest`` (``DATABASE_URL`` names the database; it is migrated, nothing is
truncated: each phase uses its own brand and campaign). ``--n`` scales the event counts down
for a smoke run (written to ``bench-results/ingest-smoke.json``).

Checks after each phase: every event was rewarded, the budget holds exactly the sum of the
rewards' reservations, one reward per person and per IBAN, no cap exceeded, the ledger verifies.
The benchmark exits non-zero only when a check fails: figures from such a run are not figures.
"""

import argparse
import os
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count, Sum  # noqa: E402

from bench.common import (  # noqa: E402
    BARRIER_TIMEOUT_S,
    CpuMeter,
    WorkerResult,
    format_table,
    format_targets,
    in_processes,
    latency_ms,
    meta,
    pg_test_fsync_rate,
    reporting,
    target,
    write_results,
)
from bench.ingest_floor import floor_write  # noqa: E402
from campaigns.models import Brand, Campaign, Channel, Plan, Reward, RewardStatus, Trigger, TriggerEvent  # noqa: E402
from campaigns.selectors import campaign_budget  # noqa: E402
from campaigns.services import (  # noqa: E402
    EventInput,
    brand_create,
    brand_topup_record,
    campaign_allocate,
    campaign_create,
    campaign_launch,
    event_ingest,
    event_ingest_bulk,
    rule_create,
)
from core.audit import audit_verify  # noqa: E402
from recipients.models import BankAccount, Identifier, Person  # noqa: E402
from reconciliation.selectors import ledger_verify_report  # noqa: E402

SINGLE_N = 2_000
CONCURRENT_N = 8_000
BULK_CALLS = 10
BULK_SIZE = 1_000
WORKERS = 8
# Concurrent bulk callers: one per core, as a partner's parallel requests meet the API's workers.
BULK_CALLERS = 2
REWARD_MINOR = 500
FEE_FIXED_MINOR = 10
FEE_BPS = 200
FEE_MINOR = FEE_FIXED_MINOR + REWARD_MINOR * FEE_BPS // 10_000
# 0.9 × the 0.22 the bulk phase reached of the floor on the baseline's code (57570dd, README; the
# four commits from there to 4702ea0 leave ingestion alone): the A/B guard's 0.9, in one run.
BULK_VS_FLOOR_TARGET = 0.2
RULE = {
    "trigger": "tiktok_login",
    "fixed_minor": REWARD_MINOR,
    "allowed_iban_countries": ["NL"],
    "person_count_per_day": 1,
    "person_count_per_week": 2,
    "person_count_per_campaign": 3,
    "person_amount_per_week_minor": 5_000,
    "iban_count_per_day": 1,
    "iban_count_per_campaign": 3,
    "campaign_count": 1_000_000,
    "campaign_count_per_day": 1_000_000,
}


def nl_iban(n: int) -> str:
    bban = f"ABNA{n:010d}"
    digits = "".join(str(int(ch, 36)) for ch in f"{bban}NL00")
    return f"NL{98 - int(digits) % 97:02d}{bban}"


def setup_campaign(run: str, phase: str, *, events: int) -> tuple[Brand, Campaign]:
    """A brand with a fee and a launched campaign funded for every event (untimed)."""
    plan, _ = Plan.objects.get_or_create(
        slug=f"bench-{FEE_FIXED_MINOR}-{FEE_BPS}",
        defaults={
            "name": "Bench",
            "triggers": list(Trigger.values),
            "channels": list(Channel.values),
            "fee_fixed_minor": FEE_FIXED_MINOR,
            "fee_bps": FEE_BPS,
            "is_public": False,
        },
    )
    brand = brand_create(name=f"Bench {run} {phase}", slug=f"bench-{run}-{phase}", plan=plan)
    campaign = campaign_create(
        brand=brand, name=phase, slug=phase, mode="joyback", starts_at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    rule_create(campaign=campaign, **RULE)
    budget = events * (REWARD_MINOR + FEE_MINOR)
    brand_topup_record(
        brand=brand,
        amount_minor=budget,
        currency="EUR",
        bank_account_code="NLBENCH",
        idempotency_key=f"bench:{run}:{phase}:topup",
    )
    campaign_allocate(campaign=campaign, amount_minor=budget, idempotency_key=f"bench:{run}:{phase}:alloc")
    campaign_launch(campaign=campaign)
    analyze()
    return brand, campaign


def analyze() -> None:
    """Planner statistics before each phase (untimed), as autovacuum keeps them in a running
    system: tables that grew by thousands of rows since the last phase would otherwise be planned
    as if they were nearly empty (a sequential scan over people looks free then)."""
    with connection.cursor() as cursor:
        for model in (Person, BankAccount, Identifier, TriggerEvent, Reward):
            cursor.execute(f"ANALYZE {model._meta.db_table}")


def payload(run: str, phase: str, i: int, slug: str, base: int) -> EventInput:
    n = base + i
    # IBANs are 10-digit account numbers: shift each run into its own range, or a re-run on the
    # same database would link this run's people to the last run's (same IBAN = same person).
    account = (int(run, 16) % 4_000) * 2_500_000 + n
    return EventInput(
        external_id=f"{run}-{phase}-{i}",
        campaign=slug,
        type="tiktok_login",
        source="tiktok",
        name=f"Person {n}",
        email=f"p{n}.{run}@example.com",
        iban=nl_iban(account),
        social_provider="tiktok",
        social_uid=f"open-{run}-{n}",
        ip=f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}",
        device_fingerprint=f"dev-{run}-{n}",
    )


def _single_worker(worker, workers, n, run, phase, brand_id, slug, base, barrier, out) -> None:
    result = WorkerResult(worker=worker)
    with reporting(result, barrier, out):
        brand = Brand.objects.get(pk=brand_id)
        payloads = [payload(run, phase, i, slug, base) for i in range(worker, n, workers)]
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
        result.start = time.monotonic()
        for p in payloads:
            began = time.monotonic()
            try:
                outcome = event_ingest(brand=brand, payload=p).outcome
            except Exception as exc:  # a benchmark counts every failure and goes on
                outcome = "error"
                if len(result.error_samples) < 5:
                    result.error_samples.append(f"{p.external_id}: {type(exc).__name__}: {exc}")
            result.latencies.append(time.monotonic() - began)
            result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1
        result.end = time.monotonic()


def _outcomes(results: list[WorkerResult]) -> dict[str, int]:
    outcomes: dict[str, int] = {}
    for r in results:
        for k, v in r.outcomes.items():
            outcomes[k] = outcomes.get(k, 0) + v
    return outcomes


def run_single(run: str, phase: str, *, workers: int, n: int, base: int) -> dict:
    brand, campaign = setup_campaign(run, phase, events=n)
    meter = CpuMeter()
    meter.start()
    results = in_processes([(_single_worker, (workers, n, run, phase, brand.pk, campaign.slug, base))] * workers)
    cpu = meter.stop(per=n)
    wall = max(r.end for r in results) - min(r.start for r in results)
    figures = {
        "workers": workers,
        "events": n,
        "outcomes": _outcomes(results),
        "wall_s": round(wall, 3),
        "events_per_s": round(n / wall, 1),
        "latency": latency_ms([t for r in results for t in r.latencies]),
        "error_samples": [s for r in results for s in r.error_samples][:5],
        "cpu_ms_per_event": _cpu_split(cpu),
    }
    figures["checks"] = checks(campaign, expected=n)
    return figures


def _cpu_split(cpu: dict | None) -> dict | None:
    """The ingesting processes (forked workers, joined) and PostgreSQL, ms of CPU per event."""
    return None if cpu is None else {"python": cpu["self"], "postgres": cpu["postgres"]}


def _bulk_worker(worker, callers, calls, size, run, phase, brand_id, slug, base, barrier, out) -> None:
    result = WorkerResult(worker=worker)
    with reporting(result, barrier, out):
        brand = Brand.objects.get(pk=brand_id)
        batches = [
            [payload(run, phase, c * size + i, slug, base) for i in range(size)] for c in range(worker, calls, callers)
        ]
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
        result.start = time.monotonic()
        for batch in batches:
            began = time.monotonic()
            for r in event_ingest_bulk(brand=brand, payloads=batch):
                result.outcomes[r.outcome] = result.outcomes.get(r.outcome, 0) + 1
                if r.error is not None and len(result.error_samples) < 5:
                    result.error_samples.append(f"{r.error.code}: {r.error.message}")
            result.latencies.append(time.monotonic() - began)
        result.end = time.monotonic()


def run_bulk(run: str, phase: str, *, calls: int, size: int, base: int, callers: int) -> dict:
    """``calls`` bulk calls of ``size`` events into one campaign, from ``callers`` processes at
    once (a partner's concurrent requests; the API serves them on as many workers)."""
    brand, campaign = setup_campaign(run, phase, events=calls * size)
    meter = CpuMeter()
    meter.start()
    results = in_processes(
        [(_bulk_worker, (callers, calls, size, run, phase, brand.pk, campaign.slug, base))] * callers
    )
    cpu = meter.stop(per=calls * size)
    wall = max(r.end for r in results) - min(r.start for r in results)
    n = calls * size
    figures = {
        "callers": callers,
        "calls": calls,
        "events_per_call": size,
        "events": n,
        "outcomes": _outcomes(results),
        "wall_s": round(wall, 3),
        "events_per_s": round(n / wall, 1),
        "call_latency": latency_ms([t for r in results for t in r.latencies]),
        "error_samples": [s for r in results for s in r.error_samples][:5],
        "cpu_ms_per_event": _cpu_split(cpu),
    }
    figures["checks"] = checks(campaign, expected=n)
    return figures


def run_floor(run: str, phase: str, *, n: int, base: int) -> dict:
    """The database floor: the bulk phase's rows for ``n`` events by COPY in one transaction."""
    brand, campaign = setup_campaign(run, phase, events=n)
    payloads = [payload(run, phase, i, campaign.slug, base) for i in range(n)]
    figures = floor_write(campaign=campaign, payloads=payloads, amount=REWARD_MINOR, fee=FEE_MINOR)
    figures["call_latency"] = latency_ms([figures["wall_s"]])
    figures["outcomes"], figures["error_samples"] = {"rewarded": n}, []
    result = checks(campaign, expected=n)
    del result["all_passed"]
    # The audit rows' hash chains were built by their triggers, as for the engine's writes.
    result["audit_verified"] = audit_verify().ok
    result["all_passed"] = all(result.values())
    figures["checks"] = result
    return figures


def checks(campaign: Campaign, *, expected: int) -> dict:
    rewards = Reward.objects.filter(campaign=campaign)
    live = rewards.filter(status=RewardStatus.HELD)
    reserved = live.aggregate(t=Sum("amount_minor") + Sum("fee_minor"))["t"] or 0
    budget = campaign_budget(campaign=campaign)
    per_person = rewards.values("person").annotate(n=Count("id")).filter(n__gt=1).count()
    per_iban = rewards.values("iban_fingerprint").annotate(n=Count("id")).filter(n__gt=1).count()
    report = ledger_verify_report()
    result = {
        "events_stored": TriggerEvent.objects.filter(campaign=campaign).count() == expected,
        "all_rewarded": live.count() == expected,
        "budget_held_equals_rewards": budget.held_minor == reserved,
        "no_person_over_cap": per_person == 0,
        "no_iban_over_cap": per_iban == 0,
        "ledger_verified": report.ok,
    }
    result["all_passed"] = all(result.values())
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=CONCURRENT_N, help=f"events for 8 processes ({CONCURRENT_N}: full)")
    parser.add_argument(
        "--no-payout-hooks",
        dest="payout_hooks",
        action="store_false",
        help="turn off payouts' enqueue of a task with each batch's rewards (as in production)",
    )
    args = parser.parse_args(argv)
    # As in production: payouts enqueues a task with each batch's rewards (one per 50 of its
    # people; nothing runs them here, no qcluster is started). Off with --no-payout-hooks.
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = args.payout_hooks
    scale = args.n / CONCURRENT_N
    single_n = max(WORKERS, int(SINGLE_N * scale))
    concurrent_n = args.n
    bulk_calls = max(1, int(BULK_CALLS * scale))
    call_command("migrate", verbosity=0)
    run = uuid.uuid4().hex[:8]
    print("Measuring pg_test_fsync (fdatasync, 1 s) …", flush=True)
    fsync = pg_test_fsync_rate()
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
        cursor.execute("SHOW synchronous_commit")
        synchronous_commit = cursor.fetchone()[0]
    run_meta = meta(
        postgres_version=postgres,
        fsync_rate=fsync,
        database=connection.settings_dict["NAME"],
        synchronous_commit=synchronous_commit,
        run_id=run,
        load_average_at_start=os.getloadavg(),
        payout_enqueue_hooks=args.payout_hooks,
        rule=RULE,
        fraud_signals="campaign defaults (3 people per IBAN, 30 per IP/device per hour, 10 per IBAN per day)",
    )
    print(
        f"cpus={run_meta['cpus']}  fdatasync={fsync} ops/s  PostgreSQL {postgres}  "
        f"python reference loop {run_meta['python_reference_ms']} ms (lower is a faster machine)",
        flush=True,
    )
    results = {}
    print(f"single, 1 process, {single_n} events …", flush=True)
    results["single_1"] = run_single(run, "s1", workers=1, n=single_n, base=0)
    print(f"single, {WORKERS} processes, {concurrent_n} events …", flush=True)
    results["single_8"] = run_single(run, "s8", workers=WORKERS, n=concurrent_n, base=1_000_000)
    print(f"bulk, {bulk_calls} calls of {BULK_SIZE}, 1 caller …", flush=True)
    results["bulk"] = run_bulk(run, "bulk", calls=bulk_calls, size=BULK_SIZE, base=2_000_000, callers=1)
    print(f"bulk, {bulk_calls} calls of {BULK_SIZE}, {BULK_CALLERS} callers at once …", flush=True)
    results[f"bulk_{BULK_CALLERS}"] = run_bulk(
        run, f"bulk{BULK_CALLERS}", calls=bulk_calls, size=BULK_SIZE, base=2_200_000, callers=BULK_CALLERS
    )
    # Last, so the phases before it run on the same database as without it.
    print(f"floor: the bulk phase's rows for {bulk_calls * BULK_SIZE} events, COPY in one transaction …", flush=True)
    results["floor"] = run_floor(run, "floor", n=bulk_calls * BULK_SIZE, base=2_400_000)
    floor_rate = results["floor"]["events_per_s"]
    vs_floor = {name: round(r["events_per_s"] / floor_rate, 3) for name, r in results.items() if name != "floor"}

    # Absolute rates are the machine's; what counts is a ratio. Here, in the same run: the bulk
    # phase over the database floor. Across commits: new/old per phase in an alternated A/B
    # (``make bench-ab``, each phase ≥ 0.9× of the baseline 4702ea0; bench/ab.py prints those).
    targets = [
        target(
            "bulk ingest ÷ floor (1,000 per call, 1 caller)",
            vs_floor["bulk"],
            unit="ratio",
            target=BULK_VS_FLOOR_TARGET,
        ),
    ]
    payload_out = {
        "meta": run_meta,
        "results": results,
        "targets": targets,
        "vs_floor": vs_floor,
        "all_checks_passed": all(r["checks"]["all_passed"] for r in results.values()),
    }
    path = write_results("ingest" if args.n == CONCURRENT_N else "ingest-smoke", payload_out)
    rows = [
        (
            name,
            r.get("workers") or r.get("callers", 1),
            r["events"],
            r["events_per_s"],
            (r.get("latency") or r["call_latency"])["p50_ms"],
            (r.get("latency") or r["call_latency"])["p99_ms"],
            "per call" if "call_latency" in r else "per event",
            "{python} + {postgres}".format(**r["cpu_ms_per_event"]) if r["cpu_ms_per_event"] else "n/a",
            "ok" if r["checks"]["all_passed"] else "FAILED",
            vs_floor.get(name, 1.0),
        )
        for name, r in results.items()
    ]
    print()
    headers = ["phase", "procs", "events", "events/s", "p50 ms", "p99 ms", "latency", "CPU ms/event py+pg", "checks"]
    print(format_table([*headers, "÷ floor"], rows))
    print(f"\nbulk ÷ floor: {vs_floor['bulk']:.3f} (events/s of the bulk phase over the floor's)")
    print(f"\nfloor, {results['floor']['rows_per_event']} rows per event (PostgreSQL COPY, one transaction):")
    floor_tables = results["floor"]["tables"]
    floor_rows = [
        (table, t["rows"], t["ms"], t["us_per_row"], "hash chain" if t["audit_chain"] else "")
        for table, t in floor_tables.items()
    ]
    floor_rows.append(("commit (deferred FK checks, WAL flush)", None, results["floor"]["commit_ms"], None, ""))
    print(format_table(["table", "rows", "ms", "µs/row", "audit"], floor_rows))
    print()
    print(format_targets(targets))
    print("Across commits the A/B counts: make bench-ab (new/old per phase, ≥ 0.9 of 4702ea0).")
    print(f"\nload average at start {run_meta['load_average_at_start']}, at end {os.getloadavg()}")
    print(f"Written {path.relative_to(path.parent.parent)}", flush=True)
    if not payload_out["all_checks_passed"]:
        for name, r in results.items():
            print(name, r["checks"], r["outcomes"], r["error_samples"], file=sys.stderr)
        print("SOME CHECKS FAILED: the figures above are not valid.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
