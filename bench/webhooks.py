"""Webhooks soak benchmark, on PostgreSQL, with real ``qcluster`` processes:

A brand with 20 endpoints (one loopback receiver on 127.0.0.1, a path per endpoint) and one bulk
call of 1,000 events (``event_ingest_bulk``, as the API's bulk endpoint calls it) — about 20,000
deliveries, the load of issue 14. The clusters do the rest: the commit's kick collects the audit
rows, send tasks POST the deliveries, the minute tick runs as in production.

Phase 1 (soak): every (event id, endpoint) pair arrives exactly once, within 2 minutes of the bulk
call's end; no task runs anywhere near the 60 s task timeout. Phase 2 (stop under load): a second
bulk call, SIGTERM to a cluster's main process while deliveries are being sent — it must stop
within 30 s — then a fresh cluster finishes the work, still exactly once per pair.

Run: ``make bench-webhooks`` (``DATABASE_URL`` names the database, e.g. its own ``bench_hooks``; it
is migrated, the queue emptied, each run uses its own brand). ``--events`` scales it down for a
smoke run (``bench-results/webhooks-smoke.json``). Bounded: every wait has a deadline, the
clusters are stopped at the end (killed if they do not stop), nothing leaves 127.0.0.1. Exits
non-zero when a check fails.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_q.models import OrmQ, Task  # noqa: E402

from bench.common import (  # noqa: E402
    PROJECT_DIR,
    Receiver,
    database_url,
    format_table,
    format_targets,
    latency_ms,
    meta,
    sigterm_and_wait,
    stop_group,
    target,
    write_results,
)
from bench.common import start_qcluster as common_start_qcluster  # noqa: E402
from campaigns.models import WebhookDelivery, WebhookEvent  # noqa: E402
from campaigns.services import (  # noqa: E402
    EventInput,
    brand_create,
    brand_topup_record,
    campaign_allocate,
    campaign_create,
    campaign_launch,
    event_ingest_bulk,
    rule_create,
)
from campaigns.webhooks import webhook_endpoint_create  # noqa: E402
from recipients import crypto  # noqa: E402

EVENTS = 1_000
ENDPOINTS = 20
ARRIVAL_TARGET_S = 120.0
STOP_TARGET_S = 30.0
DRAIN_TIMEOUT_S = 240  # how long a phase waits for its deliveries before it gives up
_LOGS = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))


def start_qcluster(n: int, workers: int) -> subprocess.Popen:
    # A cluster of the webhooks class (settings.Q_ROUTES), as production runs them. The local
    # settings, not the bench ones: they let a webhook go to 127.0.0.1 over http (the production
    # guard refuses both); DEBUG off so the worker does not keep every query.
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DEBUG": "0",
        "DATABASE_URL": database_url(connection.settings_dict),
        "SECRET_KEY": settings.SECRET_KEY,  # task payloads are signed with it
        "FIELD_ENCRYPTION_KEY": crypto._secret("FIELD_ENCRYPTION_KEY"),  # the endpoints' secrets
        "FIELD_FINGERPRINT_KEY": crypto._secret("FIELD_FINGERPRINT_KEY"),
        "WEBHOOK_ALLOW_HTTP": "1",
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": "1",
        "Q_WORKERS": str(workers),
        "Q_CLUSTER_NAME": "webhooks",  # the class whose queue the collection and send tasks go to
        "SANDBOX_STORE_PATH": str(_LOGS / "sandbox.sqlite3"),
    }
    return common_start_qcluster(env=env, log=_LOGS / f"qcluster-{n}.log")


def setup(run: str, events: int, receiver: Receiver) -> tuple:
    brand = brand_create(name=f"Bench webhooks {run}", slug=f"bench-webhooks-{run}")
    campaign = campaign_create(
        brand=brand, name="Bench", slug="bench", mode="joyback", starts_at=timezone.now() - timedelta(days=1)
    )
    # Held for a month: rewards stay held, so no payouts join in (bench-payouts measures those).
    rule_create(
        campaign=campaign, trigger="tiktok_login", fixed_minor=500, hold_days=30, verification="partner_attested"
    )
    funds = 2 * events * 500 * 10  # the budget never nears a threshold: one event type to count
    brand_topup_record(
        brand=brand,
        amount_minor=funds,
        currency="EUR",
        bank_account_code="BENCH",
        idempotency_key=f"bench-webhooks:{run}:topup",
        reference=brand.funding_reference,
    )
    campaign_allocate(campaign=campaign, amount_minor=funds, idempotency_key=f"bench-webhooks:{run}:alloc")
    campaign_launch(campaign=campaign)
    endpoints = [
        webhook_endpoint_create(brand=brand, url=f"{receiver.url}/{i}", event_types=["reward.held"]).endpoint
        for i in range(ENDPOINTS)
    ]
    return brand, campaign, {e.pk: i for i, e in enumerate(endpoints)}


def bulk_call(brand, run: str, phase: int, events: int) -> tuple[float, list[int]]:
    """One bulk call of ``events``; returns when it returned (its transactions committed) and the
    rewards' ids."""
    base = int(run, 16) % 1000 * 100_000 + phase * 10_000
    payloads = [
        EventInput(
            external_id=f"{run}-{phase}-{i}",
            campaign="bench",
            type="tiktok_login",
            source="api",
            name=f"Person {i}",
            whatsapp=f"+39347{base + i:07d}",
        )
        for i in range(events)
    ]
    results = event_ingest_bulk(brand=brand, payloads=payloads)
    return time.time(), [r.reward.pk for r in results if r.reward is not None]


