"""Webhooks under load (issue 14): collection and sending are bounded per task run, a delivery is
in the queue at most once, deliveries travel in batches per endpoint, and a busy qcluster stops on
SIGTERM within 30 s."""

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone
from django_q.conf import Conf

from campaigns import webhooks
from campaigns.models import DeliveryStatus, WebhookCursor, WebhookDelivery, WebhookEvent
from campaigns.services import event_ingest_bulk
from campaigns.webhooks import (
    QUEUED_STALE_AFTER,
    SEND_TASK,
    webhook_deliveries_enqueue_due,
    webhook_deliveries_send,
    webhook_endpoint_create,
    webhook_events_collect,
)
from recipients import crypto
from tests.api.conftest import login_event


def _endpoints(brand, receiver, n: int):
    return [
        webhook_endpoint_create(brand=brand, url=f"{receiver.url}/{i}", event_types=["reward.held"]).endpoint
        for i in range(n)
    ]


def _enqueued(callbacks, func: str) -> list[tuple]:
    """The arguments of the ``func`` tasks a captured commit would enqueue (core.queue's
    ``enqueue`` in a transaction registers ``lambda: async_task(func, *args)`` when tasks run inline)."""
    calls = []
    for callback in callbacks:
        cells = dict(zip(callback.__code__.co_freevars, callback.__closure__ or (), strict=True))
        if "func" in cells and cells["func"].cell_contents == func:
            calls.append(cells["args"].cell_contents)
    return calls


def _send_tasks(callbacks) -> list[list[int]]:
    return [args[0] for args in _enqueued(callbacks, SEND_TASK)]


def test_a_bulk_call_is_a_few_send_tasks_per_endpoint_not_one_per_delivery(
    brand, campaign, receiver, django_capture_on_commit_callbacks
):
    endpoints = _endpoints(brand, receiver, 3)
    event_ingest_bulk(brand=brand, payloads=[login_event(campaign) for _ in range(150)])  # the budget pays 200
    with django_capture_on_commit_callbacks() as callbacks:
        assert webhook_events_collect() == 150
    tasks = _send_tasks(callbacks)
    assert len(tasks) == 3 * 2  # 150 deliveries per endpoint in tasks of 100
    assert sorted(len(t) for t in tasks) == [50] * 3 + [100] * 3
    for ids in tasks:
        assert len({WebhookDelivery.objects.get(pk=i).endpoint_id for i in ids}) == 1
    assert sum(len(t) for t in tasks) == WebhookDelivery.objects.count() == 450
    assert not WebhookDelivery.objects.filter(queued_at__isnull=True).exists()
    assert {e.pk for e in endpoints} == set(WebhookDelivery.objects.values_list("endpoint_id", flat=True))


def test_the_tick_never_queues_a_delivery_twice_until_its_task_is_lost(
    brand, campaign, receiver, django_capture_on_commit_callbacks
):
    _endpoints(brand, receiver, 2)
    event_ingest_bulk(brand=brand, payloads=[login_event(campaign) for _ in range(5)])
    webhook_events_collect()  # the emit queued all ten
    with django_capture_on_commit_callbacks() as callbacks:
        for _ in range(5):  # five ticks while the send tasks wait in the queue
            assert webhook_deliveries_enqueue_due() == 0
    assert _send_tasks(callbacks) == []
    WebhookDelivery.objects.update(queued_at=timezone.now() - QUEUED_STALE_AFTER - timedelta(seconds=1))
    with django_capture_on_commit_callbacks() as callbacks:
        assert webhook_deliveries_enqueue_due() == 10  # lost: queued again, once
        assert webhook_deliveries_enqueue_due() == 0
    assert sorted(len(t) for t in _send_tasks(callbacks)) == [5, 5]


def test_a_send_task_run_twice_posts_each_delivery_once(brand, campaign, receiver):
    _endpoints(brand, receiver, 1)
    event_ingest_bulk(brand=brand, payloads=[login_event(campaign) for _ in range(30)])
    webhook_events_collect()
    ids = list(WebhookDelivery.objects.order_by("pk").values_list("pk", flat=True))
    first = webhook_deliveries_send(delivery_ids=ids)
    again = webhook_deliveries_send(delivery_ids=ids)  # the broker handed the task out a second time
    assert set(first.statuses.values()) == {DeliveryStatus.DELIVERED} and len(first.statuses) == 30
    assert again.statuses == {}
    assert len(receiver.requests) == 30
    assert not WebhookDelivery.objects.filter(queued_at__isnull=False).exists()


def test_a_send_task_out_of_time_hands_the_rest_to_one_follow_up(
    brand, campaign, receiver, django_capture_on_commit_callbacks
):
    _endpoints(brand, receiver, 1)
    event_ingest_bulk(brand=brand, payloads=[login_event(campaign) for _ in range(10)])
    webhook_events_collect()
    ids = list(WebhookDelivery.objects.order_by("pk").values_list("pk", flat=True))
    with django_capture_on_commit_callbacks() as callbacks:
        sent = webhook_deliveries_send(delivery_ids=ids, budget_seconds=0)
    assert len(sent.statuses) == 1 and sent.continued == 9 and len(receiver.requests) == 1
    assert _send_tasks(callbacks) == [ids[1:]]
    rest = WebhookDelivery.objects.filter(pk__in=ids[1:])
    assert {(d.status, d.attempt) for d in rest} == {(DeliveryStatus.PENDING, 0)}
    assert all(d.queued_at is not None for d in rest)  # still queued: the tick leaves them alone
    assert webhook_deliveries_enqueue_due() == 0


