"""Enabling a webhook endpoint again after it was disabled for failing: the service (streak reset,
audit row, the outage's deliveries requeued within the retry window, idempotent), the API, the
portal and the admin."""

import json
import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.api_keys import api_key_create
from campaigns.models import (
    BrandRole,
    DeliveryStatus,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEndpointEvent,
    WebhookEvent,
)
from campaigns.services import brand_membership_set
from campaigns.webhooks import (
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_disabled_notify,
    webhook_endpoint_enable,
    webhook_event_emit,
    webhook_events_collect,
)
from core.exceptions import InvalidTransition
from tests.api.conftest import assert_problem, client_for, ingest
from tests.portal.conftest import make_user


@pytest.fixture
def outage(brand, campaign, receiver):
    """An endpoint disabled after a failing streak, and what the outage left in its log: a recent
    pending delivery, a pending one older than the retry window, a failed one still inside it,
    and one delivered before the outage."""
    endpoint = webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"]).endpoint
    for _ in range(4):
        ingest(campaign)
    webhook_events_collect()
    now = timezone.now()
    recent, old, failed, delivered = WebhookDelivery.objects.select_related("event").order_by("id")
    for delivery, age, status in [
        (recent, 1, DeliveryStatus.PENDING),
        (old, 80, DeliveryStatus.PENDING),
        (failed, 10, DeliveryStatus.FAILED),
        (delivered, 100, DeliveryStatus.DELIVERED),
    ]:
        delivery.event.created_at = now - timedelta(hours=age)
        delivery.event.save()
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=status,
            attempt=7,
            error="HTTP 503",
            next_attempt_at=now - timedelta(hours=2) if status == DeliveryStatus.PENDING else None,
            delivered_at=now - timedelta(hours=100) if status == DeliveryStatus.DELIVERED else None,
        )
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        is_active=False,
        disabled_at=now - timedelta(hours=1),
        disabled_reason="failing since 2026-11-26 10:00 UTC",
        failing_since=now - timedelta(hours=73),
        failure_streak=19,
    )
    endpoint.refresh_from_db()
    return endpoint, {"recent": recent, "old": old, "failed": failed, "delivered": delivered}


def _statuses(deliveries: dict) -> dict:
    return {name: WebhookDelivery.objects.get(pk=d.pk).status for name, d in deliveries.items()}


def _state(endpoint):
    return (
        WebhookEndpoint.objects.filter(pk=endpoint.pk).values("is_active", "failure_streak", "disabled_at").get(),
        list(WebhookDelivery.objects.filter(endpoint=endpoint).values_list("status", "next_attempt_at").order_by("id")),
        WebhookEndpointEvent.objects.count(),
    )


def test_enable_reactivates_resets_the_streak_and_requeues_the_outage(
    outage, django_user_model, django_capture_on_commit_callbacks
):
    endpoint, deliveries = outage
    staff = django_user_model.objects.create_user("ops")
    now = timezone.now()
    with django_capture_on_commit_callbacks() as callbacks:
        enabled = webhook_endpoint_enable(endpoint=endpoint, channel="portal", actor=staff, now=now)
    assert (enabled.requeued, enabled.expired) == (2, 1)
    endpoint.refresh_from_db()
    assert endpoint.is_active and endpoint.disabled_at is None and endpoint.disabled_reason == ""
    assert endpoint.failure_streak == 0 and endpoint.failing_since is None
    assert _statuses(deliveries) == {
        "recent": "pending",
        "old": "failed",
        "failed": "pending",
        "delivered": "delivered",
    }
    for name in ("recent", "failed"):
        assert WebhookDelivery.objects.get(pk=deliveries[name].pk).next_attempt_at == now
    old = WebhookDelivery.objects.get(pk=deliveries["old"].pk)
    assert old.next_attempt_at is None and "older than the retry window" in old.error
    audit = WebhookEndpointEvent.objects.get(endpoint=endpoint)
    assert (audit.kind, audit.channel, audit.actor) == ("endpoint.enabled", "portal", staff)
    assert audit.data["requeued"] == 2 and audit.data["expired"] == 1 and audit.data["failure_streak"] == 19
    assert audit.data["disabled_reason"] == "failing since 2026-11-26 10:00 UTC"
    assert len(callbacks) == 1  # the due deliveries are enqueued once it commits