def expected_pairs(brand, endpoint_index: dict[int, int], reward_ids: list[int]) -> set[tuple[int, str]]:
    wanted = set(reward_ids)
    events = {
        e.public_id
        for e in WebhookEvent.objects.filter(brand=brand, type="reward.held").only("public_id", "data")
        if e.data["reward"]["id"] in wanted
    }
    return {
        (endpoint_index[endpoint_id], public_id)
        for endpoint_id, public_id in WebhookDelivery.objects.filter(event__public_id__in=events).values_list(
            "endpoint_id", "event__public_id"
        )
    }


def wait_for(receiver: Receiver, total: int, *, deadline_s: float, alive: Sequence[subprocess.Popen]) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and receiver.count() < total:
        if any(p.poll() is not None for p in alive):
            return
        time.sleep(0.25)
    time.sleep(2)  # late duplicates, if any, are counted too


def phase_figures(receiver: Receiver, start: int, *, pairs_wanted: int, event_ids: set[str], since: float) -> dict:
    arrivals = [a for a in receiver.arrivals[start:] if a[1] in event_ids]
    counts = Counter((endpoint, event_id) for endpoint, event_id, _ in arrivals)
    first = {}
    for endpoint, event_id, at in arrivals:
        first.setdefault((endpoint, event_id), at)
    latencies = [at - since for at in first.values()]
    return {
        "deliveries_expected": pairs_wanted,
        "arrived": len(arrivals),
        "distinct": len(counts),
        "duplicates": sum(c - 1 for c in counts.values()),
        "missing": pairs_wanted - len(counts),
        "latency": latency_ms(latencies),
        "last_arrival_s": round(max(latencies), 2) if latencies else None,
    }


_RAN = re.compile(r" in ([0-9.]+) s$")


