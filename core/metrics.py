"""Prometheus metrics: the process's own (HTTP and database, by django-prometheus) and the
system's state, computed from the database at each scrape by the collectors the apps register.

core imports no app, so it cannot know what a payout or a notice is. Each app registers in its
``ready()`` a collector — a function returning ``prometheus_client`` metric families — for the
state it owns (``metrics_collector_register``), as the domains register matchers with the books.
core registers the one it owns: the django-q2 queues, per class of work.

A scrape renders the process's registry, then runs every collector against the database. A
collector that fails (a table being migrated, a lock timeout) is logged and reported as
``joyback_metrics_collector_up{collector=…} 0``: the others still answer, and an alert on that
series says which view is blind. The state gauges are the same on every web node (they read the
one database), so dashboards take ``max()`` over instances; the HTTP and DB counters are each
process's own, summed over gunicorn's workers through ``PROMETHEUS_MULTIPROC_DIR``
(``deploy/gunicorn.conf.py``).

Who may read ``/metrics`` is decided in ``core.health`` (a bearer token or allowed addresses).
"""

import logging
import os
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.models import Count, Min, Q
from django.utils import timezone
from django_q.models import OrmQ, Schedule, Task
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric

from core.replica import REPLICA, replica_configured
from core.tasks import AUDIT_BROKEN

logger = logging.getLogger(__name__)

PREFIX = "joyback_"

Collector = Callable[[], Iterable[Metric]]
_collectors: dict[str, Collector] = {}


def metrics_collector_register(name: str, collector: Collector) -> None:
    """Have ``collector()`` run at each scrape; its metric names should start with ``joyback_``.
    Registering a name again replaces its collector (an app's ``ready()`` may run twice in tests)."""
    _collectors[name] = collector


def gauge(name: str, documentation: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, documentation, labels=list(labels))


def age_seconds(since: datetime | None, now: datetime) -> float:
    """Seconds from ``since`` to ``now``; 0 for nothing waiting (so an alert on ``> N`` stays quiet)."""
    return max((now - since).total_seconds(), 0.0) if since else 0.0


class _Registered:
    """The registered collectors as one prometheus_client collector, each run in isolation."""

    def collect(self) -> Iterable[Metric]:
        up = gauge(
            "metrics_collector_up", "1 when the collector answered at this scrape, 0 when it failed.", ["collector"]
        )
        for name, collector in sorted(_collectors.items()):
            try:
                families = list(collector())
            except DatabaseError as exc:  # the database is down or busy: one line, not a traceback a scrape
                logger.warning("metrics collector %s: %s", name, exc.__class__.__name__)
                up.add_metric([name], 0)
                continue
            except Exception:
                logger.exception("metrics collector %s failed", name)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from families
        yield up


