"""Schema = server: what the OpenAPI schema declares is exactly what the server takes and gives —
header and parameter constraints, JSON types without coercion, UTC datetimes — and the
Idempotency-Key store keeps neither a 405 nor a secret."""

import pytest
from drf_spectacular.generators import SchemaGenerator

from campaigns.models import Campaign, TriggerEvent, WebhookEndpoint
from core.models import IdempotencyRecord
from tests.api.conftest import assert_problem


@pytest.fixture
def schema(db):
    return SchemaGenerator().get_schema(request=None, public=True)


def _parameters(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                yield path, method, parameter


# The one call that refuses to run without a key: a refund by order id (``idempotency_key_required``).
KEY_REQUIRED = {"/api/v1/orders/{order_id}/refund/"}


def test_the_idempotency_key_header_declares_the_servers_rule(schema):
    keys = [(path, p) for path, method, p in _parameters(schema) if p["name"] == "Idempotency-Key"]
    assert keys and all(
        p["in"] == "header"
        and p.get("required", False) == (path in KEY_REQUIRED)
        and p["schema"] == {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]{1,255}$"}
        for path, p in keys
    )
    methods = {method for _, method, p in _parameters(schema) if p["name"] == "Idempotency-Key"}
    assert methods == {"post", "patch"}


@pytest.mark.parametrize("key", ["two words", "é", "x" * 256, "tab\there"])
def test_a_key_outside_the_declared_pattern_is_400(api, campaign, key):
    response = api.post("/api/v1/events/", {}, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert_problem(response, 400, "invalid_idempotency_key")
    assert not IdempotencyRecord.objects.exists()


def test_limit_declares_its_bounds_and_filters_their_types(schema):
    for path, _, p in _parameters(schema):
        if p["name"] == "limit":
            assert p["schema"] == {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}, path
        if p["name"] == "person":
            assert p["schema"]["type"] == "integer", path
        if p["name"] in ("received_after", "received_before"):
            assert p["schema"] == {"type": "string", "format": "date-time"}, path
        if "enum" in p["schema"]:
            assert "" not in p["schema"]["enum"] and None not in p["schema"]["enum"], (path, p["name"])
    events = {p["name"]: p["schema"] for path, _, p in _parameters(schema) if path == "/api/v1/events/"}
    assert "tiktok_login" in events["type"]["enum"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("external_id", 123), ("campaign", 7), ("email", 1.5), ("order_id", True), ("purchase_amount_minor", "4999"),
     ("view_count", True), ("evidence", "{}"), ("type", 1)],
)  # fmt: skip
def test_an_event_field_of_another_json_type_is_refused_not_coerced(api, campaign, field, value):
    event = {"external_id": "typed", "campaign": campaign.slug, "type": "purchase", "email": "t@example.com",
             "purchase_amount_minor": 4999, "purchase_currency": "EUR", field: value}  # fmt: skip
    body = assert_problem(api.post("/api/v1/events/", event, format="json"), 400, "validation_error")
    assert [e["field"] for e in body["errors"]] == [field]
    assert not TriggerEvent.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"), [("aggregate_minutes", "5"), ("min_payout_minor", "100"), ("name", 5), ("slug", 42)]
)
def test_a_campaign_field_of_another_json_type_is_refused(api, brand, field, value):
    body = {"name": "Typed", "slug": "typed", "mode": "joyback", "starts_at": "2026-06-01T00:00:00Z", field: value}
    problem = assert_problem(api.post("/api/v1/campaigns/", body, format="json"), 400, "validation_error")
    assert [e["field"] for e in problem["errors"]] == [field]
    assert not Campaign.objects.filter(slug="typed").exists()


@pytest.mark.parametrize(("field", "value"), [("fixed_minor", "500"), ("new_people_only", "true"), ("trigger", 3)])
def test_a_rule_field_of_another_json_type_is_refused(api, campaign, field, value):
    rule = {"trigger": "like", "fixed_minor": 500, "verification": "partner_attested", field: value}
    problem = assert_problem(
        api.post(f"/api/v1/campaigns/{campaign.pk}/rules/", rule, format="json"), 400, "validation_error"
    )
    assert [e["field"] for e in problem["errors"]] == [field]


def test_datetimes_are_answered_in_utc_also_before_1937(api, brand):
    """Amsterdam's offset before 1937 was +00:19:32, which RFC 3339 cannot write."""
    body = {"name": "Old", "slug": "old", "mode": "joyback", "starts_at": "1327-09-30T11:53:29-04:29",
            "ends_at": "2026-07-01T12:00:00+02:00"}  # fmt: skip
    created = api.post("/api/v1/campaigns/", body, format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert data["starts_at"] == "1327-09-30T16:22:29Z"
    assert data["ends_at"] == "2026-07-01T10:00:00Z"
    assert data["created_at"].endswith("Z")
    assert api.get(f"/api/v1/campaigns/{data['id']}/").json()["starts_at"] == "1327-09-30T16:22:29Z"


def test_an_unsupported_method_with_a_key_is_405_and_leaves_the_key_unused(api, campaign):
    body = {"external_id": "e-405", "campaign": campaign.slug, "type": "tiktok_login", "email": "m@example.com"}
    refused = api.patch("/api/v1/events/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-405")
    assert_problem(refused, 405, "method_not_allowed")
    assert not IdempotencyRecord.objects.exists()
    again = api.patch("/api/v1/events/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-405")
    assert_problem(again, 405, "method_not_allowed")
    assert "Idempotent-Replayed" not in again


def test_the_replay_of_a_webhook_endpoints_creation_does_not_show_the_secret(api, brand):
    body = {"url": "https://shop.example/hooks"}
    first = api.post("/api/v1/webhook-endpoints/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-hook")
    assert first.status_code == 201 and first.json()["secret"]
    replay = api.post("/api/v1/webhook-endpoints/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-hook")
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    assert replay.json() == {**first.json(), "secret": None}
    stored = IdempotencyRecord.objects.get(key="k-hook")
    assert first.json()["secret"].encode() not in bytes(stored.response_body)
    assert WebhookEndpoint.objects.filter(brand=brand).count() == 1


def test_the_replay_of_a_secret_rotation_does_not_show_the_secret(api, brand):
    endpoint = api.post("/api/v1/webhook-endpoints/", {"url": "https://shop.example/h"}, format="json").json()
    path = f"/api/v1/webhook-endpoints/{endpoint['id']}/rotate-secret/"
    first = api.post(path, HTTP_IDEMPOTENCY_KEY="k-rotate")
    replay = api.post(path, HTTP_IDEMPOTENCY_KEY="k-rotate")
    assert first.json()["secret"] and replay["Idempotent-Replayed"] == "true"
    assert replay.json() == {**first.json(), "secret": None}
