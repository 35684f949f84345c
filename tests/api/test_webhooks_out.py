"""Outgoing webhooks: signatures checked by an independent verifier, delivery to a real local
HTTP server, retries with backoff, disabling after 72 h with an e-mail, rotation, de-duplication."""

import hmac
import json
import time
from datetime import timedelta

from django.core import mail
from django.utils import timezone

from campaigns.models import BrandMembership, DeliveryStatus, WebhookDelivery, WebhookEvent
from campaigns.webhooks import (
    backoff,
    webhook_deliveries_enqueue_due,
    webhook_delivery_attempt,
    webhook_endpoint_create,
    webhook_endpoint_rotate_secret,
    webhook_events_collect,
)
from tests.api.conftest import ingest


def verify(header: str, body: bytes, secret: str, *, tolerance: int = 300) -> bool:
    """A receiver's verification, written from the documentation only (not our signing code)."""
    items = [part.split("=", 1) for part in header.split(",")]
    timestamp = next(int(v) for k, v in items if k == "t")
    candidates = [v for k, v in items if k == "v1"]
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, "sha256").hexdigest()
    fresh = abs(time.time() - timestamp) <= tolerance
    return fresh and any(hmac.compare_digest(mac, c) for c in candidates)


def _deliver_all():
    for delivery in WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING):
        webhook_delivery_attempt(delivery_id=delivery.pk)


def test_reward_event_is_delivered_signed(brand, campaign, receiver):
    created = webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    result = ingest(campaign)
    assert webhook_events_collect() == 1
    _deliver_all()
    ((headers, body),) = receiver.requests
    assert verify(headers["JoyBack-Signature"], body, created.secret)
    assert not verify(headers["JoyBack-Signature"], body + b" ", created.secret)
    payload = json.loads(body)
    assert payload["type"] == "reward.held" and payload["id"].startswith("evt_")
    assert payload["data"]["reward"]["id"] == result.reward.pk and payload["data"]["reward"]["amount_minor"] == 500
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.DELIVERED and delivery.response_code == 200


def test_collecting_twice_emits_once(brand, campaign, receiver):
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    ingest(campaign)
    assert webhook_events_collect() == 1
    assert webhook_events_collect() == 0
    assert WebhookEvent.objects.filter(type="reward.held").count() == 1


def test_brands_without_endpoints_get_no_events(brand, campaign):
    ingest(campaign)
    assert webhook_events_collect() == 0
    assert not WebhookEvent.objects.exists()


def test_late_committed_rows_below_the_cursor_are_still_collected(brand, campaign, receiver):
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    first = ingest(campaign)
    webhook_events_collect()
    WebhookEvent.objects.all().delete()  # as if the row had committed after the collector read past it
    assert webhook_events_collect() == 1
    assert WebhookEvent.objects.get().data["reward"]["id"] == first.reward.pk


def test_rotation_signs_with_both_secrets_then_only_the_new(brand, campaign, receiver):
    old = webhook_endpoint_create(brand=brand, url=receiver.url, event_types=[])
    new = webhook_endpoint_rotate_secret(endpoint=old.endpoint)
    ingest(campaign)
    webhook_events_collect()
    _deliver_all()
    headers, body = receiver.requests[-1]
    assert headers["JoyBack-Signature"].count("v1=") == 2
    assert verify(headers["JoyBack-Signature"], body, old.secret) and verify(
        headers["JoyBack-Signature"], body, new.secret
    )
    webhook_endpoint_rotate_secret(endpoint=new.endpoint, now=timezone.now() - timedelta(hours=25))
    newest = webhook_endpoint_rotate_secret(endpoint=new.endpoint, now=timezone.now() - timedelta(hours=25))
    WebhookDelivery.objects.update(status=DeliveryStatus.PENDING, next_attempt_at=timezone.now())
    _deliver_all()
    headers, body = receiver.requests[-1]
    assert headers["JoyBack-Signature"].count("v1=") == 1
    assert verify(headers["JoyBack-Signature"], body, newest.secret)


def test_failures_back_off_and_same_event_id_is_resent(brand, campaign, receiver):
    receiver.status = 500
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    ingest(campaign)
    webhook_events_collect()
    delivery = WebhookDelivery.objects.get()
    before = timezone.now()
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert delivery.attempt == 1 and delivery.response_code == 500
    assert delivery.next_attempt_at >= before + backoff(1)
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "skipped"  # not due yet
    receiver.status = 204
    webhook_delivery_attempt(delivery_id=delivery.pk, now=delivery.next_attempt_at)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED and delivery.attempt == 2
    ids = {json.loads(body)["id"] for _, body in receiver.requests}
    assert len(ids) == 1 and len(receiver.requests) == 2


def test_backoff_grows_and_is_capped():
    assert [backoff(n).total_seconds() for n in (1, 2, 3)] == [30, 60, 120]
    assert backoff(40) == timedelta(hours=6)


def test_endpoint_failing_for_three_days_is_disabled_and_the_brand_told(
    brand, campaign, receiver, django_user_model, django_capture_on_commit_callbacks
):
    owner = django_user_model.objects.create_user("owner", email="owner@joyshoes.example")
    BrandMembership.objects.create(user=owner, brand=brand, role="owner")
    receiver.status = 503
    endpoint = webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"]).endpoint
    ingest(campaign)
    webhook_events_collect()
    endpoint.failing_since = timezone.now() - timedelta(hours=73)
    endpoint.save()
    WebhookEvent.objects.update(created_at=timezone.now() - timedelta(hours=73))
    with django_capture_on_commit_callbacks(execute=True):
        status = webhook_delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk)
    assert status == DeliveryStatus.FAILED  # the event is older than 72 h: given up
    endpoint.refresh_from_db()
    assert not endpoint.is_active and endpoint.disabled_at and "failing since" in endpoint.disabled_reason
    assert [m.to for m in mail.outbox] == [["owner@joyshoes.example"]]
    assert f"POST /api/v1/webhook-endpoints/{endpoint.pk}/enable/" in mail.outbox[0].body
    assert "enable the endpoint again" in mail.outbox[0].body and "register" not in mail.outbox[0].body
    audit = endpoint.audit.get()
    assert (audit.kind, audit.channel, audit.reason) == ("endpoint.disabled", "worker", endpoint.disabled_reason)
    assert webhook_deliveries_enqueue_due() == 0


def test_unreachable_endpoint_records_the_error(brand, campaign, settings):
    settings.WEBHOOK_ALLOW_HTTP = True
    webhook_endpoint_create(brand=brand, url="http://127.0.0.1:9/none", event_types=[])
    ingest(campaign)
    webhook_events_collect()
    _deliver_all()
    delivery = WebhookDelivery.objects.filter(event__type="reward.held").get()
    assert delivery.status == DeliveryStatus.PENDING and delivery.response_code is None and delivery.error


def test_topup_budget_threshold_and_pause_events(brand, receiver):
    from tests.api.conftest import LOGIN_500
    from tests.campaigns.factories import funded_campaign

    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=[])
    small = funded_campaign(brand=brand, amount_minor=1000, rules=[LOGIN_500], slug="small")
    ingest(small)
    ingest(small)
    webhook_events_collect()
    types = sorted(WebhookEvent.objects.values_list("type", flat=True))
    assert types == ["campaign.budget_threshold"] * 3 + ["campaign.paused"] + ["reward.held"] * 2 + ["topup.received"]
    topup = WebhookEvent.objects.get(type="topup.received")
    assert topup.data["amount_minor"] == 1000 and topup.data["currency"] == "EUR"
