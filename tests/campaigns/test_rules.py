"""Rule validation: full_clean messages for people, CHECK constraints as the backstop."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from campaigns.models import RewardRule
from campaigns.models.rules import UNVERIFIABLE_EXPLANATION
from campaigns.services import campaign_create, rule_create
from core.exceptions import InvalidInput
from tests.campaigns.factories import CAMPAIGN_START

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(brand):
    return campaign_create(brand=brand, name="Summer", slug="summer", mode="joyback", starts_at=CAMPAIGN_START)


@pytest.mark.parametrize("trigger", ["like", "comment"])
def test_like_and_comment_cannot_be_first_party_and_the_message_says_why(campaign, trigger):
    with pytest.raises(InvalidInput) as exc:
        rule_create(campaign=campaign, trigger=trigger, fixed_minor=10, verification="first_party")
    assert "TikTok" in exc.value.message
    assert RewardRule.objects.count() == 0


def test_like_defaults_to_partner_attested(campaign):
    assert rule_create(campaign=campaign, trigger="like", fixed_minor=10).verification == "partner_attested"


def test_database_refuses_a_first_party_like_even_without_full_clean(campaign):
    with pytest.raises(IntegrityError), transaction.atomic():
        RewardRule.objects.create(campaign=campaign, trigger="like", fixed_minor=10, verification="first_party")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"trigger": "tiktok_login"}, "fixed_minor"),
        ({"trigger": "tiktok_login", "amount_type": "percent", "percent_bps": 500}, "amount_type"),
        (
            {
                "trigger": "purchase",
                "amount_type": "percent",
                "percent_bps": 20_000,
                "verification": "partner_attested",
            },
            "percent_bps",
        ),
        (
            {
                "trigger": "purchase",
                "amount_type": "percent",
                "percent_bps": 500,
                "min_minor": 500,
                "max_minor": 100,
                "verification": "partner_attested",
            },
            "max_minor",
        ),
        ({"trigger": "custom", "fixed_minor": 100}, "custom_name"),
        ({"trigger": "tiktok_login", "fixed_minor": 100, "approval_policy": "review_above"}, "review_above_minor"),
        ({"trigger": "view_threshold", "fixed_minor": 100}, "view_threshold"),
        ({"trigger": "tiktok_login", "fixed_minor": 100, "allowed_iban_countries": ["nl"]}, "allowed_iban_countries"),
    ],
)
def test_invalid_rules_are_refused_with_a_field_message(campaign, fields, field):
    with pytest.raises(InvalidInput) as exc:
        rule_create(campaign=campaign, **fields)
    assert field in exc.value.details
    assert RewardRule.objects.count() == 0


@pytest.mark.parametrize(
    "fields",
    [
        {"trigger": "tiktok_login", "fixed_minor": 0},
        {"trigger": "tiktok_login", "amount_type": "percent", "percent_bps": 500},
        {"trigger": "custom", "fixed_minor": 100},
        {"trigger": "tiktok_login", "fixed_minor": 100, "approval_policy": "review_above"},
        {"trigger": "purchase", "amount_type": "percent", "percent_bps": 500, "min_minor": 500, "max_minor": 100},
    ],
)
def test_database_constraints_back_up_validation(campaign, fields):
    with pytest.raises(IntegrityError), transaction.atomic():
        RewardRule.objects.create(campaign=campaign, **fields)


def test_one_active_rule_per_trigger(campaign):
    rule_create(campaign=campaign, trigger="tiktok_login", fixed_minor=100)
    with pytest.raises(InvalidInput):
        rule_create(campaign=campaign, trigger="tiktok_login", fixed_minor=200)


def test_clean_message_is_the_admin_explanation(campaign):
    rule = RewardRule(campaign=campaign, trigger="comment", fixed_minor=10, verification="first_party")
    with pytest.raises(ValidationError) as exc:
        rule.clean()
    assert exc.value.message_dict["verification"] == [UNVERIFIABLE_EXPLANATION]
