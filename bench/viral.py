"""Viral campaign benchmark (issue 26), on PostgreSQL, with the class clusters of two machines:

One brand, 20 webhook endpoints on a loopback receiver (127.0.0.1, subscribed to the reward and
payout events the pipeline emits), and a burst of ``--people`` new people (10,000), each with an
IBAN and a WhatsApp number, on a rule with no hold period and no review: every event becomes a
payable reward, a payout on the sandbox rail, a "paid" notice and webhooks. Four fifths of the
people come from 8 processes calling ``event_ingest`` one event per call, one fifth from a process
making 1,000-event ``event_ingest_bulk`` calls, all released together. The background work runs
as in production: per node, one ``qcluster`` per class — money (the default cluster), ticks,
notices, webhooks — and ``--nodes`` (2) such sets share the ORM broker, as two machines would;
the webhooks clusters at a lower CPU priority (``--webhooks-nice``, 10), as in production.

Phase ``hot``: the whole burst on ONE campaign. Phase ``spread``: the same burst (new people) on
8 fresh campaigns of the same brand, same rules, same clusters. Each phase waits (``--deadline``,
20 minutes) until every reward its events created is fully paid — payout settled, reward paid,
the "paid" notice sent on every channel — every webhook delivery has arrived, and every queue is
empty. Every event is a new, valid person on a funded rule with no cap, so an event refused or
failed is printed loudly and fails a check (the phase waits only for the rewards that exist). A
phase not drained by its deadline gets a second, unmeasured wait (``--settle``, as long again)
before the next starts, so the spread phase does not inherit the hot one's backlog. Last, the
stop: 3,000 execute tasks queued for the money clusters, SIGTERM to each money cluster's main
process, seconds to exit; then every cluster is stopped (SIGTERM, killed after a deadline).

Task runs, webhook arrivals and the checks are read once every cluster has stopped: a task still
saving its result or a delivery arriving after its phase's wait is counted, and attributed to its
phase by payout (execute runs), by time (other tasks: from the phase's burst to the next one's)
and by the reward or payout event a webhook reports.

Figures: ingest events/s (single, 8 callers; bulk) and outcomes; people fully paid per second
from the burst's start to the last one; webhook deliveries per second; event → settled, event →
fully paid and change → webhook arrival (the reward or payout event's commit to the POST's
arrival) p50/p99/max; execute task runs per payout, payouts executed inline (the engine runs a
payout in the task that created it for one person, and marks its rewards paid there: no
follow-up task per payout) and executions per payout (both), execute runs that found their
payout already settled; task runs by a cluster of another class than their route or
schedule names; tasks over their timeout; the deepest queue and its oldest task per class
(``django_q_ormq`` sampled every second, per function every fifth; the interval schedules run on
the ``ticks`` cluster); lock waits (``pg_stat_activity`` every 0.2 s: the share of active backends
waiting on a lock, and what they wait on); the **hot ratio** (people fully paid/s hot ÷ spread)
and the **drain ratio** (people fully paid/s ÷ the 8 single callers' events/s in the same phase).
Task runs are read from a copy of every ``django_q_task`` row written (a trigger this benchmark
adds for the run and drops at the end), since django-q2 may prune successful tasks.

Run: ``make bench-viral`` (``DATABASE_URL`` names the database: it is migrated, the queue emptied;
each run has its own brand). ``--people 300`` for a smoke run (``bench-results/viral-smoke.json``).
Checks (exit non-zero when one fails): every event rewarded (no error, no refusal), every person
paid exactly once (one payout, settled, one sandbox transfer), every (event, endpoint) arrived
exactly once, each phase drained before the next, the ledger verifies. Targets are
printed MET / NOT MET and never fail the run.
"""

import argparse
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
_LOGS = Path(tempfile.mkdtemp(prefix="bench-viral-"))
_STORE = _LOGS / "sandbox.sqlite3"
os.environ["SANDBOX_STORE_PATH"] = str(_STORE)
django.setup()

import psycopg  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_q.models import OrmQ, Schedule, Task  # noqa: E402
from django_q.signing import SignedPackage  # noqa: E402
from picklefield.fields import dbsafe_decode  # noqa: E402

from bench.common import (  # noqa: E402
    BARRIER_TIMEOUT_S,
    PROJECT_DIR,
    WEBHOOKS_NICE,
    Receiver,
    WorkerResult,
    database_url,
    format_table,
    format_targets,
    iban,
    in_processes,
    meta,
    percentile,
    reporting,
    sigterm_and_wait,
    start_qcluster,
    stop_groups,
    target,
    write_results,
)
from campaigns.evaluation import fee_for  # noqa: E402
from campaigns.models import Brand, Reward, RewardEvent, RewardStatus, WebhookDelivery, WebhookEvent  # noqa: E402
from campaigns.selectors import brand_plan_current  # noqa: E402
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
from campaigns.webhooks import webhook_endpoint_create  # noqa: E402
from core.queue import enqueue, task_class  # noqa: E402
from payouts.models import Payout, PayoutEvent, PayoutItem, PayoutStatus  # noqa: E402
from payouts.rails.sandbox import sandbox_store  # noqa: E402
from recipients import crypto  # noqa: E402
from recipients.models import Notice, NoticeDelivery  # noqa: E402
from reconciliation.selectors import ledger_verify_report  # noqa: E402
from reconciliation.services.statements import platform_bank_account_create  # noqa: E402

PEOPLE = 10_000
NODES = 2
CALLERS = 8
BULK_SIZE = 1_000
BULK_SHARE = 5  # one person in five comes through the bulk calls
SPREAD = 8
ENDPOINTS = 20
EVENT_TYPES = ["reward.held", "reward.payable", "payout.submitted", "payout.settled"]
REWARD_MINOR = 500
DEADLINE_S = 1200
DEEP_QUEUE = 3_000  # ≥ 1,000 still queued 2 s later, as fast as the clusters drop copies for settled payouts
STOP_LIMIT_S = 60
DEBTOR_IBAN = "NL91ABNA0417164300"  # the platform's account payouts are paid from (as bench-payouts)
CLASSES = (None, *settings.Q_CLASSES)  # None: the default cluster, money
MONEY = settings.Q_CLUSTER["name"]
EXECUTE = "payouts.tasks.payout_execute_task"
TARGETS = {"hot": 0.8, "drain": 0.5, "execute": 1.2, "webhook_p99_s": 120.0, "stop_s": 30.0}


