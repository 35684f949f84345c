"""Ops change a brand's plan in the admin through a confirmation (audited), and the admin's
campaign and rule forms refuse what the plan lacks, as the portal and the API do."""

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.urls import reverse

from campaigns.models import BrandPlan, Campaign
from campaigns.selectors import brand_plan_current
from campaigns.services import campaign_create
from tests.campaigns.factories import CAMPAIGN_START, BrandFactory, package

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(client):
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    return user


@pytest.fixture
def tok(db):
    return BrandFactory(name="Tok Shop", slug="tok", plan=package("tiktok-only"))


def test_a_plan_change_shows_what_changes_and_happens_only_when_confirmed(client, ops, tok):
    url = reverse("admin:campaigns_brand_change_plan", args=[tok.pk])
    assert "TikTok-only" in client.get(url).content.decode()
    cashback = package("cashback-api")
    review = client.post(url, {"plan": cashback.pk, "reason": "Signed the Cashback API contract"})
    text = review.content.decode()
    assert "Fee per reward (new rewards): 12% → 2%" in text
    assert brand_plan_current(brand=tok).slug == "tiktok-only"

    done = client.post(url, {"plan": cashback.pk, "reason": "Signed the Cashback API contract", "confirm": "yes"})
    assert done.status_code == 302
    period = BrandPlan.objects.get(brand=tok, ended_at__isnull=True)
    assert (period.plan, period.changed_by, period.reason) == (cashback, ops, "Signed the Cashback API contract")
    assert LogEntry.objects.filter(object_id=str(tok.pk), change_message__contains="Cashback API").exists()


def test_the_brand_list_shows_each_brands_plan(client, ops, tok):
    page = client.get(reverse("admin:campaigns_brand_changelist"))
    assert "TikTok-only" in page.content.decode()


def test_the_admin_add_form_refuses_a_campaign_the_plan_cannot_serve(client, ops, tok):
    page = client.post(
        reverse("admin:campaigns_campaign_add"),
        {"brand": tok.pk, "name": "Cash", "slug": "cash", "mode": "cashback", "currency": "EUR",
         "timezone": "Europe/Rome", "starts_at_0": "2026-01-01", "starts_at_1": "00:00:00",
         "payout_mode": "instant", "aggregate_minutes": "0", "min_payout_minor": "0",
         "vop_no_match": "review", "vop_close_match": "ask", "vop_not_possible": "pay",
         "rules-TOTAL_FORMS": "0", "rules-INITIAL_FORMS": "0",
         "events-TOTAL_FORMS": "0", "events-INITIAL_FORMS": "0"},
    )  # fmt: skip
    assert page.status_code == 200
    assert "Your plan TikTok-only does not include Cashback campaigns." in page.content.decode()
    assert not Campaign.objects.exists()


def test_the_admin_rule_inline_refuses_a_trigger_the_plan_lacks(rf, ops, tok):
    from django.contrib import admin

    campaign = campaign_create(brand=tok, name="Joy", slug="joy", mode="joyback", starts_at=CAMPAIGN_START)
    campaign_admin = admin.site._registry[Campaign]
    request = rf.post("/")
    request.user = ops
    inline = campaign_admin.get_inline_instances(request, campaign)[0]
    formset_class = inline.get_formset(request, campaign)
    prefix = formset_class.get_default_prefix()
    data = {
        f"{prefix}-TOTAL_FORMS": "1", f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-0-trigger": "purchase", f"{prefix}-0-is_active": "on",
        f"{prefix}-0-verification": "partner_attested",
        f"{prefix}-0-amount_type": "fixed", f"{prefix}-0-fixed_minor": "500", f"{prefix}-0-hold_days": "0",
        f"{prefix}-0-approval_policy": "auto", f"{prefix}-0-allowed_iban_countries": "[]",
    }  # fmt: skip
    formset = formset_class(data, instance=campaign, prefix=prefix)
    assert not formset.is_valid()
    assert "Your plan TikTok-only does not include the trigger Confirmed purchase." in str(formset.errors)
    assert not campaign.rules.exists()
