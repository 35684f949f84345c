"""The API refuses what the brand's plan lacks the way the services do: 403 problem JSON with
``plan_refuses`` and a detail naming the plan, and nothing created."""

import pytest

from campaigns.api_keys import api_key_create
from campaigns.models import Campaign, RewardRule
from tests.api.conftest import ALL_SCOPES, client_for
from tests.campaigns.factories import BrandFactory, package

pytestmark = pytest.mark.django_db


@pytest.fixture
def tiktok_brand(db):
    return BrandFactory(name="Tok Shop", slug="tok-shop", plan=package("tiktok-only"))


@pytest.fixture
def tiktok_api(tiktok_brand):
    return client_for(api_key_create(brand=tiktok_brand, name="backend", scopes=ALL_SCOPES).token)


def test_a_campaign_and_a_rule_the_plan_lacks_are_refused_with_problem_json(tiktok_brand, tiktok_api):
    refused = tiktok_api.post(
        "/api/v1/campaigns/",
        {"name": "Cash", "slug": "cash", "mode": "cashback", "starts_at": "2026-06-01T00:00:00Z"},
        format="json",
    )
    assert refused.status_code == 403
    assert refused["Content-Type"] == "application/problem+json"
    body = refused.json()
    assert body["code"] == "plan_refuses" and "TikTok-only" in body["detail"]
    assert body["details"] == {"plan": "tiktok-only", "lacks": "mode:cashback"}
    assert not Campaign.objects.filter(slug="cash").exists()

    made = tiktok_api.post(
        "/api/v1/campaigns/",
        {"name": "Joy", "slug": "joy", "mode": "joyback", "starts_at": "2026-06-01T00:00:00Z"},
        format="json",
    )
    assert made.status_code == 201, made.content
    rule = tiktok_api.post(
        f"/api/v1/campaigns/{made.json()['id']}/rules/",
        {"trigger": "whatsapp_optin", "fixed_minor": 300},
        format="json",
    )
    assert (rule.status_code, rule.json()["code"]) == (403, "plan_refuses")
    assert rule.json()["detail"] == "Your plan TikTok-only does not include the trigger WhatsApp opt-in."
    assert not RewardRule.objects.exists()


def test_a_purchase_rule_through_the_api_defaults_to_partner_attested(brand, api):
    campaign = api.post(
        "/api/v1/campaigns/",
        {"name": "Cash", "slug": "cash", "mode": "cashback", "starts_at": "2026-06-01T00:00:00Z"},
        format="json",
    ).json()
    rule = api.post(
        f"/api/v1/campaigns/{campaign['id']}/rules/",
        {"trigger": "purchase", "amount_type": "percent", "percent_bps": 500},
        format="json",
    )
    assert rule.status_code == 201, rule.content
    assert rule.json()["verification"] == "partner_attested"
    first_party = api.post(
        f"/api/v1/campaigns/{campaign['id']}/rules/",
        {"trigger": "purchase", "amount_type": "percent", "percent_bps": 500, "verification": "first_party"},
        format="json",
    )
    assert first_party.status_code == 400
    assert RewardRule.objects.count() == 1
