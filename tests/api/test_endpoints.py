"""Every endpoint: the happy path, its business errors, and that nothing changes on refusal."""

import json

from django.utils import timezone
from rest_framework.renderers import JSONRenderer

from campaigns.models import (
    Campaign,
    Reward,
    RewardRule,
    RewardStatus,
    TriggerEvent,
    WebhookEndpoint,
)
from campaigns.serializers import EventResultSerializer
from campaigns.services import brand_topup_record, campaign_allocate, rule_create
from recipients.models import BankAccount
from tests.api.conftest import assert_problem, ingest
from tests.recipients.factories import iban

# --- campaigns and rules -------------------------------------------------------------------------


def test_campaign_create_list_read_and_status_changes(api, brand):
    created = api.post(
        "/api/v1/campaigns/",
        {"name": "Winter", "slug": "winter", "mode": "cashback", "starts_at": "2026-01-01T00:00:00Z"},
        format="json",
    )
    assert created.status_code == 201
    campaign_id = created.json()["id"]
    assert created.json()["status"] == "draft" and created.json()["currency"] == "EUR"
    assert api.get(f"/api/v1/campaigns/{campaign_id}/").json()["slug"] == "winter"
    assert [c["slug"] for c in api.get("/api/v1/campaigns/?status=draft").json()["results"]] == ["winter"]

    no_rule = api.post(f"/api/v1/campaigns/{campaign_id}/status/", {"status": "active"}, format="json")
    assert_problem(no_rule, 409, "no_rules")
    rule = api.post(
        f"/api/v1/campaigns/{campaign_id}/rules/",
        {"trigger": "purchase", "amount_type": "percent", "percent_bps": 500, "max_minor": 2000, "hold_days": 14},
        format="json",
    )
    assert rule.status_code == 201, rule.content
    assert api.get(f"/api/v1/rules/{rule.json()['id']}/").json()["percent_bps"] == 500
    assert len(api.get(f"/api/v1/campaigns/{campaign_id}/rules/").json()["results"]) == 1
    brand_topup_record(brand=brand, amount_minor=10_000, currency="EUR", bank_account_code="NL00", idempotency_key="t1")
    campaign_allocate(campaign=Campaign.objects.get(pk=campaign_id), amount_minor=10_000, idempotency_key="a1")
    for target in ("active", "paused", "active", "ended", "closed"):
        response = api.post(f"/api/v1/campaigns/{campaign_id}/status/", {"status": target}, format="json")
        assert response.status_code == 200, response.content
        assert response.json()["status"] == target
    assert_problem(
        api.post(f"/api/v1/campaigns/{campaign_id}/status/", {"status": "active"}, format="json"),
        409,
        "invalid_transition",
    )


def test_campaign_create_duplicate_slug_is_a_field_error(api, campaign):
    response = api.post(
        "/api/v1/campaigns/",
        {"name": "Again", "slug": "summer", "mode": "joyback", "starts_at": "2026-01-01T00:00:00Z"},
        format="json",
    )
    assert_problem(response, 400, "validation_error")
    assert Campaign.objects.count() == 1


def test_rule_create_invalid_combination_is_400_and_creates_nothing(api, campaign):
    response = api.post(
        f"/api/v1/campaigns/{campaign.pk}/rules/",
        {"trigger": "like", "fixed_minor": 100, "verification": "first_party"},
        format="json",
    )
    body = assert_problem(response, 400, "validation_error")
    assert any(e["field"] == "verification" for e in body["errors"])
    assert RewardRule.objects.count() == 1


# --- events --------------------------------------------------------------------------------------


def test_event_post_then_replay_then_conflict(api, campaign):
    body = {"external_id": "o-1", "campaign": "summer", "type": "tiktok_login", "email": "fan@example.com"}
    first = api.post("/api/v1/events/", body, format="json")
    assert first.status_code == 201
    assert first.json()["event"]["outcome"] == "rewarded" and first.json()["event"]["reward"]["amount_minor"] == 500
    replay = api.post("/api/v1/events/", body, format="json")
    assert replay.status_code == 200 and replay.json()["replayed"] is True
    conflict = api.post("/api/v1/events/", {**body, "email": "other@example.com"}, format="json")
    assert_problem(conflict, 422, "idempotency_conflict")
    assert TriggerEvent.objects.count() == 1


