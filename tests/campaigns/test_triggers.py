"""Trigger metadata is declared once (``campaigns.triggers``): every list of triggers — the
choices, the refused first-party rules, the first-party sources, the paid-engagement warning,
the preview's words, the claim page's offers — comes from it."""

import pytest
from django.db import IntegrityError, transaction

from campaigns.evaluation import FIRST_PARTY_SOURCES
from campaigns.models import ENGAGEMENT_TRIGGERS, EventSource, RewardRule, Trigger
from campaigns.models.rules import UNVERIFIABLE_FIRST_PARTY
from campaigns.platforms import platform_names
from campaigns.services import campaign_create, rule_create
from campaigns.triggers import TRIGGERS, first_party_platforms, trigger_evidence, trigger_spec, trigger_values
from core.exceptions import InvalidInput
from tests.campaigns.factories import CAMPAIGN_START


@pytest.fixture
def campaign(brand):
    return campaign_create(brand=brand, name="Summer", slug="summer", mode="joyback", starts_at=CAMPAIGN_START)


def test_the_trigger_choices_are_the_declarations_in_order():
    assert [(value, str(label)) for value, label in Trigger.choices] == [(s.value, str(s.label)) for s in TRIGGERS]
    assert Trigger.TIKTOK_LOGIN == "tiktok_login" and Trigger.VIEW_THRESHOLD == "view_threshold"


def test_the_derived_lists_read_the_declarations():
    assert UNVERIFIABLE_FIRST_PARTY == (Trigger.LIKE, Trigger.COMMENT)
    assert set(ENGAGEMENT_TRIGGERS) == set(trigger_values(engagement=True))
    assert trigger_values(claim_page=True) == (
        "purchase",
        "tiktok_login",
        "whatsapp_optin",
        "ugc_share",
        "view_threshold",
    )
    assert {EventSource.TIKTOK, EventSource.WHATSAPP, EventSource.CLAIM_PAGE} == FIRST_PARTY_SOURCES


def test_every_trigger_platform_is_a_registered_platform_and_an_event_source():
    platforms = {s.platform for s in TRIGGERS if s.platform}
    assert platforms <= set(platform_names())
    assert first_party_platforms() <= set(EventSource.values)


def test_a_first_party_trigger_says_what_evidence_it_keeps_and_only_it_does():
    for spec in TRIGGERS:
        assert bool(spec.evidence) == spec.first_party, spec.value


def test_evidence_is_exactly_the_declared_keys_in_their_order():
    assert list(trigger_evidence("whatsapp_optin", code="JBABCDEF", message_id="wamid.1")) == ["message_id", "code"]
    with pytest.raises(ValueError):
        trigger_evidence("whatsapp_optin", message_id="wamid.1")
    with pytest.raises(ValueError):
        trigger_evidence("ugc_share", video_id="1", description="", share_url="", token="secret")


@pytest.mark.parametrize("trigger", trigger_values(unverifiable=True))
def test_a_trigger_its_platform_cannot_show_is_refused_first_party_by_the_form_and_the_database(campaign, trigger):
    # given a trigger whose spec says its platform cannot show it
    assert trigger_spec(trigger).unverifiable
    # then a first-party rule is refused by validation, and by the CHECK constraint without it
    with pytest.raises(InvalidInput):
        rule_create(campaign=campaign, trigger=trigger, fixed_minor=10, verification="first_party")
    with pytest.raises(IntegrityError), transaction.atomic():
        RewardRule.objects.create(campaign=campaign, trigger=trigger, fixed_minor=10, verification="first_party")
    assert not RewardRule.objects.filter(campaign=campaign, trigger=trigger).exists()
    # and without a verification it defaults to partner-attested
    assert rule_create(campaign=campaign, trigger=trigger, fixed_minor=10).verification == "partner_attested"