def task_figures(since) -> dict:
    """Tasks run since ``since``. django-q2's ``started`` is the enqueue time, so ``stopped -
    started`` is queue wait plus run; the webhook tasks' results say how long they ran."""
    tasks = list(Task.objects.filter(started__gte=since).values_list("func", "started", "stopped", "success", "result"))
    runs = [
        (float(m.group(1)), func)
        for func, *_, result in tasks
        if func.startswith("campaigns.webhook_tasks.") and (m := _RAN.search(str(result)))
    ]
    longest = max(runs, default=(None, None))
    waited = max(((t[2] - t[1]).total_seconds() for t in tasks), default=None)
    return {
        "tasks": len(tasks),
        "failed": sum(1 for t in tasks if not t[3]),
        "by_func": dict(Counter(t[0].rsplit(".", 1)[-1] for t in tasks)),
        "max_task_run_s": longest[0],
        "max_task_run_func": longest[1],
        "max_enqueue_to_done_s": round(waited, 3) if waited is not None else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=EVENTS)
    parser.add_argument("--clusters", type=int, default=2, help="qcluster processes sharing the ORM broker")
    parser.add_argument("--workers", type=int, default=2, help="workers per cluster")
    args = parser.parse_args(argv)
    run = uuid.uuid4().hex[:8]
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
    OrmQ.objects.all().delete()  # tasks left by an earlier, interrupted run would join this one
    # This process registers the endpoints at 127.0.0.1 (the clusters get the same switch).
    settings.WEBHOOK_ALLOW_HTTP = settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    receiver = Receiver()
    brand, _, endpoint_index = setup(run, args.events, receiver)
    started_at = timezone.now()
    clusters = [start_qcluster(n, args.workers) for n in range(args.clusters)]
    try:
        time.sleep(5)  # the clusters' start-up is not part of any delivery's latency
        print(f"phase 1: bulk call of {args.events:,} events → {ENDPOINTS} endpoints …", flush=True)
        t0 = time.time()
        sent_at, rewards = bulk_call(brand, run, 1, args.events)
        print(f"  bulk call {sent_at - t0:.2f} s; waiting for the deliveries …", flush=True)
        total = args.events * ENDPOINTS
        wait_for(receiver, total, deadline_s=DRAIN_TIMEOUT_S, alive=clusters)
        pairs = expected_pairs(brand, endpoint_index, rewards)
        ids = {event_id for _, event_id in pairs}
        soak = phase_figures(receiver, 0, pairs_wanted=len(pairs), event_ids=ids, since=sent_at)
        soak["bulk_call_s"] = round(sent_at - t0, 2)
        soak["events"] = len(ids)

        print("phase 2: another bulk call, SIGTERM to a cluster while it sends …", flush=True)
        mark = receiver.count()
        t1 = time.time()
        sent2_at, rewards2 = bulk_call(brand, run, 2, args.events)
        while receiver.count() - mark < total // 10 and time.time() - sent2_at < 60:
            time.sleep(0.1)
        in_flight = receiver.count() - mark
        stop_s = sigterm_and_wait(clusters[0], limit_s=60)
        print(f"  cluster 0 stopped in {stop_s} s after {in_flight:,} deliveries; a new one takes over …", flush=True)
        clusters[0] = start_qcluster(args.clusters, args.workers)
        wait_for(receiver, mark + total, deadline_s=DRAIN_TIMEOUT_S, alive=clusters)
        pairs2 = expected_pairs(brand, endpoint_index, rewards2)
        ids2 = {event_id for _, event_id in pairs2}
        restart = phase_figures(receiver, mark, pairs_wanted=len(pairs2), event_ids=ids2, since=sent2_at)
        restart["bulk_call_s"] = round(sent2_at - t1, 2)
        restart["events"] = len(ids2)
        restart["delivered_before_sigterm"] = in_flight
        restart["sigterm_to_exit_s"] = stop_s
        final_stops = [sigterm_and_wait(p, limit_s=60) for p in clusters]
    finally:
        for proc in clusters:
            stop_group(proc)
        receiver.server.shutdown()
    tasks = task_figures(started_at)
    queue_rows_left = OrmQ.objects.count()
    checks = {
        "soak_every_pair_once": soak["missing"] == 0 and soak["duplicates"] == 0,
        "soak_one_event_per_reward": soak["events"] == len(rewards) == args.events,
        "restart_every_pair_once": restart["missing"] == 0 and restart["duplicates"] == 0,
        "restart_one_event_per_reward": restart["events"] == len(rewards2) == args.events,
        "no_failed_task": tasks["failed"] == 0,
        "clusters_stopped_on_sigterm": stop_s is not None and all(s is not None for s in final_stops),
    }
    timeout = float(settings.Q_CLUSTER["timeout"])
    targets = [
        target(
            "soak: last delivery after the bulk call",
            soak["last_arrival_s"],
            unit="s",
            target=ARRIVAL_TARGET_S,
            op="<=",
        ),
        target("soak: duplicates", soak["duplicates"], unit="deliveries", target=0, op="<="),
        target("soak: missing", soak["missing"], unit="deliveries", target=0, op="<="),
        target("longest webhook task run", tasks["max_task_run_s"], unit="s", target=timeout / 2, op="<="),
        target("SIGTERM under load → exit", stop_s, unit="s", target=STOP_TARGET_S, op="<="),
        target(
            "restart: duplicates + missing",
            restart["duplicates"] + restart["missing"],
            unit="deliveries",
            target=0,
            op="<=",
        ),
    ]
    payload = {
        "meta": meta(
            postgres_version=postgres,
            database=connection.settings_dict["NAME"],
            run_id=run,
            clusters=args.clusters,
            workers_per_cluster=args.workers,
            endpoints=ENDPOINTS,
            q_cluster={k: settings.Q_CLUSTER.get(k) for k in ("timeout", "retry", "queue_limit", "max_attempts")},
        ),
        "soak": soak,
        "stop_under_load": restart,
        "final_sigterm_s": final_stops,
        "tasks": tasks,
        "queue_rows_left": queue_rows_left,
        "checks": checks,
        "all_checks_passed": all(checks.values()),
        "targets": targets,
    }
    path = write_results("webhooks" if args.events == EVENTS else "webhooks-smoke", payload)
    print(
        format_table(
            ["measure", "soak", "SIGTERM + restart"],
            [
                ["deliveries expected", soak["deliveries_expected"], restart["deliveries_expected"]],
                ["arrived (all POSTs)", soak["arrived"], restart["arrived"]],
                ["duplicates", soak["duplicates"], restart["duplicates"]],
                ["missing", soak["missing"], restart["missing"]],
                ["bulk call (s)", soak["bulk_call_s"], restart["bulk_call_s"]],
                ["event → arrival p50 (ms)", soak["latency"]["p50_ms"], restart["latency"]["p50_ms"]],
                ["event → arrival p99 (ms)", soak["latency"]["p99_ms"], restart["latency"]["p99_ms"]],
                ["last arrival (s)", soak["last_arrival_s"], restart["last_arrival_s"]],
                ["SIGTERM → exit (s)", None, stop_s],
            ],
        )
    )
    print(
        f"tasks: {tasks['tasks']:,} ({tasks['by_func']}), failed {tasks['failed']}; longest webhook task run "
        f"{tasks['max_task_run_s']} s ({tasks['max_task_run_func']}); longest enqueue → done "
        f"{tasks['max_enqueue_to_done_s']} s; final SIGTERM → exit {final_stops} s; queue rows left {queue_rows_left}"
    )
    print(format_targets(targets))
    print(f"checks: {checks}")
    print(f"\nWritten {path.relative_to(PROJECT_DIR)} (cluster logs in {_LOGS})", flush=True)
    if not payload["all_checks_passed"]:
        print("SOME CHECKS FAILED: the figures above are not valid.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