# --- load -----------------------------------------------------------------------------------------


def event(run: str, phase: int, i: int, slug: str, people: int) -> EventInput:
    """Person ``i`` of a phase: a new person with an IBAN and a WhatsApp number of their own."""
    slot = int(run, 16) % max(1, 10**7 // (2 * people))
    return EventInput(
        external_id=f"{run}-{phase}-{i}",
        campaign=slug,
        type="tiktok_login",
        source="tiktok",
        name=f"Person {i}",
        # WhatsApp: the notice goes to the WhatsApp fake (no mail server needed).
        whatsapp=f"+39347{slot * 2 * people + phase * people + i:07d}",
        iban=iban(int(run, 16) % 10**6 * 10**5 + phase * people + i),
    )


def _single_caller(worker, callers, indices, run, phase, slugs, people, brand_id, barrier, out) -> None:
    result = WorkerResult(worker=worker)
    with reporting(result, barrier, out):
        brand = Brand.objects.get(pk=brand_id)
        mine = [event(run, phase, i, slugs[i % len(slugs)], people) for i in indices[worker::callers]]
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
        result.start, result.extra["t0"] = time.monotonic(), time.time()
        for payload in mine:
            began = time.monotonic()
            try:
                outcome = event_ingest(brand=brand, payload=payload).outcome
            except Exception as exc:  # a benchmark counts every failure and goes on
                outcome = "error"
                if len(result.error_samples) < 5:
                    result.error_samples.append(f"{payload.external_id}: {type(exc).__name__}: {exc}")
            result.latencies.append(time.monotonic() - began)
            result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1
        result.end = time.monotonic()
        result.extra["kind"] = "single"


def _bulk_caller(worker, indices, run, phase, slugs, people, brand_id, barrier, out) -> None:
    result = WorkerResult(worker=worker)
    with reporting(result, barrier, out):
        brand = Brand.objects.get(pk=brand_id)
        payloads = [event(run, phase, i, slugs[i % len(slugs)], people) for i in indices]
        calls = [payloads[c : c + BULK_SIZE] for c in range(0, len(payloads), BULK_SIZE)]
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
        result.start, result.extra["t0"] = time.monotonic(), time.time()
        for call in calls:
            began = time.monotonic()
            for r in event_ingest_bulk(brand=brand, payloads=call):
                result.outcomes[r.outcome] = result.outcomes.get(r.outcome, 0) + 1
                if r.error is not None and len(result.error_samples) < 5:
                    result.error_samples.append(f"{r.error.code}: {r.error.message}")
            result.latencies.append(time.monotonic() - began)
        result.end = time.monotonic()
        result.extra["kind"] = "bulk"


def ingest_figures(results: list[WorkerResult], kind: str) -> dict:
    mine = [r for r in results if r.extra.get("kind") == kind]
    events = sum(sum(r.outcomes.values()) for r in mine)
    wall = max(r.end for r in mine) - min(r.start for r in mine) if mine else 0
    latencies = [t for r in mine for t in r.latencies]
    outcomes = Counter()
    for r in mine:
        outcomes.update({str(k): n for k, n in r.outcomes.items()})  # plain strings, not the enum
    return {
        "processes": len(mine),
        "events": events,
        "wall_s": round(wall, 2),
        "events_per_s": round(events / wall, 1) if wall > 0 else None,
        ("per_event" if kind == "single" else "per_call"): seconds_figures(latencies, unit_ms=True),
        "outcomes": dict(outcomes),
        "error_samples": [s for r in mine for s in r.error_samples][:5],
    }


def seconds_figures(values: Sequence[float], *, unit_ms: bool = False) -> dict:
    scale, unit = (1000, "ms") if unit_ms else (1, "s")

    def rounded(v):
        return None if v is None else round(v * scale, 1 if unit_ms else 2)

    return {
        f"p50_{unit}": rounded(percentile(values, 50)),
        f"p99_{unit}": rounded(percentile(values, 99)),
        f"max_{unit}": rounded(max(values, default=None)),
        "n": len(values),
    }


# --- setup ----------------------------------------------------------------------------------------


def campaign_new(brand, slug: str, people: int, run: str):
    campaign = campaign_create(
        brand=brand, name=slug, slug=slug, mode="joyback", starts_at=timezone.now() - timedelta(days=1)
    )
    # No hold period, no review: payable at once, paid by the pipeline.
    rule_create(campaign=campaign, trigger="tiktok_login", fixed_minor=REWARD_MINOR)
    # Each reward reserves its fee too (the brand's plan's): fund both, or the last ~8 % of the
    # people would be refused for budget.
    fee = fee_for(plan=brand_plan_current(brand=brand), amount_minor=REWARD_MINOR, currency="EUR")
    funds = people * (REWARD_MINOR + fee)
    brand_topup_record(
        brand=brand,
        amount_minor=funds,
        currency="EUR",
        bank_account_code="BENCH",
        idempotency_key=f"bench-viral:{run}:{slug}:topup",
        reference=brand.funding_reference,
    )
    campaign_allocate(campaign=campaign, amount_minor=funds, idempotency_key=f"bench-viral:{run}:{slug}:alloc")
    campaign_launch(campaign=campaign)
    return campaign


def cluster_env(name: str | None) -> dict[str, str]:
    # The local settings (DEBUG off), as bench-webhooks: they let a webhook go to 127.0.0.1 over
    # http; warnings and errors only in the logs, so what went wrong is easy to find.
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "DATABASE_URL": database_url(connection.settings_dict),
        "SECRET_KEY": settings.SECRET_KEY,  # task payloads are signed with it
        "FIELD_ENCRYPTION_KEY": crypto._secret("FIELD_ENCRYPTION_KEY"),
        "FIELD_FINGERPRINT_KEY": crypto._secret("FIELD_FINGERPRINT_KEY"),
        "WEBHOOK_ALLOW_HTTP": "1",
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": "1",
        "SANDBOX_STORE_PATH": str(_STORE),
    }
    env.pop("Q_CLUSTER_NAME", None)
    if name is not None:
        env["Q_CLUSTER_NAME"] = name
    return env