def test_the_requeued_deliveries_reach_the_fixed_receiver(outage, receiver, django_capture_on_commit_callbacks):
    endpoint, deliveries = outage
    with django_capture_on_commit_callbacks(execute=True):  # tasks run inline in tests
        webhook_endpoint_enable(endpoint=endpoint, channel="api")
    sent = {json.loads(body)["id"] for _, body in receiver.requests}
    assert sent == {deliveries["recent"].event.public_id, deliveries["failed"].event.public_id}
    assert _statuses(deliveries) == {
        "recent": "delivered",
        "old": "failed",
        "failed": "delivered",
        "delivered": "delivered",
    }


def test_enabling_twice_changes_nothing_the_second_time(outage):
    endpoint, _ = outage
    webhook_endpoint_enable(endpoint=endpoint, channel="portal")
    before = _state(endpoint)
    again = webhook_endpoint_enable(endpoint=endpoint, channel="portal")
    assert (again.requeued, again.expired) == (0, 0) and again.endpoint.is_active
    assert _state(endpoint) == before and WebhookEndpointEvent.objects.count() == 1


def test_a_deleted_endpoint_cannot_be_enabled(outage):
    endpoint, _ = outage
    webhook_endpoint_delete(endpoint=endpoint)
    before = _state(endpoint)
    with pytest.raises(InvalidTransition) as refused:
        webhook_endpoint_enable(endpoint=endpoint, channel="admin")
    assert refused.value.code == "webhook_endpoint_deleted"
    assert _state(endpoint) == before


# --- API -----------------------------------------------------------------------------------------


def test_api_enable_with_idempotency_key(api, outage):
    endpoint, _ = outage
    url = f"/api/v1/webhook-endpoints/{endpoint.pk}/enable/"
    first = api.post(url, HTTP_IDEMPOTENCY_KEY="enable-1")
    assert first.status_code == 200, first.content
    body = first.json()
    assert body["is_active"] and body["failure_streak"] == 0
    assert (body["requeued_deliveries"], body["expired_deliveries"]) == (2, 1)
    replay = api.post(url, HTTP_IDEMPOTENCY_KEY="enable-1")
    assert replay["Idempotent-Replayed"] == "true" and replay.json() == body
    fresh = api.post(url, HTTP_IDEMPOTENCY_KEY="enable-2")
    assert fresh.json()["requeued_deliveries"] == 0
    audit = WebhookEndpointEvent.objects.get(endpoint=endpoint)
    assert audit.channel == "api"


def test_api_enable_needs_the_write_scope_and_a_live_endpoint(brand, outage, api):
    endpoint, _ = outage
    reader = client_for(api_key_create(brand=brand, name="reader", scopes=["read"]).token)
    url = f"/api/v1/webhook-endpoints/{endpoint.pk}/enable/"
    assert_problem(reader.post(url), 403, "insufficient_scope")
    webhook_endpoint_delete(endpoint=endpoint)
    assert_problem(api.post(url), 404, "not_found")
    assert not WebhookEndpointEvent.objects.exists()


# --- portal and admin ----------------------------------------------------------------------------


