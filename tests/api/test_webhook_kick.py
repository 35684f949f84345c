"""Webhook events are collected right after the commit that wrote their audit rows (a debounced
kick on top of the every-minute tick), and collectors running at once never emit an event twice."""

import json
import threading
from collections import Counter

import pytest
from django.db import connection

from campaigns import webhook_kick
from campaigns.models import WebhookDelivery, WebhookEvent
from campaigns.services import brand_topup_record, campaign_pause, campaign_resume, event_ingest_bulk
from campaigns.webhooks import webhook_endpoint_create, webhook_events_collect
from tests.api.conftest import ingest, login_event


@pytest.fixture
def kick(settings, monkeypatch):
    """The kick switched on, its debounce state fresh; a timer it armed is waited for."""
    settings.WEBHOOK_COLLECT_ON_COMMIT = True
    monkeypatch.setattr(webhook_kick, "_last_kick", float("-inf"))
    monkeypatch.setattr(webhook_kick, "_trailing", None)
    yield webhook_kick
    timer = webhook_kick._trailing
    if timer is not None:
        timer.cancel()
        timer.join()


def test_a_committed_reward_is_collected_and_delivered_without_the_tick(
    brand, campaign, receiver, kick, django_capture_on_commit_callbacks
):
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    with django_capture_on_commit_callbacks(execute=True):  # the commit; tasks run inline in tests
        result = ingest(campaign)
    event = WebhookEvent.objects.get(type="reward.held")
    assert event.data["reward"]["id"] == result.reward.pk
    ((_, body),) = receiver.requests
    assert json.loads(body)["id"] == event.public_id


@pytest.fixture
def kicks(kick, monkeypatch):
    """The kicks that followed commits (``collect_kick`` calls), none enqueued for real."""
    calls: list[int] = []
    monkeypatch.setattr(webhook_kick, "collect_kick", lambda: calls.append(1))
    return calls


def test_audit_rows_kick_a_collection_after_the_commit_only_when_switched_on(
    campaign, settings, kicks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        campaign_pause(campaign=campaign, reason="test")  # writes a CampaignEvent
        assert kicks == []  # not before the commit
    assert kicks == [1]
    settings.WEBHOOK_COLLECT_ON_COMMIT = False
    with django_capture_on_commit_callbacks(execute=True):
        campaign_resume(campaign=campaign)  # another CampaignEvent
    assert kicks == [1]


def test_kicks_are_debounced_and_the_last_commit_still_gets_a_collection(kick, monkeypatch):
    """A burst of commits in one process: one collection at once, one more when the window ends
    (covering the commits in between), none per commit."""
    enqueued: list[str] = []
    monkeypatch.setattr(webhook_kick, "webhook_collect_enqueue", lambda: enqueued.append(webhook_kick.COLLECT_TASK))
    monkeypatch.setattr(webhook_kick, "KICK_INTERVAL_SECONDS", 0.3)
    for _ in range(20):
        webhook_kick.collect_kick()
    assert enqueued == [webhook_kick.COLLECT_TASK]
    timer = webhook_kick._trailing
    assert timer is not None
    timer.join(timeout=5)
    assert enqueued == [webhook_kick.COLLECT_TASK] * 2 and webhook_kick._trailing is None
    webhook_kick.collect_kick()  # within the new window: armed again, not sent at once
    assert len(enqueued) == 2 and webhook_kick._trailing is not None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_collectors_running_at_once_emit_and_deliver_each_row_once(brand, campaign, receiver):
    """Four collectors started together on PostgreSQL over the same 40 new audit rows: every row
    becomes exactly one event and one delivery, and the receiver gets each event id once."""
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    for _ in range(40):
        ingest(campaign)
    barrier = threading.Barrier(4)
    emitted: list[int] = []
    errors: list[Exception] = []

    def collector() -> None:
        try:
            barrier.wait()
            emitted.append(webhook_events_collect())
        except Exception as exc:  # noqa: BLE001 - asserted on below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=collector) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(emitted) == 40 and WebhookEvent.objects.filter(type="reward.held").count() == 40
    assert WebhookDelivery.objects.count() == 40
    ids = Counter(json.loads(body)["id"] for _, body in receiver.requests)
    assert len(ids) == 40 and set(ids.values()) == {1}


def test_a_transaction_kicks_once_however_many_rows_it_saves(campaign, kicks, django_capture_on_commit_callbacks):
    payloads = [login_event(campaign) for _ in range(20)]
    with django_capture_on_commit_callbacks(execute=True):
        event_ingest_bulk(brand=campaign.brand, payloads=payloads)  # 20 rewards + 20 audit rows
    assert kicks == [1]


def test_a_top_up_written_through_the_ledger_kicks_a_collection(brand, kicks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        brand_topup_record(
            brand=brand, amount_minor=10_000, currency="EUR", bank_account_code="NLBANK", idempotency_key="kick-topup"
        )
    assert kicks == [1]