def test_event_answers_are_what_fresh_serializers_render(api, campaign):
    """The event endpoints keep their serializers between requests (core.api.reuse): a second
    and third answer — after one with a reward, one refused without — must match what new
    serializer instances render, field for field."""
    for n, (type_, reward) in enumerate([("tiktok_login", True), ("like", False), ("tiktok_login", True)]):
        body = {"external_id": f"r-{n}", "campaign": "summer", "type": type_, "email": "same@example.com"}
        answer = api.post("/api/v1/events/", body, format="json").json()
        event = TriggerEvent.objects.select_related("campaign", "reward").get(external_id=f"r-{n}")
        expected = EventResultSerializer({"event": event, "replayed": False}).data
        assert answer == json.loads(JSONRenderer().render(expected))
        assert (answer["event"]["reward"] is not None) is reward


def test_event_for_unknown_campaign_is_404_and_stores_nothing(api, campaign):
    response = api.post(
        "/api/v1/events/",
        {"external_id": "o-1", "campaign": "nope", "type": "tiktok_login", "email": "a@example.com"},
        format="json",
    )
    assert response.status_code == 404
    assert not TriggerEvent.objects.exists()


def test_event_with_invalid_iban_is_400_and_stores_nothing(api, campaign):
    response = api.post(
        "/api/v1/events/",
        {"external_id": "o-1", "campaign": "summer", "type": "tiktok_login", "iban": "NL00NOPE"},
        format="json",
    )
    assert_problem(response, 400, "invalid_iban")
    assert not TriggerEvent.objects.exists()


def test_bulk_gives_one_result_per_event_in_order(api, campaign):
    events = [
        {"external_id": "b-1", "campaign": "summer", "type": "tiktok_login", "email": "b1@example.com"},
        {"external_id": "b-2", "campaign": "summer", "type": "dance"},
        {"external_id": "b-3", "campaign": "nope", "type": "tiktok_login", "email": "b3@example.com"},
        {"external_id": "b-1", "campaign": "summer", "type": "tiktok_login", "email": "b1@example.com"},
        "not an object",
    ]
    response = api.post("/api/v1/events/bulk/", {"events": events}, format="json")
    assert response.status_code == 400  # the list itself must be objects
    response = api.post("/api/v1/events/bulk/", {"events": events[:4]}, format="json")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["index"] for r in results] == [0, 1, 2, 3]
    assert results[0]["outcome"] == "rewarded" and results[0]["reward_id"]
    assert results[1]["outcome"] == "error" and results[1]["error"]["code"] == "validation_error"
    assert results[1]["error"]["errors"][0]["field"] == "type"
    assert results[2]["outcome"] == "error" and results[2]["error"]["code"] == "campaign_not_found"
    assert results[3]["replayed"] is True and results[3]["event_id"] == results[0]["event_id"]
    assert TriggerEvent.objects.count() == 1


def test_bulk_items_are_validated_each_on_its_own(api, campaign):
    """One serializer checks every item: an item's errors must not leak into the next one's."""
    events = [
        {"external_id": "v-1", "campaign": "summer", "type": "dance", "email": "v1@example.com"},
        {"external_id": "v-2", "campaign": "summer", "type": "tiktok_login", "email": "v2@example.com"},
        {"campaign": "summer", "type": "tiktok_login", "email": "v3@example.com"},
        {"external_id": "v-4", "campaign": "summer", "type": "tiktok_login", "email": "v4@example.com"},
    ]
    results = api.post("/api/v1/events/bulk/", {"events": events}, format="json").json()["results"]
    assert [r["outcome"] for r in results] == ["error", "rewarded", "error", "rewarded"]
    assert [e["field"] for e in results[0]["error"]["errors"]] == ["type"]
    assert [e["field"] for e in results[2]["error"]["errors"]] == ["external_id"]
    assert sorted(TriggerEvent.objects.values_list("external_id", flat=True)) == ["v-2", "v-4"]