def metrics_render() -> bytes:
    """The text exposition of this process (or of all gunicorn workers, in multiprocess mode)
    followed by the registered collectors' state."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        process = CollectorRegistry()
        multiprocess.MultiProcessCollector(process)
    else:
        process = REGISTRY
    state = CollectorRegistry(auto_describe=False)
    state.register(_Registered())
    return generate_latest(process) + generate_latest(state)


def queue_classes() -> list[str]:
    """Every class of background work: the default cluster (money) and the ``ALT_CLUSTERS``. Each
    reads the django-q2 queue rows whose ``key`` is its name (``core.queue.task_class``)."""
    return [settings.Q_CLUSTER["name"], *settings.Q_CLUSTER.get("ALT_CLUSTERS", {})]


def queue_state(now: datetime | None = None) -> dict[str, tuple[int, int, float]]:
    """Per class: (tasks waiting for a worker, tasks a worker holds, seconds the oldest waiting
    one has waited). The ORM broker writes a task with ``lock`` = the enqueue time and moves it
    ``retry`` seconds ahead when a worker takes it; a task whose worker died comes back once that
    passes, and from then on counts as waiting again."""
    now = now or timezone.now()
    rows = (
        OrmQ.objects.values("key")
        .annotate(
            waiting=Count("id", filter=Q(lock__lte=now)),
            held=Count("id", filter=Q(lock__gt=now)),
            oldest=Min("lock", filter=Q(lock__lte=now)),
        )
        .order_by()
    )
    state = {name: (0, 0, 0.0) for name in queue_classes()}
    for row in rows:
        state[row["key"]] = (row["waiting"], row["held"], age_seconds(row["oldest"], now))
    return state


def queue_metrics() -> Iterable[Metric]:
    waiting = gauge("queue_tasks_waiting", "django-q2 tasks waiting for a worker, per class.", ["queue"])
    held = gauge("queue_tasks_running", "django-q2 tasks a worker has taken and not finished, per class.", ["queue"])
    oldest = gauge("queue_oldest_age_seconds", "How long the oldest waiting task has waited, per class.", ["queue"])
    for name, (count, running, age) in queue_state().items():
        waiting.add_metric([name], count)
        held.add_metric([name], running)
        oldest.add_metric([name], age)
    return [waiting, held, oldest]


metrics_collector_register("queue", queue_metrics)


# The scheduled verifications (the ledger's, the audit trail's): name → (the task its schedule
# runs, whether a result says the check passed). Each app registers its own.
_verifications: dict[str, tuple[str, Callable[[Any], bool]]] = {}


def verification_register(name: str, *, task: str, ok: Callable[[Any], bool]) -> None:
    _verifications[name] = (task, ok)


def verification_metrics() -> Iterable[Metric]:
    """The last finished run of each verification's schedule: the schedule keeps the id of the task
    it last enqueued, so this is two primary-key reads, never a scan of the task results. While
    that run is in flight (its result not yet saved) the check reports nothing."""
    now = timezone.now()
    passed = gauge("verification_ok", "1 when the last scheduled run of the check passed, 0 when it failed.", ["check"])
    age = gauge("verification_age_seconds", "Seconds since the last scheduled run of the check finished.", ["check"])
    for name, (task, ok) in sorted(_verifications.items()):
        task_id = Schedule.objects.filter(func=task).values_list("task", flat=True).first()
        row = Task.objects.filter(id=task_id).values_list("stopped", "success", "result").first() if task_id else None
        if row is None:
            continue
        stopped, success, result = row
        passed.add_metric([name], 1 if success and ok(result) else 0)
        age.add_metric([name], age_seconds(stopped, now))
    return [passed, age]


def audit_verified(result: Any) -> bool:
    return isinstance(result, str) and not result.startswith(AUDIT_BROKEN)


metrics_collector_register("verifications", verification_metrics)
verification_register("audit", task="core.tasks.audit_verify_task", ok=audit_verified)


# The standby's lag, read on the standby. A standby that has replayed everything it received
# while still streaming is 0 behind, however long ago the primary last wrote (the replay
# timestamp alone would grow on an idle primary); otherwise the age of the last transaction it
# replayed. Not in recovery at all: the "replica" is a primary, and lag is not reported.
REPLICA_LAG_SQL = """
SELECT pg_is_in_recovery(),
       CASE
         WHEN NOT pg_is_in_recovery() THEN NULL
         WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
              AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming') THEN 0
         ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0)
       END
"""


def replica_metrics() -> Iterable[Metric]:
    """``DATABASE_REPLICA_URL``'s state (core.replica). Readiness never looks at it: a lagging
    replica slows no write and decides nothing, so it must not take web nodes out."""
    with connections[REPLICA].cursor() as cursor:
        cursor.execute(REPLICA_LAG_SQL)
        in_recovery, lag = cursor.fetchone()
    standby = gauge("replica_is_standby", "1 when the read replica is a standby in recovery, 0 when it is a primary.")
    standby.add_metric([], 1 if in_recovery else 0)
    families = [standby]
    if in_recovery:
        seconds = gauge("replica_lag_seconds", "How far the read replica's replay is behind the primary, in seconds.")
        seconds.add_metric([], float(lag))
        families.append(seconds)
    return families


if replica_configured():
    metrics_collector_register("replica", replica_metrics)
