"""The admin pages load with budget figures and their actions go through the services."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import translation

from campaigns.models import Campaign, CampaignStatus, RewardStatus
from campaigns.services import event_ingest
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(client):
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    return user


@pytest.fixture
def reviewed(free_brand):
    funded_campaign(
        brand=free_brand,
        amount_minor=5_000,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 500, "approval_policy": "always_review"}],
    )
    return [event_ingest(brand=free_brand, payload=event()).reward for _ in range(2)]


@pytest.mark.parametrize(
    "name",
    [
        "campaigns_brand_changelist",
        "campaigns_campaign_changelist",
        "campaigns_reward_changelist",
        "campaigns_rewardinreview_changelist",
        "campaigns_triggerevent_changelist",
    ],
)
def test_changelists_load(client, ops, reviewed, name):
    response = client.get(reverse(f"admin:{name}"))
    assert response.status_code == 200


def test_campaign_list_shows_budget_figures(client, ops, reviewed):
    response = client.get(reverse("admin:campaigns_campaign_changelist"))
    assert "€50.00" in response.text and "€10.00" in response.text  # funded, held


def test_campaign_change_page_explains_like_and_comment(client, ops, reviewed):
    campaign = Campaign.objects.get()
    response = client.get(reverse("admin:campaigns_campaign_change", args=[campaign.pk]))
    assert response.status_code == 200 and "public APIs" in response.text


def test_review_queue_approve_action_calls_the_service(client, ops, reviewed):
    first, second = reviewed
    response = client.post(
        reverse("admin:campaigns_rewardinreview_changelist"),
        {"action": "approve", "_selected_action": [first.pk]},
    )
    assert response.status_code == 302
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == RewardStatus.PAYABLE and first.decided_by == ops
    assert second.status == RewardStatus.REVIEW


def test_review_queue_reject_action_stores_the_reason(client, ops, reviewed):
    first, _ = reviewed
    client.post(
        reverse("admin:campaigns_rewardinreview_changelist"),
        {"action": "reject_fraud", "_selected_action": [first.pk]},
    )
    first.refresh_from_db()
    assert first.status == RewardStatus.VOIDED and first.decision_reason == "Suspected fraud"


def test_pause_action(client, ops, reviewed):
    campaign = Campaign.objects.get()
    client.post(reverse("admin:campaigns_campaign_changelist"), {"action": "pause", "_selected_action": [campaign.pk]})
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED


def test_adding_a_campaign_in_the_admin_provisions_its_budget(client, ops, free_brand):
    from reconciliation.models import Account

    data = {
        "brand": free_brand.pk,
        "name": "Autumn",
        "slug": "autumn",
        "mode": "joyback",
        "currency": "EUR",
        "timezone": "Europe/Rome",
        "starts_at_0": "2026-09-01",
        "starts_at_1": "00:00:00",
        "payout_mode": "instant",
        "aggregate_minutes": "0",
        "min_payout_minor": "0",
        "vop_no_match": "review",
        "vop_close_match": "ask",
        "vop_not_possible": "pay",
        "rules-TOTAL_FORMS": "1",
        "rules-INITIAL_FORMS": "0",
        "rules-0-trigger": "like",
        "rules-0-verification": "partner_attested",
        "rules-0-is_active": "on",
        "rules-0-amount_type": "fixed",
        "rules-0-fixed_minor": "0.10",
        "rules-0-allowed_iban_countries": "[]",
        "rules-0-hold_days": "0",
        "rules-0-approval_policy": "auto",
        "events-TOTAL_FORMS": "0",
        "events-INITIAL_FORMS": "0",
    }
    response = client.post(reverse("admin:campaigns_campaign_add"), data)
    assert response.status_code == 302, response.context["adminform"].errors if response.context else response
    campaign = Campaign.objects.get(slug="autumn")
    assert campaign.status == CampaignStatus.DRAFT and campaign.rules.count() == 1
    assert Account.objects.get(pk=campaign.budget_account_id).code == f"campaign:{campaign.pk}:budget:EUR"


def test_admin_refuses_a_first_party_like_with_the_explanation(client, ops, reviewed):
    campaign = Campaign.objects.get()
    rule = campaign.rules.get()
    url = reverse("admin:campaigns_campaign_change", args=[campaign.pk])
    form = client.get(url).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and not isinstance(v, list)}
    data.update(
        {
            "starts_at_0": "2026-01-01",
            "starts_at_1": "00:00:00",
            "rules-TOTAL_FORMS": "1",
            "rules-INITIAL_FORMS": "1",
            "rules-0-id": rule.pk,
            "rules-0-campaign": campaign.pk,
            "rules-0-trigger": "like",
            "rules-0-verification": "first_party",
            "rules-0-is_active": "on",
            "rules-0-amount_type": "fixed",
            "rules-0-fixed_minor": "10",
            "rules-0-allowed_iban_countries": "[]",
            "rules-0-hold_days": "0",
            "rules-0-approval_policy": "auto",
            "events-TOTAL_FORMS": "0",
            "events-INITIAL_FORMS": "0",
        }
    )
    response = client.post(url, data)
    assert response.status_code == 200
    assert "public APIs" in str(response.context["inline_admin_formsets"][0].formset.errors)
    rule.refresh_from_db()
    assert rule.trigger == "tiktok_login"


def test_rewards_and_their_holds_show_money_formatted(client, ops, reviewed):
    reward = reviewed[0]
    assert str(reward) == f"reward #{reward.pk} €5.00 review"
    assert str(reward.hold).startswith(f"hold #{reward.hold_id} €")
    with translation.override("it"):
        assert str(reward) == f"reward #{reward.pk} 5,00\xa0€ review"
    text = client.get(reverse("admin:campaigns_reward_change", args=[reward.pk])).content.decode()
    assert "€5.00" in text and f"reward #{reward.pk} 500 " not in text
    event = client.get(reverse("admin:campaigns_triggerevent_change", args=[reward.event_id]))
    assert event.status_code == 200


def test_admin_money_inputs_are_amounts_in_the_campaigns_currency(client, ops, reviewed):
    """Issue 29: the admin asked for minor units (1250 for €12.50)."""
    campaign = Campaign.objects.get()
    rule = campaign.rules.get()
    url = reverse("admin:campaigns_campaign_change", args=[campaign.pk])
    form = client.get(url).context["adminform"].form
    rules = client.get(url).context["inline_admin_formsets"][0].formset
    assert rules.forms[0]["fixed_minor"].value() == Decimal("5.00")
    assert "An amount in EUR" in str(rules.forms[0]["fixed_minor"].help_text)
    data = {k: v for k, v in form.initial.items() if v is not None and not isinstance(v, list)}
    data.update(
        {
            "starts_at_0": "2026-01-01", "starts_at_1": "00:00:00", "min_payout_minor": "1.00",
            "rules-TOTAL_FORMS": "1", "rules-INITIAL_FORMS": "1", "rules-0-id": rule.pk,
            "rules-0-campaign": campaign.pk, "rules-0-trigger": "tiktok_login", "rules-0-verification": "first_party",
            "rules-0-is_active": "on", "rules-0-amount_type": "fixed", "rules-0-fixed_minor": "12.50",
            "rules-0-allowed_iban_countries": "[]", "rules-0-hold_days": "0",
            "rules-0-approval_policy": "always_review",
            "events-TOTAL_FORMS": "0", "events-INITIAL_FORMS": "0",
        }
    )  # fmt: skip
    # a cent's fraction is refused, nothing changes
    refused = client.post(url, {**data, "rules-0-fixed_minor": "12.505"})
    assert refused.status_code == 200
    assert "more decimals than EUR allows" in str(refused.context["inline_admin_formsets"][0].formset.errors)
    rule.refresh_from_db()
    assert rule.fixed_minor == 500
    # 12.50 is stored as 1250 minor units
    assert client.post(url, data).status_code == 302
    rule.refresh_from_db()
    campaign.refresh_from_db()
    assert rule.fixed_minor == 1250 and campaign.min_payout_minor == 100