TASK_LOG_SQL = [
    "DROP TABLE IF EXISTS bench_viral_task_log",
    """CREATE TABLE bench_viral_task_log (task_id text, func text, args text, cluster text,
       started timestamptz, stopped timestamptz, success boolean, result text)""",
    """CREATE OR REPLACE FUNCTION bench_viral_task_log() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO bench_viral_task_log
           VALUES (NEW.id, NEW.func, NEW.args, NEW.cluster, NEW.started, NEW.stopped, NEW.success, NEW.result);
         RETURN NEW;
       END $$""",
    f"DROP TRIGGER IF EXISTS bench_viral_task_log ON {Task._meta.db_table}",
    f"""CREATE TRIGGER bench_viral_task_log AFTER INSERT OR UPDATE ON {Task._meta.db_table}
       FOR EACH ROW EXECUTE FUNCTION bench_viral_task_log()""",
]
TASK_LOG_DROP = [
    f"DROP TRIGGER IF EXISTS bench_viral_task_log ON {Task._meta.db_table}",
    "DROP FUNCTION IF EXISTS bench_viral_task_log()",
]


# --- samplers -------------------------------------------------------------------------------------


class Sampler:
    """Two threads, each on a connection of its own: the queue per class every second (per
    function every fifth second, decoding the payloads), and lock waits every 0.2 s. Samples are
    tagged with the phase running when they were taken (``self.phase``; None between phases)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.phase: str | None = None
        self.stop = threading.Event()
        self.queue: dict[str, dict] = defaultdict(lambda: {"depth": {}, "oldest_s": {}, "func_depth": {}})
        self.locks: dict[str, dict] = defaultdict(
            lambda: {"samples": 0, "active": 0, "waiting": 0, "relations": Counter(), "statements": Counter()}
        )
        self.depth_now: dict[str, int] = {}
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._queue_loop, self._lock_loop)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)

    def _queue_loop(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            tick = 0
            while not self.stop.wait(1.0):
                rows = conn.execute(
                    f"SELECT key, count(*), extract(epoch FROM now() - min(lock) FILTER (WHERE lock <= now())) "
                    f"FROM {OrmQ._meta.db_table} GROUP BY key"
                ).fetchall()
                self.depth_now = {key: n for key, n, _ in rows}
                by_func = None
                if tick % 5 == 0 and rows:
                    by_func = Counter()
                    for key, payload in conn.execute(f"SELECT key, payload FROM {OrmQ._meta.db_table}"):
                        try:
                            by_func[f"{key}:{SignedPackage.loads(payload)['func']}"] += 1
                        except Exception:  # noqa: BLE001 - an undecodable row is counted as such
                            by_func[f"{key}:?"] += 1
                tick += 1
                phase = self.phase
                if phase is None:
                    continue
                q = self.queue[phase]
                for key, n, oldest in rows:
                    q["depth"][key] = max(q["depth"].get(key, 0), n)
                    if oldest is not None:
                        q["oldest_s"][key] = round(max(q["oldest_s"].get(key, 0.0), float(oldest)), 1)
                for func, n in (by_func or {}).items():
                    q["func_depth"][func] = max(q["func_depth"].get(func, 0), n)

    def _lock_loop(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.wait(0.2):
                phase = self.phase
                if phase is None:
                    continue
                active, waiting = conn.execute(
                    "SELECT count(*), count(*) FILTER (WHERE wait_event_type = 'Lock') FROM pg_stat_activity "
                    "WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()"
                ).fetchone()
                s = self.locks[phase]
                s["samples"] += 1
                s["active"] += active
                s["waiting"] += waiting
                if not waiting:
                    continue
                # What each waiting backend waits on: the relation of its ungranted lock, or, when
                # it waits for another transaction (a row lock), the relation of the tuple lock it
                # holds meanwhile.
                for relation, statement in conn.execute(
                    """SELECT coalesce(w.relation::regclass::text,
                                       (SELECT t.relation::regclass::text FROM pg_locks t
                                        WHERE t.pid = a.pid AND t.locktype = 'tuple' LIMIT 1),
                                       w.locktype),
                              left(regexp_replace(a.query, '\\s+', ' ', 'g'), 90)
                       FROM pg_stat_activity a JOIN pg_locks w ON w.pid = a.pid AND NOT w.granted
                       WHERE a.datname = current_database() AND a.wait_event_type = 'Lock'"""
                ):
                    s["relations"][relation] += 1
                    s["statements"][statement] += 1

    def lock_figures(self, phase: str) -> dict:
        s = self.locks[phase]
        return {
            "samples": s["samples"],
            "active_backends_mean": round(s["active"] / s["samples"], 2) if s["samples"] else None,
            "lock_wait_share": round(s["waiting"] / s["active"], 3) if s["active"] else None,
            "top_relations": s["relations"].most_common(8),
            "top_waiting_statements": s["statements"].most_common(5),
        }


# --- one phase ------------------------------------------------------------------------------------


def phase_people_sql(campaign_ids: list[int]) -> tuple[str, list]:
    """Per reward of the phase: when it was created (the event), its payout settled, the reward
    paid and the payout's "paid" notice sent on every channel; NULLs while a step is missing."""
    return (
        f"""
        SELECT r.id, r.person_id, r.created_at, p.settled_at,
               (SELECT max(e.created_at) FROM {RewardEvent._meta.db_table} e
                 WHERE e.reward_id = r.id AND e.kind = 'reward.paid') AS paid_at,
               (SELECT CASE WHEN bool_and(d.status = 'sent') THEN max(d.sent_at) END
                  FROM {Notice._meta.db_table} n JOIN {NoticeDelivery._meta.db_table} d ON d.notice_id = n.id
                 WHERE n.payout_id = p.id AND n.kind = 'paid' AND n.status = 'done') AS noticed_at
          FROM {Reward._meta.db_table} r
          LEFT JOIN {PayoutItem._meta.db_table} i ON i.reward_id = r.id AND i.active
          LEFT JOIN {Payout._meta.db_table} p ON p.id = i.payout_id AND p.status = %s
         WHERE r.campaign_id = ANY(%s)
        """,
        [PayoutStatus.SETTLED, campaign_ids],
    )


def people_rows(campaign_ids: list[int]) -> list[tuple]:
    sql, params = phase_people_sql(campaign_ids)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def fully_paid(row: tuple):
    _, _, _, settled, paid, noticed = row
    return max(settled, paid, noticed) if settled and paid and noticed and row[0] else None