def test_bulk_over_1000_is_400(api, campaign):
    events = [{"external_id": f"x{n}", "campaign": "summer", "type": "tiktok_login"} for n in range(1001)]
    assert_problem(api.post("/api/v1/events/bulk/", {"events": events}, format="json"), 400, "validation_error")


def test_event_list_filters_and_detail(api, campaign):
    ingest(campaign, external_id="f-1")
    ingest(campaign, external_id="f-2")
    listed = api.get("/api/v1/events/?external_id=f-2").json()["results"]
    assert [e["external_id"] for e in listed] == ["f-2"]
    assert api.get(f"/api/v1/events/{listed[0]['id']}/").json()["external_id"] == "f-2"
    assert len(api.get("/api/v1/events/?campaign=summer&outcome=rewarded").json()["results"]) == 2


# --- people --------------------------------------------------------------------------------------


def test_person_register_read_and_add_identifiers(api, brand):
    created = api.post("/api/v1/people/", {"name": "Giulia", "email": "Giulia@Example.com"}, format="json")
    assert created.status_code == 201
    person = created.json()
    assert person["identifiers"] == [{"kind": "email", "value": "g***@example.com"}]
    again = api.post("/api/v1/people/", {"email": "giulia@example.com"}, format="json")
    assert again.status_code == 200 and again.json()["id"] == person["id"]
    updated = api.patch(
        f"/api/v1/people/{person['id']}/", {"whatsapp": "+39 333 123 4567", "iban": iban("IT", 7)}, format="json"
    )
    assert updated.status_code == 200, updated.content
    assert {i["kind"] for i in updated.json()["identifiers"]} == {"email", "whatsapp"}
    assert updated.json()["iban_masked"].startswith("IT") and updated.json()["iban_country"] == "IT"
    assert api.get(f"/api/v1/people/{person['id']}/").json()["iban_masked"] == updated.json()["iban_masked"]


def test_person_without_identifier_or_with_bad_phone_is_400(api, brand):
    assert_problem(api.post("/api/v1/people/", {"name": "Nobody"}, format="json"), 400, "no_identifier")
    assert_problem(api.post("/api/v1/people/", {"whatsapp": "12"}, format="json"), 400, "invalid_phone")


def test_a_brand_sets_the_iban_of_its_own_person_only(api, campaign, rival_campaign):
    mine = ingest(campaign, email="shared@example.com")
    theirs = ingest(rival_campaign, email="shared@example.com")
    assert mine.event.person_id != theirs.event.person_id  # one human, one person per brand
    response = api.patch(f"/api/v1/people/{mine.event.person_id}/", {"iban": iban("NL", 3)}, format="json")
    assert response.status_code == 200, response.content
    assert list(BankAccount.objects.values_list("person_id", flat=True)) == [mine.event.person_id]


def test_person_known_from_an_event_is_visible(api, campaign):
    result = ingest(campaign)
    assert api.get(f"/api/v1/people/{result.event.person_id}/").status_code == 200


# --- rewards, payouts, balances ------------------------------------------------------------------


def test_reward_list_detail_void(api, campaign):
    reward = ingest(campaign).reward
    assert [r["id"] for r in api.get("/api/v1/rewards/?status=held").json()["results"]] == [reward.pk]
    assert api.get(f"/api/v1/rewards/{reward.pk}/").json()["amount_minor"] == 500
    assert_problem(api.post(f"/api/v1/rewards/{reward.pk}/void/", {}, format="json"), 400, "validation_error")
    voided = api.post(f"/api/v1/rewards/{reward.pk}/void/", {"reason": "refunded"}, format="json")
    assert voided.status_code == 200 and voided.json()["status"] == "voided"
    assert api.get("/api/v1/balances/").json()["campaigns"][0]["held_minor"] == 0


