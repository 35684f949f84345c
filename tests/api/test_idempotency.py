"""Idempotency-Key: replay, mismatch, in flight, and concurrent requests on PostgreSQL."""

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from campaigns.models import Campaign, TriggerEvent
from core.api.idempotency import idempotency_claim, idempotency_records_purge
from core.models import IdempotencyRecord, IdempotencyStatus
from tests.api.conftest import assert_problem

EVENT = {"external_id": "order-1", "campaign": "summer", "type": "tiktok_login", "email": "a@example.com"}


def post(api, body, key, path="/api/v1/events/"):
    return api.generic("POST", path, json.dumps(body), content_type="application/json", HTTP_IDEMPOTENCY_KEY=key)


def test_same_key_same_body_replays_the_first_response(api, campaign):
    first = post(api, EVENT, "k-1")
    again = post(api, EVENT, "k-1")
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert TriggerEvent.objects.count() == 1


def test_same_key_different_body_is_422_and_changes_nothing(api, campaign):
    post(api, EVENT, "k-1")
    response = post(api, {**EVENT, "external_id": "order-2"}, "k-1")
    assert_problem(response, 422, "idempotency_key_reused")
    assert TriggerEvent.objects.count() == 1


def test_same_key_on_another_path_is_422(api, campaign):
    post(api, EVENT, "k-1")
    assert_problem(post(api, EVENT, "k-1", path="/api/v1/events/bulk/"), 422, "idempotency_key_reused")


def test_key_in_flight_is_409(api, campaign, brand):
    now = timezone.now()
    body = json.dumps(EVENT).encode()
    import hashlib

    IdempotencyRecord.objects.create(
        brand=brand, key="k-busy", method="POST", path="/api/v1/events/",
        request_hash=hashlib.sha256(body).hexdigest(), created_at=now, expires_at=now + timedelta(hours=24),
    )  # fmt: skip
    assert_problem(post(api, EVENT, "k-busy"), 409, "idempotency_in_flight")
    assert not TriggerEvent.objects.exists()


def test_errors_are_replayed_too(api, campaign):
    bad = {**EVENT, "type": "dance"}
    first = post(api, bad, "k-bad")
    again = post(api, bad, "k-bad")
    assert first.status_code == again.status_code == 400
    assert again["Idempotent-Replayed"] == "true"


def test_keys_are_per_brand(api, rival_api, campaign, rival_campaign):
    assert post(api, EVENT, "shared-key").status_code == 201
    assert post(rival_api, EVENT, "shared-key").status_code == 201
    assert TriggerEvent.objects.count() == 2


def test_expired_key_is_reusable_and_purged(api, campaign, brand):
    post(api, EVENT, "k-old")
    IdempotencyRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    response = post(api, {**EVENT, "external_id": "order-9"}, "k-old")
    assert response.status_code == 201
    IdempotencyRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert idempotency_records_purge() == 1


def test_invalid_key_is_400(api, campaign):
    assert_problem(post(api, EVENT, "x" * 300), 400, "invalid_idempotency_key")


def test_patch_is_idempotent_too(api, brand):
    person = api.post("/api/v1/people/", {"email": "p@example.com"}, format="json").json()
    body = {"whatsapp": "+393331234567"}
    first = api.generic(
        "PATCH",
        f"/api/v1/people/{person['id']}/",
        json.dumps(body),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="p-1",
    )
    again = api.generic(
        "PATCH",
        f"/api/v1/people/{person['id']}/",
        json.dumps(body),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="p-1",
    )
    assert first.status_code == 200 and again["Idempotent-Replayed"] == "true"


def test_campaign_create_with_key_creates_one_campaign(api, brand):
    body = {"name": "Winter", "slug": "winter", "mode": "joyback", "starts_at": "2026-01-01T00:00:00Z"}
    codes = [post(api, body, "c-1", path="/api/v1/campaigns/").status_code for _ in range(3)]
    assert codes == [201, 201, 201]
    assert Campaign.objects.filter(brand=brand, slug="winter").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_with_one_key_do_the_work_once(token, campaign):
    """Eight threads send the same request with the same key at once: exactly one does the work
    (201); the others get its stored response (201, replayed) or 409 while it runs — never a
    second event."""
    barrier = threading.Barrier(8)
    results: list[tuple[int, bool, bytes]] = []
    lock = threading.Lock()

    def worker():
        try:
            client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
            barrier.wait(timeout=30)
            response = client.post(
                "/api/v1/events/", json.dumps(EVENT), content_type="application/json", HTTP_IDEMPOTENCY_KEY="race"
            )
            with lock:
                results.append((response.status_code, response.get("Idempotent-Replayed") == "true", response.content))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8
    fresh = [r for r in results if r[0] == 201 and not r[1]]
    replays = [r for r in results if r[0] == 201 and r[1]]
    assert len(fresh) == 1
    assert all(r[2] == fresh[0][2] for r in replays)
    assert all(r[0] in (201, 409) for r in results)
    assert TriggerEvent.objects.count() == 1
    assert IdempotencyRecord.objects.get(key="race").status == IdempotencyStatus.DONE


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_with_different_keys_same_event_store_one_event(token, campaign):
    """Different keys, same external_id: the event's own idempotency keeps it to one row, and
    every answer describes that one event."""
    barrier = threading.Barrier(6)
    answers: list[dict] = []

    def worker(n):
        try:
            client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
            barrier.wait(timeout=30)
            response = client.post(
                "/api/v1/events/", json.dumps(EVENT), content_type="application/json", HTTP_IDEMPOTENCY_KEY=f"k{n}"
            )
            answers.append(response.json())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert TriggerEvent.objects.count() == 1
    assert {a["event"]["id"] for a in answers} == {TriggerEvent.objects.get().pk}
    assert sum(not a["replayed"] for a in answers) == 1


def test_a_key_left_in_flight_by_a_crashed_request_is_taken_over(brand, settings):
    """The claim writes its row with raw SQL; the takeover compares ``created_at`` through the ORM.
    Both must store the time alike (on SQLite: naive UTC text), or the key answers 409 until it
    expires."""
    settings.IDEMPOTENCY_IN_FLIGHT_TIMEOUT_SECONDS = 0  # the first request is stale at once
    first = idempotency_claim(brand=brand, key="k-crash", method="POST", path="/api/v1/events/", body=b"{}")
    again = idempotency_claim(brand=brand, key="k-crash", method="POST", path="/api/v1/events/", body=b"{}")
    assert (again.replay, again.record.pk) == (False, first.record.pk)
    assert IdempotencyRecord.objects.get().created_at > first.record.created_at
