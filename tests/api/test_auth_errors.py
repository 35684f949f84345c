"""Authentication, scopes, the error format and rate limits."""

import hashlib

import pytest
from rest_framework.test import APIClient

from campaigns.api_keys import api_key_create, api_key_revoke
from campaigns.models import ApiKey, Brand, BrandStatus, TriggerEvent
from tests.api.conftest import assert_problem, client_for


def test_no_key_is_401_with_www_authenticate(db):
    response = APIClient().get("/api/v1/campaigns/")
    assert_problem(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("token", ["nonsense", "jbk_abc", "jbk_000000000000_wrong", "jbk__x"])
def test_malformed_or_unknown_key_is_401(db, token):
    assert_problem(client_for(token).get("/api/v1/campaigns/"), 401, "invalid_api_key")


def test_wrong_secret_for_a_real_prefix_is_401(brand, token):
    forged = token[: token.rindex("_") + 1] + "x" * 43
    assert_problem(client_for(forged).get("/api/v1/campaigns/"), 401, "invalid_api_key")


def test_revoked_key_is_401(brand):
    created = api_key_create(brand=brand, name="old", scopes=["read"])
    api_key_revoke(key=created.key)
    assert_problem(client_for(created.token).get("/api/v1/campaigns/"), 401, "invalid_api_key")


def test_suspended_brand_is_403(brand, token):
    Brand.objects.filter(pk=brand.pk).update(status=BrandStatus.SUSPENDED)
    assert_problem(client_for(token).get("/api/v1/campaigns/"), 403, "brand_suspended")


def test_key_records_last_use_and_stores_only_a_hash(brand):
    created = api_key_create(brand=brand, name="k", scopes=["read"])
    assert created.key.last_used_at is None
    client_for(created.token).get("/api/v1/campaigns/")
    key = ApiKey.objects.get(pk=created.key.pk)
    assert key.last_used_at is not None
    secret = created.token.split(f"{key.prefix}_", 1)[1]  # the secret may itself hold "_"
    assert len(secret) == 43
    assert secret not in key.secret_hash
    assert key.secret_hash == hashlib.sha256(secret.encode()).hexdigest()


def test_read_only_key_cannot_send_events(brand, campaign):
    token = api_key_create(brand=brand, name="ro", scopes=["read"]).token
    response = client_for(token).post(
        "/api/v1/events/", {"external_id": "x", "campaign": "summer", "type": "tiktok_login"}, format="json"
    )
    body = assert_problem(response, 403, "insufficient_scope")
    assert "events" in body["detail"]
    assert not TriggerEvent.objects.exists()


def test_events_key_cannot_create_campaigns(brand):
    token = api_key_create(brand=brand, name="ev", scopes=["events"]).token
    response = client_for(token).post("/api/v1/campaigns/", {}, format="json")
    assert_problem(response, 403, "insufficient_scope")


def test_malformed_json_is_400(api, campaign):
    response = api.generic("POST", "/api/v1/events/", b'{"external_id": ', content_type="application/json")
    assert_problem(response, 400, "malformed_json")
    assert not TriggerEvent.objects.exists()


def test_wrong_types_give_field_errors(api, campaign):
    response = api.post(
        "/api/v1/events/",
        {"external_id": ["a"], "campaign": "summer", "type": "dance", "purchase_amount_minor": "lots"},
        format="json",
    )
    body = assert_problem(response, 400, "validation_error")
    fields = {e["field"] for e in body["errors"]}
    assert {"external_id", "type", "purchase_amount_minor"} <= fields
    assert not TriggerEvent.objects.exists()


def test_body_that_is_not_an_object_is_400(api, campaign):
    response = api.generic("POST", "/api/v1/events/", b"[1, 2]", content_type="application/json")
    assert_problem(response, 400, "validation_error")


def test_unsupported_media_type_is_415(api, campaign):
    response = api.generic(
        "POST", "/api/v1/events/", b"external_id=1", content_type="application/x-www-form-urlencoded"
    )
    assert_problem(response, 415, "unsupported_media_type")


def test_oversize_body_is_413(api, campaign, settings):
    settings.API_MAX_BODY_BYTES = 100
    response = api.generic("POST", "/api/v1/events/", b'{"x": "' + b"a" * 200 + b'"}', content_type="application/json")
    assert_problem(response, 413, "payload_too_large")


@pytest.mark.parametrize("path", ["/api/v1/events/999999/", "/api/v1/events/abc/", "/api/v1/nothing-here/"])
def test_unknown_ids_and_paths_are_404_problems(api, path):
    assert_problem(api.get(path), 404, "not_found")


def test_method_not_allowed_is_405(api):
    assert_problem(api.delete("/api/v1/campaigns/"), 405, "method_not_allowed")


def test_invalid_cursor_and_limit_are_400(api):
    assert_problem(api.get("/api/v1/campaigns/?cursor=garbage"), 400, "invalid_cursor")
    assert_problem(api.get("/api/v1/campaigns/?limit=0"), 400, "invalid_limit")


def test_invalid_filter_value_is_400(api):
    assert_problem(api.get("/api/v1/campaigns/?status=sleeping"), 400, "validation_error")


@pytest.fixture
def mid_window(monkeypatch):
    """The limit counts per clock minute: requests straddling a minute boundary start a new
    window. Pin the throttle's clock in the middle of one, so a test never depends on when it runs."""
    from types import SimpleNamespace

    from core.api import auth

    monkeypatch.setattr(auth, "time", SimpleNamespace(time=lambda: 1_800_000_030.0))


def test_rate_limit_gives_429_with_retry_after(api, settings, mid_window):
    settings.API_RATE_LIMIT_PER_MINUTE = 3
    statuses = [api.get("/api/v1/campaigns/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    response = api.get("/api/v1/campaigns/")
    assert_problem(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 60


def test_rate_limit_is_per_key(api, rival_api, settings, mid_window):
    settings.API_RATE_LIMIT_PER_MINUTE = 1
    assert api.get("/api/v1/campaigns/").status_code == 200
    assert api.get("/api/v1/campaigns/").status_code == 429
    assert rival_api.get("/api/v1/campaigns/").status_code == 200


def test_cursor_pagination_walks_every_row_once(api, brand):
    from campaigns.services import campaign_create
    from tests.campaigns.factories import CAMPAIGN_START

    for n in range(5):
        campaign_create(brand=brand, name=f"C{n}", slug=f"c{n}", mode="joyback", starts_at=CAMPAIGN_START)
    seen, url = [], "/api/v1/campaigns/?limit=2"
    while url:
        page = api.get(url).json()
        seen += [c["slug"] for c in page["results"]]
        url = page["next"]
    assert seen == ["c4", "c3", "c2", "c1", "c0"]


def _redis_url() -> str:
    import socket

    try:
        socket.create_connection(("127.0.0.1", 6379), 0.5).close()
    except OSError:
        pytest.skip("needs the Redis server at 127.0.0.1:6379 (CACHE_URL)")
    return "redis://127.0.0.1:6379/0"


def test_with_cache_url_the_rate_limit_counts_in_redis_for_every_process(api, settings, mid_window):
    import uuid

    from django.core.cache.backends.redis import RedisCache

    url, prefix = _redis_url(), f"test-{uuid.uuid4().hex}"
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url, "KEY_PREFIX": prefix}
    }
    settings.API_RATE_LIMIT_PER_MINUTE = 3
    try:
        statuses = [api.get("/api/v1/campaigns/").status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        # Another worker process has its own client to the same server and sees the same count.
        other = RedisCache(url, {"KEY_PREFIX": prefix})
        (counter,) = [k for k in other._cache.get_client().keys(f"{prefix}:*api-rate:*")]
        assert int(other._cache.get_client().get(counter)) == 4
    finally:
        client = RedisCache(url, {"KEY_PREFIX": prefix})._cache.get_client()
        for key in client.keys(f"{prefix}:*"):
            client.delete(key)