def test_reward_approve_only_from_review(api, campaign):
    rule_create(campaign=campaign, trigger="comment", fixed_minor=300, approval_policy="always_review")
    review = ingest(campaign, external_id="c-1").reward
    Reward.objects.filter(pk=review.pk).update(status=RewardStatus.REVIEW)
    approved = api.post(f"/api/v1/rewards/{review.pk}/approve/", format="json")
    assert approved.status_code == 200 and approved.json()["status"] in ("held", "payable")
    assert_problem(api.post(f"/api/v1/rewards/{review.pk}/approve/", format="json"), 409, "invalid_transition")


def test_balances_show_funds_and_budgets(api, brand, campaign):
    ingest(campaign)
    body = api.get("/api/v1/balances/").json()
    assert body["funds"] == [{"currency": "EUR", "available_minor": 0}]
    assert body["campaigns"] == [
        {"campaign_id": campaign.pk, "slug": "summer", "currency": "EUR", "funded_minor": 100_000,
         "held_minor": 500, "spent_minor": 500, "available_minor": 99_500},
    ]  # fmt: skip


def test_payouts_show_only_the_brands_share(api, campaign, rival_campaign):
    from tests.api.test_isolation import make_payout

    payout = make_payout([ingest(campaign).reward, ingest(rival_campaign).reward])
    listed = api.get("/api/v1/payouts/").json()["results"]
    assert [p["id"] for p in listed] == [payout.pk]
    detail = api.get(f"/api/v1/payouts/{payout.pk}/").json()
    assert detail["amount_minor"] == 500 and len(detail["items"]) == 1
    assert api.get("/api/v1/payouts/?status=created").json()["results"][0]["id"] == payout.pk


# --- webhook endpoints ---------------------------------------------------------------------------


def test_webhook_endpoint_lifecycle(api, brand):
    created = api.post(
        "/api/v1/webhook-endpoints/",
        {"url": "https://shop.example/hooks", "event_types": ["reward.held"]},
        format="json",
    )
    assert created.status_code == 201
    endpoint = created.json()
    assert endpoint["secret"].startswith("whsec_")
    assert "secret" not in api.get(f"/api/v1/webhook-endpoints/{endpoint['id']}/").json()
    assert WebhookEndpoint.objects.get().secret_ciphertext != endpoint["secret"]
    rotated = api.post(f"/api/v1/webhook-endpoints/{endpoint['id']}/rotate-secret/")
    assert rotated.status_code == 200 and rotated.json()["secret"] != endpoint["secret"]
    assert rotated.json()["previous_secret_expires_at"] > timezone.now().isoformat()
    assert api.get(f"/api/v1/webhook-endpoints/{endpoint['id']}/deliveries/").json()["results"] == []
    assert api.delete(f"/api/v1/webhook-endpoints/{endpoint['id']}/").status_code == 204
    assert api.get("/api/v1/webhook-endpoints/").json()["results"] == []
    assert api.get(f"/api/v1/webhook-endpoints/{endpoint['id']}/").status_code == 404


def test_webhook_endpoint_must_be_https_and_known_types(api, brand):
    assert_problem(
        api.post("/api/v1/webhook-endpoints/", {"url": "http://shop.example/hooks"}, format="json"),
        400,
        "invalid_webhook_url",
    )
    assert_problem(
        api.post(
            "/api/v1/webhook-endpoints/", {"url": "https://shop.example/h", "event_types": ["x.y"]}, format="json"
        ),
        400,
        "validation_error",
    )
    assert not WebhookEndpoint.objects.exists()


def test_redeliver(api, brand, campaign):
    from campaigns.webhooks import webhook_endpoint_create, webhook_events_collect

    endpoint = webhook_endpoint_create(brand=brand, url="https://shop.example/h", event_types=[]).endpoint
    ingest(campaign)
    webhook_events_collect()
    delivery = endpoint.deliveries.get(event__type="reward.held")
    delivery.status, delivery.delivered_at, delivery.next_attempt_at = "delivered", timezone.now(), None
    delivery.save()
    response = api.post(f"/api/v1/webhook-deliveries/{delivery.pk}/redeliver/")
    assert response.status_code == 200 and response.json()["status"] == "pending"
    log = api.get(f"/api/v1/webhook-endpoints/{endpoint.pk}/deliveries/").json()["results"]
    assert delivery.pk in {d["id"] for d in log}
