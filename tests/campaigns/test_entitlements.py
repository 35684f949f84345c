"""Packages as entitlements (issue 28): every service that makes a rule, a campaign or an API key
asks the brand's plan first, ingestion holds rewards to the plan's monthly allowances, and the
fee per reward is the plan's."""

from datetime import UTC, datetime

import pytest

from campaigns.api_keys import api_key_create
from campaigns.models import ApiKey, BrandUsage, Campaign, RewardRule, TriggerEvent
from campaigns.services import (
    brand_plan_change,
    campaign_create,
    campaign_launch,
    event_ingest,
    event_ingest_bulk,
    rule_create,
)
from core.exceptions import InvalidInput, PlanRefused
from tests.campaigns.conftest import event
from tests.campaigns.factories import CAMPAIGN_START, BrandFactory, funded_campaign, package, plan_with_fees

pytestmark = pytest.mark.django_db

LOGIN_500 = {"trigger": "tiktok_login", "fixed_minor": 500}
PURCHASE_10PCT = {"trigger": "purchase", "amount_type": "percent", "percent_bps": 1000}


def on(slug: str):
    return BrandFactory(plan=package(slug))


def draft(brand, mode="joyback"):
    return campaign_create(brand=brand, name="Summer", slug="summer", mode=mode, starts_at=CAMPAIGN_START)


def test_a_rule_for_a_trigger_the_plan_lacks_is_refused_naming_the_plan_and_nothing_is_created():
    brand = on("tiktok-only")
    campaign = draft(brand, mode="joyback")
    with pytest.raises(PlanRefused) as caught:
        rule_create(campaign=campaign, **PURCHASE_10PCT)
    assert caught.value.code == "plan_refuses" and caught.value.http_status == 403
    assert caught.value.message == "Your plan TikTok-only does not include the trigger Confirmed purchase."
    assert caught.value.details == {"plan": "tiktok-only", "lacks": "trigger:purchase"}
    assert not RewardRule.objects.exists()


def test_a_campaign_whose_mode_the_plan_cannot_serve_is_refused_and_not_created():
    brand = on("cashback-api")
    with pytest.raises(PlanRefused) as caught:
        draft(brand, mode="joyback")
    assert "Cashback API" in caught.value.message and "JoyBack" in caught.value.message
    assert not Campaign.objects.exists()
    assert draft(brand, mode="cashback").status == "draft"


def test_an_api_key_needs_the_api_channel_and_none_is_made_without_it():
    brand = BrandFactory(plan=plan_with_fees(slug="pages-only", channels=["claim_page"]))
    with pytest.raises(PlanRefused) as caught:
        api_key_create(brand=brand, name="shop", scopes=["events"])
    assert caught.value.details["lacks"] == "channel:api"
    assert not ApiKey.objects.exists()
    assert api_key_create(brand=on("cashback-api"), name="shop", scopes=["events"]).token


def test_launch_is_refused_after_a_downgrade_removed_a_rules_trigger():
    brand = on("all-in-one")
    campaign = draft(brand, mode="cashback")
    rule_create(campaign=campaign, **PURCHASE_10PCT)
    brand_plan_change(brand=brand, plan=package("tiktok-only"), reason="downgrade")
    with pytest.raises(PlanRefused):
        campaign_launch(campaign=campaign)
    campaign.refresh_from_db()
    assert campaign.status == "draft"


def test_purchase_rules_default_to_partner_attested_and_refuse_first_party():
    brand = on("cashback-api")
    campaign = draft(brand, mode="cashback")
    with pytest.raises(InvalidInput) as caught:
        rule_create(campaign=campaign, verification="first_party", **PURCHASE_10PCT)
    assert "verification" in caught.value.details
    assert not RewardRule.objects.exists()
    assert rule_create(campaign=campaign, **PURCHASE_10PCT).verification == "partner_attested"


def test_a_shops_purchase_through_the_api_is_rewarded_out_of_the_box():
    brand = on("cashback-api")
    funded_campaign(brand=brand, amount_minor=10_000, rules=[PURCHASE_10PCT], mode="cashback")
    result = event_ingest(
        brand=brand, payload=event(type="purchase", source="api", purchase_amount_minor=5_000, order_id="A1")
    )
    assert (result.outcome, result.reward.amount_minor) == ("rewarded", 500)
    assert result.reward.fee_minor == 10  # the Cashback API plan's 2 %


def test_the_fee_follows_the_plan_for_new_rewards():
    brand = BrandFactory(fee_fixed_minor=10, fee_bps=200)
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    assert event_ingest(brand=brand, payload=event()).reward.fee_minor == 20
    brand_plan_change(brand=brand, plan=plan_with_fees(fee_fixed_minor=15), reason="new terms")
    assert event_ingest(brand=brand, payload=event()).reward.fee_minor == 15


def test_the_monthly_action_allowance_refuses_the_next_reward_one_by_one_and_in_bulk():
    brand = BrandFactory(plan=plan_with_fees(slug="three-a-month", monthly_actions=3))
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    assert [event_ingest(brand=brand, payload=event()).outcome for _ in range(2)] == ["rewarded"] * 2
    results = event_ingest_bulk(brand=brand, payloads=[event(), event()])
    assert [(r.outcome, r.reason) for r in results] == [("rewarded", ""), ("rejected", "plan_monthly_actions")]
    usage = BrandUsage.objects.get(brand=brand)
    assert (usage.actions, usage.rewards_minor) == (3, 1_500)
    assert TriggerEvent.objects.filter(brand=brand, reason="plan_monthly_actions").count() == 1


def test_the_monthly_payout_allowance_counts_reward_amounts():
    brand = BrandFactory(plan=plan_with_fees(slug="ten-euro-a-month", monthly_payouts_minor=1_000))
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    outcomes = [event_ingest(brand=brand, payload=event()).reason for _ in range(3)]
    assert outcomes == ["", "", "plan_monthly_payouts"]


def test_usage_counts_by_calendar_month():
    brand = BrandFactory(plan=plan_with_fees(slug="one-a-month", monthly_actions=1))
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    BrandUsage.objects.create(brand=brand, month=datetime(2020, 1, 1, tzinfo=UTC).date(), actions=99)
    assert event_ingest(brand=brand, payload=event()).outcome == "rewarded"


def test_a_live_rule_the_plan_no_longer_includes_rewards_nothing():
    brand = on("all-in-one")
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    brand_plan_change(brand=brand, plan=package("whatsapp-with-reward"), reason="downgrade")
    result = event_ingest(brand=brand, payload=event())
    assert (result.outcome, result.reason, result.reward) == ("rejected", "plan_excludes_trigger", None)
