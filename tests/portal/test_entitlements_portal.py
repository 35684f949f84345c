"""The portal refuses what the brand's plan lacks on the form itself, with the same words as the
API and the admin, creates nothing, shows the plan with this month's usage, and records an
upgrade request for ops."""

import pytest
from django.test import Client

from campaigns.models import ApiKey, Campaign, RewardRule, UpgradeRequest
from campaigns.services import brand_plan_change, campaign_create
from tests.campaigns.factories import CAMPAIGN_START, BrandFactory, package, plan_with_fees
from tests.portal.conftest import member

pytestmark = pytest.mark.django_db

MESSAGE = "Your plan TikTok-only does not include the trigger Confirmed purchase."


@pytest.fixture
def tok(db):
    return BrandFactory(name="Tok Shop", slug="tok", plan=package("tiktok-only"))


@pytest.fixture
def owner(tok):
    client = Client()
    client.force_login(member(tok))
    return client


def test_a_rule_the_plan_lacks_is_refused_on_the_form(owner, tok):
    campaign = campaign_create(brand=tok, name="Joy", slug="joy", mode="joyback", starts_at=CAMPAIGN_START)
    page = owner.post(
        f"/portal/tok/campaigns/{campaign.pk}/rules/new/",
        {"trigger": "purchase", "amount_type": "fixed", "amount": "5.00", "hold_days": "0", "approval_policy": "auto",
         "save": "1"},
    )  # fmt: skip
    assert page.status_code == 200
    assert MESSAGE in page.context["form"].non_field_errors()
    assert MESSAGE in page.content.decode()
    assert not RewardRule.objects.exists()


@pytest.mark.parametrize(
    ("plan", "mode", "trigger"),
    [
        ("whatsapp-with-reward", "joyback", "whatsapp_optin"),  # the one social trigger the plan has
        ("tiktok-only", "joyback", "tiktok_login"),
        ("all-in-one", "joyback", "tiktok_login"),
        ("all-in-one", "cashback", "purchase"),
    ],
)
def test_a_new_rule_starts_on_a_trigger_of_the_campaigns_kind_and_plan(owner, tok, plan, mode, trigger):
    """Issue 29: a JoyBack campaign's rule form opened on "Confirmed purchase"."""
    brand_plan_change(brand=tok, plan=package(plan))
    campaign = campaign_create(brand=tok, name="C", slug="c", mode=mode, starts_at=CAMPAIGN_START)
    form = owner.get(f"/portal/tok/campaigns/{campaign.pk}/rules/new/").context["form"]
    assert form["trigger"].value() == trigger


def test_a_campaign_the_plan_cannot_serve_is_refused_on_the_form(owner):
    page = owner.post(
        "/portal/tok/campaigns/new/",
        {"name": "Cash", "mode": "cashback", "currency": "EUR", "starts_at": "2026-01-01T00:00",
         "timezone": "Europe/Rome", "payout_mode": "instant", "aggregate_minutes": "0"},
    )  # fmt: skip
    assert "does not include Cashback campaigns" in str(page.context["form"].non_field_errors())
    assert not Campaign.objects.exists()


def test_an_api_key_without_the_api_channel_is_refused_on_the_form(owner, tok):
    brand_plan_change(brand=tok, plan=plan_with_fees(slug="pages-only", name="Pages only", channels=["claim_page"]))
    page = owner.post("/portal/tok/api-keys/", {"name": "Shop", "scopes": ["events"]})
    assert "Your plan Pages only does not include Partner API." in page.content.decode()
    assert not ApiKey.objects.exists()


def test_the_plan_page_shows_the_plan_and_records_an_upgrade_request(owner, tok):
    page = owner.get("/portal/tok/plan/")
    text = page.content.decode()
    assert "TikTok-only" in text and "12%" in text and "TikTok login" in text
    wanted = package("all-in-one")
    sent = owner.post("/portal/tok/plan/", {"plan": wanted.pk, "message": "We sell online too"}, follow=True)
    assert "Request sent" in sent.content.decode()
    request = UpgradeRequest.objects.get()
    assert (request.brand, request.current_plan.slug, request.wanted_plan, request.handled_at) == (
        tok,
        "tiktok-only",
        wanted,
        None,
    )
    brand_plan_change(brand=tok, plan=wanted, reason="upgrade")
    request.refresh_from_db()
    assert request.handled_at is not None


def test_the_plan_page_in_italian(owner):
    page = owner.get("/portal/tok/plan/", HTTP_ACCEPT_LANGUAGE="it")
    assert "Solo TikTok" in page.content.decode()
