"""Partner API benchmark: gunicorn on PostgreSQL, a load generator on loopback.

Phases (each on its own brand and campaign, every event a new person with an e-mail):
* ``single``: POST /api/v1/events/ one event per request from CONCURRENCY client threads, each
  request with its own Idempotency-Key — req/s, p50/p99 latency;
* ``bulk``: POST /api/v1/events/bulk/ with 1,000 events per request from 2 client threads,
  Idempotency-Keys on — events/s.

Run: ``make bench-api`` (``DATABASE_URL`` names the database; it is migrated; nothing is
truncated). ``--n`` scales the single phase down for a smoke run (writes api-smoke.json).
Gunicorn: ``--workers`` sync workers (default 8 × CPUs) bound to 127.0.0.1 on a free port: more
workers than cores, since an event POST spends much of its time waiting for its campaign's tally
lock and for the commit.
Checks: every request answered 201/200, every event stored once, the ledger verifies.
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench.common import (  # noqa: E402
    PROJECT_DIR,
    CpuMeter,
    format_table,
    format_targets,
    latency_ms,
    meta,
    target,
    write_results,
)
from campaigns.api_keys import api_key_create  # noqa: E402
from campaigns.models import TriggerEvent  # noqa: E402
from campaigns.services import (  # noqa: E402
    brand_create,
    brand_topup_record,
    campaign_allocate,
    campaign_create,
    campaign_launch,
    rule_create,
)
from reconciliation.selectors import ledger_verify_report  # noqa: E402

CONCURRENCY = 16
BULK_SIZE = 1000
BULK_CALLS = 10
BULK_THREADS = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(run: str, phase: str, events: int) -> tuple[str, str]:
    brand = brand_create(name=f"API bench {run} {phase}", slug=f"api-{run}-{phase}")
    campaign = campaign_create(
        brand=brand, name="Bench", slug="bench", mode="joyback", starts_at=django.utils.timezone.now(),
        fraud_max_events_per_ip_hour=None, fraud_max_events_per_device_hour=None,
    )  # fmt: skip
    rule_create(campaign=campaign, trigger="tiktok_login", fixed_minor=100, verification="partner_attested")
    amount = events * 100 + 10_000
    brand_topup_record(brand=brand, amount_minor=amount, currency="EUR", bank_account_code="NL91ABNA0417164300",
                       idempotency_key=f"api-bench:{run}:{phase}", reference=brand.funding_reference)  # fmt: skip
    campaign_allocate(campaign=campaign, amount_minor=amount, idempotency_key=f"api-bench-alloc:{run}:{phase}")
    campaign_launch(campaign=campaign)
    return str(brand.pk), api_key_create(brand=brand, name="bench", scopes=["read", "events"]).token


def event(run: str, phase: str, i: int) -> dict:
    return {"external_id": f"{run}-{phase}-{i}", "campaign": "bench", "type": "tiktok_login",
            "email": f"{run}-{phase}-{i}@bench.example"}  # fmt: skip


def post(conn: http.client.HTTPConnection, path: str, body: dict, token: str) -> tuple[int, float]:
    raw = json.dumps(body).encode()
    started = time.perf_counter()
    conn.request("POST", path, raw, {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                     "Idempotency-Key": uuid.uuid4().hex})  # fmt: skip
    response = conn.getresponse()
    response.read()
    return response.status, time.perf_counter() - started


def drive(port: int, token: str, jobs: list[tuple[str, dict]], threads: int) -> tuple[list[float], dict, float]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    queue = list(reversed(jobs))

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if not queue:
                    break
                path, body = queue.pop()
            status, seconds = post(conn, path, body, token)
            with lock:
                latencies.append(seconds)
                statuses[status] = statuses.get(status, 0) + 1
        conn.close()

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return latencies, statuses, time.perf_counter() - started


def wait_ready(port: int, proc: subprocess.Popen) -> None:
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit("gunicorn exited during start-up")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/v1/balances/")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("gunicorn did not start")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000, help="single-event requests")
    parser.add_argument("--workers", type=int, default=8 * (os.cpu_count() or 1))
    args = parser.parse_args()
    smoke = args.n < 5000
    call_command("migrate", verbosity=0)
    run = uuid.uuid4().hex[:8]
    load_at_start = os.getloadavg()
    single_brand, single_token = setup(run, "single", args.n)
    bulk_brand, bulk_token = setup(run, "bulk", BULK_SIZE * BULK_CALLS)
    with connection.cursor() as cur:
        cur.execute("SHOW server_version")
        pg_version = cur.fetchone()[0]
    connection.close()

    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.api_settings"}
    proc = subprocess.Popen(
        [str(PROJECT_DIR / ".venv/bin/gunicorn"), "config.wsgi", "-b", f"127.0.0.1:{port}", "-w", str(args.workers),
         "--worker-class", "sync", "--keep-alive", "30", "--log-level", "warning", "--timeout", "120"],
        cwd=PROJECT_DIR, env=env,
    )  # fmt: skip
    try:
        wait_ready(port, proc)
        # Warm-up: every worker imports, connects and fills its caches.
        drive(port, single_token, [("/api/v1/events/", event(run, "warm", i)) for i in range(200)], CONCURRENCY)
        meter = CpuMeter(tree_of=proc.pid)
        meter.start()
        latencies, single_statuses, single_wall = drive(
            port, single_token, [("/api/v1/events/", event(run, "single", i)) for i in range(args.n)], CONCURRENCY
        )
        single_cpu = meter.stop(per=args.n)
        bulk_jobs = [
            ("/api/v1/events/bulk/", {"events": [event(run, "bulk", c * BULK_SIZE + i) for i in range(BULK_SIZE)]})
            for c in range(BULK_CALLS)
        ]
        meter.start()
        bulk_latencies, bulk_statuses, bulk_wall = drive(port, bulk_token, bulk_jobs, BULK_THREADS)
        bulk_cpu = meter.stop(per=BULK_SIZE * BULK_CALLS)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    stored_single = TriggerEvent.objects.filter(brand_id=single_brand, external_id__startswith=f"{run}-single-").count()
    stored_bulk = TriggerEvent.objects.filter(brand_id=bulk_brand).count()
    checks = {
        "single_all_201": single_statuses == {201: args.n},
        "bulk_all_200": bulk_statuses == {200: BULK_CALLS},
        "single_events_stored_once": stored_single == args.n,
        "bulk_events_stored_once": stored_bulk == BULK_SIZE * BULK_CALLS,
        "ledger_verified": ledger_verify_report().ok,
    }
    checks["all_passed"] = all(checks.values())
    req_per_s = round(args.n / single_wall, 1)
    events_per_s = round(BULK_SIZE * BULK_CALLS / bulk_wall, 1)
    lat = latency_ms(latencies)
    targets = [
        target("single event POST throughput", req_per_s, unit="req/s", target=500),
        target("bulk ingestion throughput", events_per_s, unit="events/s", target=5000),
    ]
    results = {
        "single": {"requests": args.n, "client_threads": CONCURRENCY, "wall_s": round(single_wall, 3),
                   "req_per_s": req_per_s, "latency": lat, "statuses": single_statuses,
                   "cpu_ms_per_request": single_cpu},
        "bulk": {"calls": BULK_CALLS, "events_per_call": BULK_SIZE, "client_threads": BULK_THREADS,
                 "wall_s": round(bulk_wall, 3), "events_per_s": events_per_s, "latency": latency_ms(bulk_latencies),
                 "statuses": bulk_statuses, "cpu_ms_per_event": bulk_cpu},
        "checks": checks,
    }  # fmt: skip
    print(format_table(
        ["phase", "requests", "wall s", "rate", "unit", "p50 ms", "p99 ms"],
        [("single", args.n, single_wall, req_per_s, "req/s", lat["p50_ms"], lat["p99_ms"]),
         ("bulk", BULK_CALLS, bulk_wall, events_per_s, "events/s", *latency_ms(bulk_latencies).values())],
    ))  # fmt: skip
    print()
    print(f"CPU per request (single) / per event (bulk), ms — self: load generator, server: gunicorn, PostgreSQL: "
          f"{single_cpu} / {bulk_cpu}")  # fmt: skip
    print(format_targets(targets))
    print("checks:", checks)
    run_meta = meta(
        postgres_version=pg_version,
        database=settings.DATABASES["default"]["NAME"],
        run_id=run,
        gunicorn_workers=args.workers,
        idempotency_keys=True,
        load_average_at_start=load_at_start,
        load_average_at_end=os.getloadavg(),
    )
    print(f"python reference loop {run_meta['python_reference_ms']} ms (lower is a faster machine)")
    payload = {
        "meta": run_meta,
        "results": results,
        "targets": targets,
    }  # fmt: skip
    path = write_results("api-smoke" if smoke else "api", payload)
    print(f"written {path}")
    return 0 if checks["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