def _portal_client(brand, role):
    user = make_user(f"{role}@joyshoes.example")
    brand_membership_set(brand=brand, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


def test_portal_owner_enables_an_endpoint(brand, outage):
    endpoint, _ = outage
    owner = _portal_client(brand, BrandRole.OWNER)
    detail = owner.get(f"/portal/{brand.slug}/webhooks/{endpoint.pk}/")
    assert b"Enable again" in detail.content and b'data-testid="endpoint-disabled"' in detail.content
    page = owner.post(f"/portal/{brand.slug}/webhooks/{endpoint.pk}/enable/", follow=True)
    assert "2 deliveries of the last 72 hours are being sent again" in page.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.is_active and WebhookEndpointEvent.objects.get().channel == "portal"
    assert b"Enable again" not in owner.get(f"/portal/{brand.slug}/webhooks/").content


def test_portal_analyst_cannot_enable(brand, outage):
    endpoint, _ = outage
    analyst = _portal_client(brand, BrandRole.ANALYST)
    assert b"Enable again" not in analyst.get(f"/portal/{brand.slug}/webhooks/{endpoint.pk}/").content
    before = _state(endpoint)
    response = analyst.post(f"/portal/{brand.slug}/webhooks/{endpoint.pk}/enable/")
    assert response.status_code == 404  # the portal answers 404 for a role too low, as for another brand
    assert _state(endpoint) == before


def test_admin_action_enables_and_records_the_staff_member(client, outage):
    endpoint, _ = outage
    ops = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(ops)
    changelist = reverse("admin:campaigns_webhookendpoint_changelist")
    assert client.get(changelist).status_code == 200
    assert client.get(reverse("admin:campaigns_webhookendpoint_change", args=[endpoint.pk])).status_code == 200
    response = client.post(changelist, {"action": "enable", "_selected_action": [endpoint.pk]}, follow=True)
    assert "Enabled: 1." in response.content.decode()
    endpoint.refresh_from_db()
    audit = WebhookEndpointEvent.objects.get()
    assert endpoint.is_active and (audit.channel, audit.actor) == ("admin", ops)
    assert client.get(reverse("admin:campaigns_webhookendpoint_add")).status_code == 403


def test_events_that_happen_while_disabled_are_sent_once_enabled(
    outage, campaign, receiver, django_capture_on_commit_callbacks
):
    endpoint, _ = outage
    during = ingest(campaign)  # a reward while the endpoint is disabled
    webhook_events_collect()
    missed = WebhookEvent.objects.get(type="reward.held", data__reward__id=during.reward.pk)
    # recorded, not sent — and no delivery row piles up for the disabled endpoint
    assert not receiver.requests
    assert not WebhookDelivery.objects.filter(endpoint=endpoint, event=missed).exists()

    with django_capture_on_commit_callbacks(execute=True):
        enabled = webhook_endpoint_enable(endpoint=endpoint, channel="api")

    waiting = WebhookDelivery.objects.get(endpoint=endpoint, event=missed)
    assert enabled.requeued >= 1

    assert waiting.event.public_id in {json.loads(body)["id"] for _, body in receiver.requests}
    waiting.refresh_from_db()
    assert waiting.status == DeliveryStatus.DELIVERED


def test_a_long_outage_piles_up_no_deliveries(outage, campaign):
    endpoint, _ = outage
    before = WebhookDelivery.objects.filter(endpoint=endpoint).count()
    for _ in range(5):
        ingest(campaign)
    assert webhook_events_collect() >= 5
    assert WebhookDelivery.objects.filter(endpoint=endpoint).count() == before


def test_the_brand_is_told_even_when_a_late_success_cleared_the_failing_streak(brand, receiver, mailoutbox):
    brand_membership_set(brand=brand, user=make_user("owner@shop.example"), role=BrandRole.OWNER)
    endpoint = webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"]).endpoint
    # disabled by one worker's failure, then a delivery sent before that answered 2xx
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        is_active=False,
        disabled_at=timezone.now(),
        disabled_reason="failing since 2026-11-27 10:00 UTC",
        failing_since=None,
        failure_streak=0,
    )
    assert webhook_endpoint_disabled_notify(endpoint_id=endpoint.pk) == 1
    assert "disabled" in mailoutbox[0].subject and "failing since 2026-11-27 10:00 UTC" in mailoutbox[0].body


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_event_emitted_while_an_enable_is_committing_gets_its_delivery(brand, receiver):
    """The enable's backfill cannot see an event whose transaction is still open, and that emit
    read the endpoint as disabled: one of the two must wait for the other, or the event is never
    delivered. Here the enable holds the endpoint row (as it does) while an emit runs."""
    endpoint = webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["topup.received"]).endpoint
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(is_active=False)
    locked, release = threading.Event(), threading.Event()

    def enabling() -> None:
        try:
            with transaction.atomic():
                row = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)  # as the enable does
                row.is_active = True
                row.save(update_fields=["is_active"])
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    def emitting() -> None:
        try:
            webhook_event_emit(brand=brand, type="topup.received", data={}, source="race:1")
        finally:
            connection.close()

    enabler = threading.Thread(target=enabling)
    enabler.start()
    assert locked.wait(10)
    emitter = threading.Thread(target=emitting)
    emitter.start()
    emitter.join(0.5)  # the emit reaches the endpoint row while the enable still holds it
    release.set()
    enabler.join(10)
    emitter.join(10)
    assert WebhookDelivery.objects.filter(endpoint=endpoint, event__source="race:1").count() == 1
