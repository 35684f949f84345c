"""/healthz, /readyz and /metrics (core.health, core.metrics): probes answer before the host check,
readiness names what failed, and metrics are scraped only with a token or from an allowed address."""

import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client
from django.utils import timezone
from django_q.models import OrmQ, Schedule, Task
from prometheus_client import parser

from core import health, metrics
from core.tasks import AUDIT_BROKEN
from reconciliation.metrics import LEDGER_VERIFY_TASK as LEDGER

AUDIT = "core.tasks.audit_verify_task"
ROOT = Path(__file__).resolve().parents[2]

TOKEN = "t0k3n-for-the-scraper-only-" + "x" * 8


def scrape(client: Client | None = None) -> dict[str, dict[tuple, float]]:
    response = (client or Client()).get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    samples: dict[str, dict[tuple, float]] = {}
    for family in parser.text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_IPS = []


def test_healthz_answers_without_the_database_whatever_the_host():
    # no db fixture: a query would fail the test; an address as Host is not in ALLOWED_HOSTS
    response = Client().get("/healthz", HTTP_HOST="10.0.0.7")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_green_when_the_database_migrations_and_queues_are(db):
    response = Client().get("/readyz/", HTTP_HOST="10.0.0.7")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok" and body["failed"] == []
    assert {"database", "migrations", "queue:joyback", "queue:ticks", "queue:notices", "queue:webhooks"} <= set(
        body["checks"]
    )


def test_readyz_turns_red_naming_the_class_whose_queue_is_stuck(db, settings):
    # given a webhooks task nobody took for ten minutes, and a money task a worker holds
    settings.READY_QUEUE_MAX_AGE_SECONDS = 300
    now = timezone.now()
    OrmQ.objects.create(key="webhooks", payload="x", lock=now - timedelta(minutes=10))
    OrmQ.objects.create(key="joyback", payload="y", lock=now + timedelta(seconds=60))
    # when the load balancer asks
    response = Client().get("/readyz")
    # then 503, naming the stuck class only
    assert response.status_code == 503
    body = response.json()
    assert body["failed"] == ["queue:webhooks"]
    assert body["checks"]["queue:webhooks"]["waiting"] == 1
    assert body["checks"]["queue:webhooks"]["oldest_age_seconds"] >= 600
    assert body["checks"]["queue:joyback"]["ok"] is True
    # and a deployment that leaves queues out of readiness stays green
    settings.READY_QUEUE_MAX_AGE_SECONDS = 0
    assert Client().get("/readyz").status_code == 200


def test_readyz_turns_red_while_a_migration_is_not_applied(db, monkeypatch):
    monkeypatch.setattr(health, "_migrations_applied", False)
    latest = MigrationRecorder.Migration.objects.filter(app="core").order_by("-id").first()
    latest.delete()  # rolled back with the test's transaction
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["failed"] == ["migrations"]
    assert f"core.{latest.name}" in response.json()["checks"]["migrations"]["pending"]


def test_metrics_need_the_token_or_an_allowed_address(db, settings):
    client = Client(REMOTE_ADDR="203.0.113.9")
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403
    settings.METRICS_ALLOWED_IPS = ["198.51.100.0/24", "203.0.113.0/24"]
    assert client.get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="192.0.2.1").get("/metrics").status_code == 403


def test_a_scrape_reports_each_class_queue_and_http_metrics(db):
    now = timezone.now()
    OrmQ.objects.create(key="notices", payload="a", lock=now - timedelta(seconds=30))
    OrmQ.objects.create(key="notices", payload="b", lock=now - timedelta(seconds=5))
    OrmQ.objects.create(key="webhooks", payload="c", lock=now + timedelta(seconds=90))
    Client().get("/healthz")
    samples = scrape()
    waiting = samples["joyback_queue_tasks_waiting"]
    assert waiting[(("queue", "notices"),)] == 2
    assert waiting[(("queue", "joyback"),)] == 0
    assert samples["joyback_queue_tasks_running"][(("queue", "webhooks"),)] == 1
    assert samples["joyback_queue_oldest_age_seconds"][(("queue", "notices"),)] >= 30
    assert samples["joyback_queue_oldest_age_seconds"][(("queue", "ticks"),)] == 0
    assert all(value == 1 for value in samples["joyback_metrics_collector_up"].values())
    assert {("collector", n) for n in ("queue", "payouts", "webhooks", "notices", "statements", "verifications")} == {
        labels[0] for labels in samples["joyback_metrics_collector_up"]
    }
    assert "django_http_requests_before_middlewares_total" in samples