def expected_sources(campaign_ids: list[int]) -> int:
    """Reward and payout events of the phase that must become webhook events (one each)."""
    rewards = RewardEvent.objects.filter(reward__campaign_id__in=campaign_ids, kind__in=EVENT_TYPES).count()
    payouts = PayoutEvent.objects.filter(
        kind__in=EVENT_TYPES, payout__items__reward__campaign_id__in=campaign_ids
    ).distinct()
    return rewards + payouts.count()


def phase_events(brand, since) -> dict[str, object]:
    return {e.public_id: e for e in WebhookEvent.objects.filter(brand=brand, created_at__gte=since)}


def wait_drained(*, brand, campaign_ids, expected, since, sampler, clusters, deadline_s, quiet=False) -> dict:
    """Poll every 2 s until each of the phase's ``expected`` rewards is fully paid, every webhook
    of the phase arrived and every queue is empty, or the deadline passes (or a cluster died)."""
    deadline = time.monotonic() + deadline_s
    state = {}
    last_print = 0.0
    while True:
        rows = people_rows(campaign_ids)
        done = sum(1 for r in rows if fully_paid(r))
        deliveries = WebhookDelivery.objects.filter(event__brand=brand, event__created_at__gte=since)
        total = deliveries.count()
        pending = deliveries.exclude(status="delivered").count()
        events = WebhookEvent.objects.filter(brand=brand, created_at__gte=since).count()
        sources = expected_sources(campaign_ids)
        queued = OrmQ.objects.count()
        state = {
            "rewards": len(rows),
            "fully_paid": done,
            "deliveries": total,
            "deliveries_pending": pending,
            "webhook_events": events,
            "webhook_sources": sources,
            "queued": queued,
        }
        finished = done == expected == len(rows) and total > 0 and pending == 0 and events == sources and queued == 0
        if finished:
            state["timed_out"] = False
            break
        if time.monotonic() > deadline or any(p.poll() is not None for p in clusters):
            state["timed_out"] = True
            state["clusters_dead"] = sum(1 for p in clusters if p.poll() is not None)
            break
        if time.monotonic() - last_print > (60 if quiet else 15):
            last_print = time.monotonic()
            print(f"    {state} queue by class {sampler.depth_now}", flush=True)
        time.sleep(2)
    return state


