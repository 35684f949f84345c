"""Brands, funding references, budget allocation and the campaign status transitions."""

import pytest
from django.db import IntegrityError, transaction

from campaigns.funding_reference import (
    ALPHABET,
    check_character,
    funding_reference_generate,
    funding_reference_is_valid,
)
from campaigns.models import Campaign, CampaignEvent, CampaignStatus
from campaigns.selectors import campaign_budget, campaigns_with_budget
from campaigns.services import (
    brand_funds_account,
    brand_topup_record,
    campaign_allocate,
    campaign_close,
    campaign_create,
    campaign_end,
    campaign_launch,
    campaign_pause,
    campaign_resume,
    event_ingest,
    reward_void,
    rule_create,
)
from core.exceptions import InsufficientFunds, InvalidTransition
from reconciliation.models import Account
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.conftest import event
from tests.campaigns.factories import CAMPAIGN_START, funded_campaign

pytestmark = pytest.mark.django_db


def test_funding_reference_format_and_check_character():
    for _ in range(200):
        ref = funding_reference_generate()
        assert len(ref) == 8 and ref.startswith("JB") and funding_reference_is_valid(ref)
        assert not set(ref[2:]) & set("0O1I")
    assert funding_reference_is_valid(" jb-" + ref[2:].lower())


def test_check_character_catches_every_single_typo_and_adjacent_swap():
    body = "7F3K9"
    ref = "JB" + body + check_character(body)
    for i in range(2, 8):
        for ch in ALPHABET:
            if ch != ref[i]:
                assert not funding_reference_is_valid(ref[:i] + ch + ref[i + 1 :])
    for i in range(2, 7):
        if ref[i] != ref[i + 1]:
            assert not funding_reference_is_valid(ref[:i] + ref[i + 1] + ref[i] + ref[i + 2 :])


def test_brands_have_unique_funding_references(brand, free_brand):
    assert brand.funding_reference != free_brand.funding_reference
    with pytest.raises(IntegrityError), transaction.atomic():
        type(brand).objects.filter(pk=free_brand.pk).update(funding_reference=brand.funding_reference)


def test_allocation_moves_brand_funds_to_the_budget_once(brand):
    campaign = campaign_create(brand=brand, name="S", slug="s", mode="joyback", starts_at=CAMPAIGN_START)
    brand_topup_record(brand=brand, amount_minor=5_000, currency="EUR", bank_account_code="NL00", idempotency_key="t1")
    campaign_allocate(campaign=campaign, amount_minor=3_000, idempotency_key="a1")
    campaign_allocate(campaign=campaign, amount_minor=3_000, idempotency_key="a1")  # replay
    assert campaign_budget(campaign=campaign).funded_minor == 3_000
    assert brand_funds_account(brand=brand, currency="EUR").available_minor == 2_000
    # the brand cannot allocate money it has not wired
    with pytest.raises(InsufficientFunds):
        campaign_allocate(campaign=campaign, amount_minor=2_001, idempotency_key="a2")
    assert campaign_budget(campaign=campaign).funded_minor == 3_000
    assert CampaignEvent.objects.filter(kind="campaign.budget_allocated").count() == 1


def test_budget_account_is_no_overdraft_liability(brand):
    campaign = campaign_create(brand=brand, name="S", slug="s", mode="joyback", starts_at=CAMPAIGN_START)
    account = Account.objects.get(pk=campaign.budget_account_id)
    assert (account.code, account.kind, account.allow_overdraft) == (
        f"campaign:{campaign.pk}:budget:EUR",
        "liability",
        False,
    )


def test_transitions_are_conditional_and_audited(brand):
    campaign = campaign_create(brand=brand, name="S", slug="s", mode="joyback", starts_at=CAMPAIGN_START)
    with pytest.raises(InvalidTransition):
        campaign_launch(campaign=campaign)  # no rule yet
    rule_create(campaign=campaign, trigger="tiktok_login", fixed_minor=100)
    brand_topup_record(brand=brand, amount_minor=1_000, currency="EUR", bank_account_code="NL00", idempotency_key="t")
    campaign_allocate(campaign=campaign, amount_minor=1_000, idempotency_key="a")
    campaign_launch(campaign=campaign)
    with pytest.raises(InvalidTransition):
        campaign_launch(campaign=campaign)
    campaign_pause(campaign=campaign, reason="checking creatives")
    campaign_resume(campaign=campaign)
    campaign_end(campaign=campaign)
    with pytest.raises(InvalidTransition):
        campaign_resume(campaign=campaign)
    assert list(CampaignEvent.objects.filter(campaign=campaign).order_by("id").values_list("kind", "to_status"))[
        -4:
    ] == [
        ("campaign.launched", "active"),
        ("campaign.paused", "paused"),
        ("campaign.resumed", "active"),
        ("campaign.ended", "ended"),
    ]


def test_resume_is_refused_while_the_budget_cannot_pay(free_brand):
    campaign = funded_campaign(
        brand=free_brand, amount_minor=500, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )
    event_ingest(brand=free_brand, payload=event())
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    with pytest.raises(InvalidTransition) as exc:
        campaign_resume(campaign=campaign)
    assert exc.value.code == "budget_insufficient"
    brand_topup_record(
        brand=free_brand, amount_minor=500, currency="EUR", bank_account_code="NL00", idempotency_key="t2"
    )
    campaign_allocate(campaign=campaign, amount_minor=500, idempotency_key="a2")
    campaign_resume(campaign=campaign)
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.ACTIVE


def test_close_releases_the_unspent_budget_to_the_brand(free_brand):
    campaign = funded_campaign(
        brand=free_brand, amount_minor=2_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )
    kept = event_ingest(brand=free_brand, payload=event()).reward
    refunded = event_ingest(brand=free_brand, payload=event()).reward
    campaign_end(campaign=campaign)
    with pytest.raises(InvalidTransition) as exc:
        campaign_close(campaign=campaign)  # two rewards still reserved
    assert exc.value.code == "rewards_reserved"
    reward_void(reward=refunded, reason="undone")
    from campaigns.services import rewards_mature

    rewards_mature()
    campaign_close(campaign=campaign)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.CLOSED
    assert campaign_budget(campaign=campaign).available_minor == 0
    assert brand_funds_account(brand=free_brand, currency="EUR").available_minor == 2_000 - kept.amount_minor
    assert CampaignEvent.objects.get(campaign=campaign, kind="campaign.closed").data == {"released_minor": 1_500}
    assert ledger_verify_report().ok


def test_campaign_list_is_annotated_with_budget_figures(free_brand):
    campaign = funded_campaign(
        brand=free_brand, amount_minor=2_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )
    event_ingest(brand=free_brand, payload=event())
    row = campaigns_with_budget().get(pk=campaign.pk)
    assert (row.funded_minor, row.held_minor, row.available_minor, row.spent_minor) == (2_000, 500, 1_500, 500)