def test_an_endpoint_that_does_not_answer_stops_the_batch(brand, campaign, settings):
    settings.WEBHOOK_ALLOW_HTTP = True
    webhook_endpoint_create(brand=brand, url="http://127.0.0.1:9/none", event_types=["reward.held"])
    event_ingest_bulk(brand=brand, payloads=[login_event(campaign) for _ in range(40)])
    webhook_events_collect()
    ids = list(WebhookDelivery.objects.order_by("pk").values_list("pk", flat=True))
    sent = webhook_deliveries_send(delivery_ids=ids)
    assert len(sent.statuses) == 1 and sent.released == 39
    tried = WebhookDelivery.objects.get(pk=ids[0])
    assert tried.attempt == 1 and tried.error and tried.next_attempt_at > timezone.now()
    rest = WebhookDelivery.objects.filter(pk__in=ids[1:])
    assert {(d.status, d.attempt, d.queued_at) for d in rest} == {(DeliveryStatus.PENDING, 0, None)}
    assert webhook_deliveries_enqueue_due() == 39  # the tick tries them again


def test_a_collection_out_of_time_queues_one_continuation_and_loses_nothing(
    brand, campaign, receiver, monkeypatch, django_capture_on_commit_callbacks
):
    _endpoints(brand, receiver, 1)
    monkeypatch.setattr(webhooks, "COLLECT_LIMIT", 4)
    event_ingest_bulk(brand=brand, payloads=[login_event(campaign) for _ in range(10)])
    with django_capture_on_commit_callbacks() as callbacks:
        assert webhook_events_collect(budget_seconds=0) == 4  # one page, then out of time
    assert set(WebhookCursor.objects.values_list("queued_at", flat=True)) != {None}
    assert len(_enqueued(callbacks, "campaigns.webhook_tasks.webhook_collect_task")) == 1
    assert webhook_events_collect() == 6  # the continuation (or any collection) finds the rest
    assert WebhookEvent.objects.filter(type="reward.held").count() == 10
    assert WebhookDelivery.objects.count() == 10


class _SlowReceiver:
    """127.0.0.1, answers each POST after ``delay`` seconds; counts event ids per endpoint path."""

    def __init__(self, delay: float):
        self.seen: Counter = Counter()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(delay)
                receiver.seen[(self.path, self.headers["JoyBack-Event-Id"])] += 1
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_busy_qcluster_stops_on_sigterm_within_30_seconds(brand, campaign, monkeypatch, settings, tmp_path):
    """Two workers busy with send tasks to a slow receiver (0.3 s per POST, 50 deliveries per
    endpoint), more tasks queued: SIGTERM to the main process only. It exits within 30 s, no
    delivery is left claimed, and none reached the receiver twice."""
    monkeypatch.setattr(Conf, "SYNC", False)  # this process enqueues into the real queue
    settings.WEBHOOK_ALLOW_HTTP = True
    receiver = _SlowReceiver(delay=0.3)
    _endpoints(brand, receiver, 4)
    event_ingest_bulk(brand=brand, payloads=[login_event(campaign) for _ in range(50)])
    webhook_events_collect()  # 200 deliveries: four send tasks in the ORM broker's queue
    env = {
        **os.environ,
        # The local settings let webhooks go to 127.0.0.1 over http; sync off, DEBUG off.
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DEBUG": "0",
        "DATABASE_URL": _database_url(),
        "SECRET_KEY": django_settings.SECRET_KEY,  # task payloads are signed with it
        "FIELD_ENCRYPTION_KEY": crypto._secret("FIELD_ENCRYPTION_KEY"),
        "FIELD_FINGERPRINT_KEY": crypto._secret("FIELD_FINGERPRINT_KEY"),
        "WEBHOOK_ALLOW_HTTP": "1",
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": "1",
        "Q_CLUSTER_NAME": "webhooks",  # the cluster whose queue holds the send tasks (settings.Q_ROUTES)
        "Q_WORKERS_WEBHOOKS": "2",
        "Q_SYNC": "0",
        "SANDBOX_STORE_PATH": str(tmp_path / "sandbox.sqlite3"),
    }
    log = open(tmp_path / "qcluster.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, str(Path(django_settings.BASE_DIR) / "manage.py"), "qcluster", "--skip-checks"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while sum(receiver.seen.values()) < 10 and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "qcluster.log").read_text()[-2000:]
            time.sleep(0.1)
        assert sum(receiver.seen.values()) >= 10, "the cluster never started sending"
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"qcluster still running 30 s after SIGTERM:\n{(tmp_path / 'qcluster.log').read_text()[-2000:]}"
            )
        stopped_in = time.monotonic() - stopping
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        receiver.server.shutdown()
    assert stopped_in < 30
    assert not WebhookDelivery.objects.filter(status=DeliveryStatus.SENDING).exists()
    delivered = WebhookDelivery.objects.filter(status=DeliveryStatus.DELIVERED).count()
    assert 0 < delivered < 200 and set(receiver.seen.values()) == {1}