def test_a_failing_collector_is_reported_and_the_others_still_answer(db, monkeypatch):
    def broken():
        raise RuntimeError("boom")

    monkeypatch.setitem(metrics._collectors, "broken", broken)
    samples = scrape()
    assert samples["joyback_metrics_collector_up"][(("collector", "broken"),)] == 0
    assert samples["joyback_metrics_collector_up"][(("collector", "queue"),)] == 1
    assert "joyback_queue_tasks_waiting" in samples


@pytest.mark.postgres
def test_django_prometheus_counts_queries_on_psycopg_3(db):
    # production swaps in django-prometheus's PostgreSQL backend (METRICS_DB): it must work on psycopg 3
    from django.db import connection
    from django_prometheus.db import execute_total
    from django_prometheus.db.backends.postgresql.base import DatabaseWrapper

    wrapper = DatabaseWrapper({**connection.settings_dict, "ENGINE": DatabaseWrapper.__module__}, alias="metrics")
    before = execute_total.labels("metrics", "postgresql")._value.get()
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT %s::int + 1", [41])
            assert cursor.fetchone() == (42,)
    finally:
        wrapper.close()
    # our query, after whatever Django runs when it connects
    assert execute_total.labels("metrics", "postgresql")._value.get() >= before + 1


def _last_run(func: str, *, result, success: bool = True, minutes_ago: int = 5) -> None:
    """The schedule of ``func`` last enqueued a task that has finished with ``result``."""
    stopped = timezone.now() - timedelta(minutes=minutes_ago)
    task = Task.objects.create(
        id=uuid.uuid4().hex, name=func, func=func, started=stopped, stopped=stopped, success=success, result=result
    )
    Schedule.objects.filter(func=func).update(task=task.id)


def test_the_last_ledger_and_audit_verifications_are_reported(db):
    # given the daily schedules (created by migrations), whose last runs: the books verified, the audit trail broke
    assert Schedule.objects.filter(func__in=[LEDGER, AUDIT]).count() == 2
    _last_run(LEDGER, result=True)
    _last_run(AUDIT, result=f"{AUDIT_BROKEN}: 2 problem(s)", minutes_ago=30)
    # when scraped
    samples = scrape()
    # then each check says whether it passed and how long ago it ran
    assert samples["joyback_verification_ok"] == {(("check", "audit"),): 0, (("check", "ledger"),): 1}
    assert samples["joyback_verification_age_seconds"][(("check", "audit"),)] >= 30 * 60
    # a run that raised is a failure whatever it returned
    _last_run(LEDGER, result=None, success=False)
    assert scrape()["joyback_verification_ok"][(("check", "ledger"),)] == 0


def test_a_verification_that_never_finished_reports_nothing(db):
    Schedule.objects.filter(func=LEDGER).update(task="still-running")
    assert (("check", "ledger"),) not in scrape().get("joyback_verification_ok", {})


def test_gunicorn_workers_metrics_are_summed_across_processes(tmp_path):
    # given two "workers" (processes) in multiprocess mode, each serving requests
    script = (
        "import django, sys; django.setup(); from django.test import Client; "
        "[Client().get('/favicon.ico') for _ in range(int(sys.argv[1]))]"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    for requests in (2, 3):
        subprocess.run([sys.executable, "-c", script, str(requests)], env=env, cwd=ROOT, check=True, timeout=120)
    # when a third renders the metrics
    render = (
        "import django; django.setup(); from core.metrics import metrics_render; "
        "import sys; sys.stdout.write(metrics_render().decode())"
    )
    out = subprocess.run(
        [sys.executable, "-c", render], env=env, cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    ).stdout
    # then it counts every request of both
    totals = {
        s.name: s.value
        for family in parser.text_string_to_metric_families(out)
        for s in family.samples
        if s.name == "django_http_requests_before_middlewares_total"
    }
    assert totals == {"django_http_requests_before_middlewares_total": 5}