def run_phase(name, *, index, run, brand, campaigns, people, sampler, clusters, deadline_s, settle_s) -> dict:
    """The burst, then the wait: until ``deadline_s`` the phase is measured (queue depth and lock
    samples are the phase's); when it has not drained by then, a second wait (at most
    ``settle_s``, not measured) lets its backlog go, so the next phase does not inherit it. Task
    runs, webhooks and the checks are read at the end of the run, once every cluster stopped
    (``phase_figures``): a task still saving its result or a delivery arriving late is counted."""
    slugs = [c.slug for c in campaigns]
    campaign_ids = [c.pk for c in campaigns]
    bulk = list(range(people // BULK_SHARE))
    single = list(range(people // BULK_SHARE, people))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # planner statistics as autovacuum keeps them (untimed)
    since = timezone.now()
    sampler.phase = name
    jobs = [(_single_caller, (CALLERS, single, run, index, slugs, people, brand.pk)) for _ in range(CALLERS)] + [
        (_bulk_caller, (bulk, run, index, slugs, people, brand.pk))
    ]
    print(f"  {name}: {len(single):,} single events from {CALLERS} processes + {len(bulk):,} in bulk …", flush=True)
    results = in_processes(jobs)
    t0 = min(r.extra["t0"] for r in results)
    ingest = {"single": ingest_figures(results, "single"), "bulk": ingest_figures(results, "bulk")}
    outcomes = Counter(ingest["single"]["outcomes"]) + Counter(ingest["bulk"]["outcomes"])
    rewards = Reward.objects.filter(campaign_id__in=campaign_ids).count()
    print(
        f"  ingested: single {ingest['single']['events_per_s']} events/s, bulk {ingest['bulk']['events_per_s']} "
        f"events/s; outcomes {dict(outcomes)}, {rewards:,} rewards; waiting for payouts, notices and webhooks …",
        flush=True,
    )
    if outcomes.get("rewarded", 0) != people or rewards != people:
        # Every event is a new, valid person on a funded rule with no cap: anything but a reward
        # is the engine refusing (or failing on) a legitimate event.
        samples = ingest["single"]["error_samples"] + ingest["bulk"]["error_samples"]
        print(
            f"  !!! {name}: {people - outcomes.get('rewarded', 0)} of {people:,} events not rewarded "
            f"(outcomes {dict(outcomes)}, {rewards:,} rewards); samples: {samples or 'none'}",
            file=sys.stderr,
            flush=True,
        )
    state = wait_drained(
        brand=brand,
        campaign_ids=campaign_ids,
        expected=rewards,
        since=since,
        sampler=sampler,
        clusters=clusters,
        deadline_s=deadline_s,
    )
    sampler.phase = None
    measured_end = time.time()
    if state["timed_out"] and not state["clusters_dead"]:
        print(f"  {name}: not drained after {deadline_s:.0f} s; waiting (≤ {settle_s:.0f} s) before going on …")
        began = time.monotonic()
        after = wait_drained(
            brand=brand,
            campaign_ids=campaign_ids,
            expected=rewards,
            since=since,
            sampler=sampler,
            clusters=clusters,
            deadline_s=settle_s,
            quiet=True,
        )
        state["after_deadline"] = {**after, "waited_s": round(time.monotonic() - began, 1)}
    time.sleep(2)
    return {
        "campaigns": len(campaigns),
        "campaign_ids": campaign_ids,
        "people": people,
        "rewards": rewards,
        "ingest": ingest,
        "t0": t0,
        "since": since,
        "drained": state,
        "drained_before_next": not state.get("after_deadline", state)["timed_out"],
        "queue": sampler.queue[name],
        "locks": sampler.lock_figures(name),
        "measured_s": round(measured_end - t0, 1),
    }


def phase_figures(p: dict, *, events: dict, arrivals: list, brand, until, stop_at) -> dict:
    """A phase's figures and checks, read once every cluster has stopped. Its tasks are those
    started between its burst and the next phase's (``until``), its execute runs those for its
    payouts (before the stop's copies, ``stop_at``), its webhooks those of its own changes."""
    rows = people_rows(p["campaign_ids"])
    paid_at = [fully_paid(r) for r in rows]
    finished = [at.timestamp() for at in paid_at if at]
    t0 = p["t0"]
    last_paid = max(finished, default=None)
    settled = [r[3].timestamp() - r[2].timestamp() for r in rows if r[3]]
    to_paid = [at.timestamp() - r[2].timestamp() for r, at in zip(rows, paid_at, strict=True) if at]
    hooks = {**webhook_figures(events, arrivals, brand, t0), "sources": expected_sources(p["campaign_ids"])}
    tasks = task_figures(p["since"], until, stop_at=stop_at, people_ids=[r[1] for r in rows])
    paid_per_s = round(len(finished) / (last_paid - t0), 2) if finished and last_paid > t0 else None
    single_rate = p["ingest"]["single"]["events_per_s"]
    outcomes = Counter(p["ingest"]["single"]["outcomes"]) + Counter(p["ingest"]["bulk"]["outcomes"])
    figures = {
        "fully_paid": len(finished),
        "burst_to_last_fully_paid_s": round(last_paid - t0, 1) if last_paid else None,
        "people_fully_paid_per_s": paid_per_s,
        "drain_ratio": round(paid_per_s / single_rate, 3) if paid_per_s and single_rate else None,
        "event_to_settled": seconds_figures(settled),
        "event_to_fully_paid": seconds_figures(to_paid),
        "webhooks": hooks,
        "tasks": tasks,
    }
    checks = {
        "ingest_no_errors": outcomes.get("error", 0) == 0,
        "every_event_rewarded": outcomes.get("rewarded", 0) == p["people"] == len(rows),
        "drained_before_next": p["drained_before_next"],
        **phase_checks(rows, hooks),
    }
    return {**{k: v for k, v in p.items() if k not in ("campaign_ids", "since", "t0")}, **figures, "checks": checks}


def events_by_phase(brand, phases: dict[str, dict]) -> tuple[dict[str, dict], int]:
    """The brand's webhook events, by the phase whose reward or payout event they report (their
    ``source``); and how many belong to none."""
    owner: dict[str, str] = {}
    for name, p in phases.items():
        ids = p["campaign_ids"]
        for pk in RewardEvent.objects.filter(reward__campaign_id__in=ids).values_list("pk", flat=True):
            owner[f"reward_event:{pk}"] = name
        payouts = PayoutEvent.objects.filter(payout__items__reward__campaign_id__in=ids).distinct()
        for pk in payouts.values_list("pk", flat=True):
            owner[f"payout_event:{pk}"] = name
    found: dict[str, dict] = {name: {} for name in phases}
    stray = 0
    for e in WebhookEvent.objects.filter(brand=brand):
        if e.source in owner:
            found[owner[e.source]][e.public_id] = e
        else:
            stray += 1
    return found, stray


def webhook_figures(events: dict, all_arrivals: list, brand, t0: float) -> dict:
    arrivals = [a for a in all_arrivals if a[1] in events]
    counts = Counter((endpoint, event_id) for endpoint, event_id, _ in arrivals)
    first: dict[tuple[int, str], float] = {}
    for endpoint, event_id, at in arrivals:
        first.setdefault((endpoint, event_id), at)
    index = {pk: i for i, pk in enumerate(sorted(brand.webhook_endpoints.values_list("pk", flat=True)))}
    deliveries = WebhookDelivery.objects.filter(event__public_id__in=list(events))
    wanted = {
        (index[endpoint_id], public_id)
        for endpoint_id, public_id in deliveries.values_list("endpoint_id", "event__public_id")
    }
    # The change a webhook reports: the reward or payout event row it was collected from.
    source_at = {}
    reward_ids = [int(e.source.split(":")[1]) for e in events.values() if e.source.startswith("reward_event:")]
    payout_ids = [int(e.source.split(":")[1]) for e in events.values() if e.source.startswith("payout_event:")]
    for pk, at in RewardEvent.objects.filter(pk__in=reward_ids).values_list("pk", "created_at"):
        source_at[f"reward_event:{pk}"] = at.timestamp()
    for pk, at in PayoutEvent.objects.filter(pk__in=payout_ids).values_list("pk", "created_at"):
        source_at[f"payout_event:{pk}"] = at.timestamp()
    latencies = [
        at - source_at[events[event_id].source]
        for (_, event_id), at in first.items()
        if events[event_id].source in source_at
    ]
    last = max(first.values(), default=None)
    return {
        "events": len(events),
        "by_type": dict(Counter(e.type for e in events.values())),
        "deliveries_expected": len(wanted),
        "deliveries_not_delivered": deliveries.exclude(status="delivered").count(),
        "arrived": len(arrivals),
        "duplicates": sum(c - 1 for c in counts.values()),
        "missing": len(wanted - set(counts)),
        "unexpected": len(set(counts) - wanted),
        "deliveries_per_s": round(len(first) / (last - t0), 1) if last and last > t0 else None,
        "change_to_arrival": seconds_figures(latencies),
        "burst_to_last_arrival_s": round(last - t0, 1) if last else None,
    }


_TIMED_OUT = re.compile(r"TimeoutException|exceeded maximum timeout", re.IGNORECASE)


def task_figures(since, until, *, stop_at, people_ids: list[int]) -> dict:
    """Task runs (the trigger's copy of django_q_task) started in ``[since, until)``, by function;
    the execute task runs for these people's payouts (wherever they fell, before the stop's copies)
    and those that found their payout settled. The engine runs a payout inline in the task that
    created it (``payouts_create_task``, one person) and enqueues an execute task only for
    payouts created for several people or by the tick: a payout with no execute run that settled
    was executed once, inline — executions per payout counts both."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT func, args, cluster, started, stopped, success, result FROM bench_viral_task_log "
            "WHERE (started >= %s AND started < %s) OR (func = %s AND started < %s)",
            [since, until, EXECUTE, stop_at],
        )
        rows = cursor.fetchall()
    payouts = dict(Payout.objects.filter(person_id__in=people_ids).values_list("pk", "settled_at"))
    by_func: Counter = Counter()
    failed: Counter = Counter()
    timed_out: Counter = Counter()
    execute_results: Counter = Counter()
    executed: set[int] = set()
    runs = execute_runs = settled_runs = 0
    # Each task's class: its schedule's cluster (interval schedules: ticks; a schedule naming none
    # runs on whichever cluster's scheduler took it), else its route.
    scheduled = dict(Schedule.objects.values_list("func", "cluster"))
    off_class: Counter = Counter()
    for func, args, cluster, started, stopped, success, result in rows:
        decoded = dbsafe_decode(result) if result else None
        if func == EXECUTE:
            payout_id = dbsafe_decode(args)[0]
            if payout_id in payouts:
                execute_runs += 1
                executed.add(payout_id)
                execute_results[str(decoded)] += 1
                settled_at = payouts[payout_id]
                if decoded == "not_claimed" and settled_at is not None and settled_at < stopped:
                    settled_runs += 1
        if not since <= started < until:
            continue
        runs += 1
        short = func.rsplit(".", 1)[-1]
        by_func[short] += 1
        expected = scheduled[func] if func in scheduled else task_class(func) or MONEY
        if expected is not None and cluster != expected:  # run by another class's cluster
            off_class[f"{short} on {cluster}"] += 1
        if not success:
            failed[short] += 1
            if _TIMED_OUT.search(str(decoded)):
                timed_out[short] += 1
    inline = sum(1 for pk, settled_at in payouts.items() if settled_at is not None and pk not in executed)
    return {
        "runs": runs,
        "by_func": dict(by_func.most_common()),
        "off_class": dict(off_class),
        "failed": dict(failed),
        "over_timeout": sum(timed_out.values()),
        "over_timeout_by_func": dict(timed_out),
        "payouts": len(payouts),
        "execute_runs": execute_runs,
        "execute_runs_per_payout": round(execute_runs / len(payouts), 3) if payouts else None,
        "executed_inline": inline,
        "executions_per_payout": round((execute_runs + inline) / len(payouts), 3) if payouts else None,
        "execute_results": dict(execute_results),
        "execute_runs_for_settled": settled_runs,
    }


def phase_checks(rows, hooks) -> dict:
    person_ids = [r[1] for r in rows]
    payouts = list(Payout.objects.filter(person_id__in=person_ids).values_list("person_id", "status", "end_to_end_id"))
    per_person = Counter(p for p, _, _ in payouts)
    store = sandbox_store(str(_STORE))
    transfers = [store.transfer_count(e2e) for _, _, e2e in payouts]
    return {
        "one_reward_per_person": len(rows) == len(set(person_ids)),
        "everyone_fully_paid": all(fully_paid(r) for r in rows),
        "one_payout_per_person": set(per_person) == set(person_ids) and all(n == 1 for n in per_person.values()),
        "every_payout_settled": all(s == PayoutStatus.SETTLED for _, s, _ in payouts),
        "one_sandbox_transfer_each": all(n == 1 for n in transfers),
        "rewards_paid": Reward.objects.filter(person_id__in=person_ids).exclude(status=RewardStatus.PAID).count() == 0,
        "every_webhook_once": hooks["missing"] == 0 and hooks["duplicates"] == 0 and hooks["unexpected"] == 0,
        "every_change_a_webhook": hooks["events"] == hooks["sources"],
    }


# --- the stop -------------------------------------------------------------------------------------


def stop_under_load(clusters: dict[tuple[int, str], object], payout_ids: list[int]) -> dict:
    """A deep money queue (execute tasks for settled payouts: the copies issue 26 saw pile up),
    then SIGTERM to every money cluster's main process at once; seconds until each exited."""
    with transaction.atomic():
        for n in range(DEEP_QUEUE):
            enqueue(EXECUTE, payout_ids[n % len(payout_ids)])
    time.sleep(2)  # the clusters are busy with it
    queued = OrmQ.objects.filter(key=MONEY).count()
    stops = sigterm_all({f"node{key[0]}": proc for key, proc in clusters.items() if key[1] == MONEY})
    left = OrmQ.objects.filter(key=MONEY).count()
    values = list(stops.values())
    return {
        "money_queued_at_sigterm": queued,
        "money_queued_after_exit": left,
        "sigterm_to_exit_s": stops,
        "max_s": None if any(v is None for v in values) else max(values, default=None),
    }


def sigterm_all(procs: dict[str, object]) -> dict[str, float | None]:
    """``sigterm_and_wait`` to several clusters at once (as a deploy stops a machine's)."""
    stops: dict[str, float | None] = {}

    def stop(name, proc):
        stops[name] = sigterm_and_wait(proc, limit_s=STOP_LIMIT_S)

    threads = [threading.Thread(target=stop, args=item) for item in procs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return stops


def log_problems() -> dict:
    """Errors and critical lines in the clusters' logs (they log warnings and up), by message."""
    found: Counter = Counter()
    samples: list[str] = []
    for log in sorted(_LOGS.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if " ERROR " in line or " CRITICAL " in line or line.startswith(("Traceback", "ValueError", "Error")):
                message = re.sub(r"^\S+ \S+ ", "", line)[:140]
                found[f"{log.stem}: {re.sub(r'[0-9]+', 'N', message)}"] += 1
                if len(samples) < 10:
                    samples.append(f"{log.name}: {line[:300]}")
    return {"by_message": dict(found.most_common(20)), "samples": samples}


# --- main -----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=PEOPLE, help="people per phase")
    parser.add_argument("--nodes", type=int, default=NODES, help="sets of class clusters (machines)")
    parser.add_argument("--endpoints", type=int, default=ENDPOINTS)
    parser.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds a phase may take to drain")
    parser.add_argument(
        "--settle",
        type=float,
        default=None,
        help="seconds more a phase not drained by its deadline may take before the next starts (--deadline)",
    )
    parser.add_argument(
        "--webhooks-nice",
        type=int,
        default=WEBHOOKS_NICE,
        help=f"start the webhooks clusters under nice -n N (default {WEBHOOKS_NICE}; 0: same priority as the others)",
    )
    args = parser.parse_args(argv)
    if args.people < SPREAD * 2:
        parser.error(f"--people must be at least {SPREAD * 2}")
    run = uuid.uuid4().hex[:8]
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
        for statement in TASK_LOG_SQL:
            cursor.execute(statement)
    OrmQ.objects.all().delete()  # tasks left by an earlier, interrupted run would join this one
    settings.WEBHOOK_ALLOW_HTTP = settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # endpoints on 127.0.0.1
    platform_bank_account_create(name="Operating", iban=DEBTOR_IBAN, currency="EUR")
    receiver = Receiver()
    brand = brand_create(name=f"Bench viral {run}", slug=f"bench-viral-{run}")
    for i in range(args.endpoints):
        webhook_endpoint_create(brand=brand, url=f"{receiver.url}/{i}", event_types=EVENT_TYPES)
    hot = [campaign_new(brand, "hot", args.people, run)]
    spread = [campaign_new(brand, f"spread-{k}", -(-args.people // SPREAD), run) for k in range(SPREAD)]
    sampler = Sampler(database_url(connection.settings_dict))
    sampler.start()
    clusters = {
        (node, name or MONEY): start_qcluster(
            env=cluster_env(name),
            log=_LOGS / f"node{node}-{name or MONEY}.log",
            nice=args.webhooks_nice if name == "webhooks" else 0,
        )
        for node in range(args.nodes)
        for name in CLASSES
    }
    raw: dict[str, dict] = {}
    stop: dict = {}
    final_stops: dict[str, float | None] = {}
    stop_at = None
    try:
        time.sleep(5)  # the clusters' start-up is not part of any figure
        for index, (name, campaigns) in enumerate((("hot", hot), ("spread", spread))):
            print(f"phase {name}: {args.people:,} people on {len(campaigns)} campaign(s) …", flush=True)
            raw[name] = run_phase(
                name,
                index=index,
                run=run,
                brand=brand,
                campaigns=campaigns,
                people=args.people,
                sampler=sampler,
                clusters=list(clusters.values()),
                deadline_s=args.deadline,
                settle_s=args.deadline if args.settle is None else args.settle,
            )
        print(f"stop: {DEEP_QUEUE:,} execute tasks queued, SIGTERM to the money clusters …", flush=True)
        settled = list(
            Payout.objects.filter(items__reward__campaign__brand=brand, status=PayoutStatus.SETTLED).values_list(
                "pk", flat=True
            )
        )
        stop_at = timezone.now()
        stop = stop_under_load(clusters, settled)
        final_stops = sigterm_all({f"node{k[0]}-{k[1]}": proc for k, proc in clusters.items() if k[1] != MONEY})
    finally:
        stop_groups(list(clusters.values()))
        sampler.close()
        receiver.server.shutdown()
        with connection.cursor() as cursor:
            for statement in TASK_LOG_DROP:  # its table stays until the next run: the figures read it
                cursor.execute(statement)
    # Every cluster has stopped: every task run is saved, every delivery that will arrive has.
    stop_at = stop_at or timezone.now()
    arrivals = receiver.snapshot()
    events, stray_events = events_by_phase(brand, raw)
    names = list(raw)
    phases = {
        name: phase_figures(
            p,
            events=events[name],
            arrivals=arrivals,
            brand=brand,
            until=raw[names[k + 1]]["since"] if k + 1 < len(names) else stop_at,
            stop_at=stop_at,
        )
        for k, (name, p) in enumerate(raw.items())
    }
    attributed = {e for found in events.values() for e in found}
    stray_arrivals = sum(1 for _, event_id, _ in arrivals if event_id not in attributed)
    OrmQ.objects.filter(key=MONEY).delete()  # what is left of the stop's (harmless) execute copies
    ledger_ok = ledger_verify_report().ok
    problems = log_problems()
    h, s = phases["hot"], phases["spread"]

    def ratio(a, b):
        return round(a / b, 3) if a and b else None

    hot_ratio = ratio(h["people_fully_paid_per_s"], s["people_fully_paid_per_s"])
    ratios = {
        "hot_ratio_people_fully_paid": hot_ratio,
        "hot_ratio_ingest_single": ratio(h["ingest"]["single"]["events_per_s"], s["ingest"]["single"]["events_per_s"]),
        "hot_ratio_ingest_bulk": ratio(h["ingest"]["bulk"]["events_per_s"], s["ingest"]["bulk"]["events_per_s"]),
        "drain_ratio_hot": h["drain_ratio"],
        "drain_ratio_spread": s["drain_ratio"],
    }
    executions = sum(p["tasks"]["execute_runs"] + p["tasks"]["executed_inline"] for p in (h, s))
    payouts = h["tasks"]["payouts"] + s["tasks"]["payouts"]
    p99s = [p["webhooks"]["change_to_arrival"]["p99_s"] for p in (h, s)]
    targets = [
        target("hot ratio: people fully paid/s, hot ÷ spread", hot_ratio, unit="ratio", target=TARGETS["hot"]),
        target(
            "drain ratio (hot): fully paid/s ÷ single ingest/s",
            h["drain_ratio"],
            unit="ratio",
            target=TARGETS["drain"],
        ),
        target(
            "executions per payout (execute task runs + inline)",
            round(executions / payouts, 3) if payouts else None,
            unit="runs",
            target=TARGETS["execute"],
            op="<=",
        ),
        target(
            "execute runs for settled payouts",
            h["tasks"]["execute_runs_for_settled"] + s["tasks"]["execute_runs_for_settled"],
            unit="runs",
            target=0,
            op="<=",
        ),
        target(
            "task runs by another class's cluster (route or schedule)",
            sum(sum(p["tasks"]["off_class"].values()) for p in (h, s)),
            unit="tasks",
            target=0,
            op="<=",
        ),
        target(
            "tasks over their timeout",
            h["tasks"]["over_timeout"] + s["tasks"]["over_timeout"],
            unit="tasks",
            target=0,
            op="<=",
        ),
        target(
            "queue depth after each phase",
            max(h["drained"]["queued"], s["drained"]["queued"]),
            unit="tasks",
            target=0,
            op="<=",
        ),
        target(
            "change → webhook arrival p99 (worst phase)",
            None if None in p99s else max(p99s),
            unit="s",
            target=TARGETS["webhook_p99_s"],
            op="<=",
        ),
        target(
            f"SIGTERM → exit, money clusters, ≥ 1,000 queued ({stop.get('money_queued_at_sigterm')})",
            stop.get("max_s") if (stop.get("money_queued_at_sigterm") or 0) >= 1000 else None,
            unit="s",
            target=TARGETS["stop_s"],
            op="<=",
        ),
    ]
    checks = {f"{name}_{k}": v for name, p in phases.items() for k, v in p["checks"].items()}
    checks["webhook_events_all_of_a_phase"] = stray_events == 0 and stray_arrivals == 0
    checks["ledger_verifies"] = ledger_ok
    payload = {
        "meta": meta(
            postgres_version=postgres,
            database=connection.settings_dict["NAME"],
            run_id=run,
            people_per_phase=args.people,
            nodes=args.nodes,
            webhooks_nice=args.webhooks_nice,
            clusters_per_node={name or MONEY: 1 for name in CLASSES},
            q_cluster={k: settings.Q_CLUSTER.get(k) for k in ("workers", "queue_limit", "timeout", "retry")},
            alt_clusters=settings.Q_CLUSTER.get("ALT_CLUSTERS"),
            endpoints=args.endpoints,
            event_types=EVENT_TYPES,
            single_callers=CALLERS,
            bulk_call_size=BULK_SIZE,
            logs=str(_LOGS),
            task_runs="every django_q_task row written, copied by a trigger (django-q2 prunes successes)",
            lock_samples="pg_stat_activity every 0.2 s, this database, active backends",
        ),
        "phases": phases,
        "ratios": ratios,
        "stop_under_load": stop,
        "other_clusters_sigterm_to_exit_s": final_stops,
        "cluster_log_problems": problems,
        "webhook_events_of_no_phase": stray_events,
        "arrivals_of_no_phase": stray_arrivals,
        "checks": checks,
        "all_checks_passed": all(checks.values()),
        "targets": targets,
    }
    path = write_results("viral" if args.people == PEOPLE else "viral-smoke", payload)
    print_report(phases, ratios, stop, final_stops, problems)
    print(format_targets(targets))
    print(f"checks: {checks}")
    print(f"\nWritten {path.relative_to(PROJECT_DIR)} (cluster logs in {_LOGS})", flush=True)
    if not payload["all_checks_passed"]:
        print("SOME CHECKS FAILED: the figures above are not valid.", file=sys.stderr)
        return 1
    return 0


def print_report(phases, ratios, stop, final_stops, problems) -> None:
    h, s = phases["hot"], phases["spread"]

    def both(f):
        return [f(h), f(s)]

    rows = [
        ["campaigns", *both(lambda p: p["campaigns"])],
        ["ingest single, 8 procs (events/s)", *both(lambda p: p["ingest"]["single"]["events_per_s"])],
        ["ingest single p99 (ms)", *both(lambda p: p["ingest"]["single"]["per_event"]["p99_ms"])],
        ["ingest bulk (events/s)", *both(lambda p: p["ingest"]["bulk"]["events_per_s"])],
        ["rewards created (of people)", *both(lambda p: f"{p['rewards']} ({p['people']})")],
        ["people fully paid", *both(lambda p: p["fully_paid"])],
        ["people fully paid/s", *both(lambda p: p["people_fully_paid_per_s"])],
        ["burst → last fully paid (s)", *both(lambda p: p["burst_to_last_fully_paid_s"])],
        ["drain ratio", *both(lambda p: p["drain_ratio"])],
        ["event → settled p50 (s)", *both(lambda p: p["event_to_settled"]["p50_s"])],
        ["event → settled p99 (s)", *both(lambda p: p["event_to_settled"]["p99_s"])],
        ["event → settled max (s)", *both(lambda p: p["event_to_settled"]["max_s"])],
        ["event → fully paid p99 (s)", *both(lambda p: p["event_to_fully_paid"]["p99_s"])],
        ["webhook deliveries", *both(lambda p: p["webhooks"]["deliveries_expected"])],
        ["webhook deliveries/s", *both(lambda p: p["webhooks"]["deliveries_per_s"])],
        ["change → webhook p50 (s)", *both(lambda p: p["webhooks"]["change_to_arrival"]["p50_s"])],
        ["change → webhook p99 (s)", *both(lambda p: p["webhooks"]["change_to_arrival"]["p99_s"])],
        ["change → webhook max (s)", *both(lambda p: p["webhooks"]["change_to_arrival"]["max_s"])],
        ["execute task runs per payout", *both(lambda p: p["tasks"]["execute_runs_per_payout"])],
        ["payouts executed inline (no execute task)", *both(lambda p: p["tasks"]["executed_inline"])],
        ["executions per payout (task + inline)", *both(lambda p: p["tasks"]["executions_per_payout"])],
        ["execute runs for settled payouts", *both(lambda p: p["tasks"]["execute_runs_for_settled"])],
        ["tasks over timeout", *both(lambda p: p["tasks"]["over_timeout"])],
        ["failed task runs", *both(lambda p: sum(p["tasks"]["failed"].values()))],
        ["lock-wait share of active backends", *both(lambda p: p["locks"]["lock_wait_share"])],
        ["active backends (mean)", *both(lambda p: p["locks"]["active_backends_mean"])],
        ["queue left at the deadline", *both(lambda p: p["drained"]["queued"])],
        ["drained before the next phase", *both(lambda p: p["drained_before_next"])],
    ]
    for key in sorted({k for p in (h, s) for k in p["queue"]["depth"]}):
        rows.append([f"max queue depth {key}", *both(lambda p, k=key: p["queue"]["depth"].get(k))])
        rows.append([f"oldest queued {key} (s)", *both(lambda p, k=key: p["queue"]["oldest_s"].get(k))])
    print()
    print(format_table(["measure", "hot (1 campaign)", f"spread ({SPREAD})"], rows))
    print(f"\nratios: {ratios}")
    for name, p in phases.items():
        for kind in ("single", "bulk"):
            i = p["ingest"][kind]
            print(f"{name}: ingest {kind} outcomes {i['outcomes']}; error samples {i['error_samples'] or 'none'}")
        print(f"{name}: tasks by function {p['tasks']['by_func']}")
        print(f"{name}: execute results {p['tasks']['execute_results']}; failed {p['tasks']['failed']}")
        print(f"{name}: task runs by another class's cluster {p['tasks']['off_class'] or 'none'}")
        print(f"{name}: deepest per function {sorted(p['queue']['func_depth'].items(), key=lambda kv: -kv[1])[:6]}")
        print(f"{name}: lock waits on {p['locks']['top_relations']}")
        print(f"{name}: waiting statements {p['locks']['top_waiting_statements'][:3]}")
    print(f"stop under load: {stop}; other clusters: {final_stops}")
    print(f"cluster log errors: {problems['by_message'] or 'none'}")
    print()


if __name__ == "__main__":
    raise SystemExit(main())
