"""Moving a campaign's unspent budget back to the brand, and closing a campaign from any running
status: only what no reward holds goes back, once per key, never overdrawn under concurrency."""

import pytest

from campaigns.models import Campaign, CampaignEvent, CampaignStatus, CampaignTally
from campaigns.selectors import campaign_budget
from campaigns.services import (
    brand_funds_account,
    campaign_budget_release,
    campaign_close,
    event_ingest,
    reward_void,
)
from core.exceptions import InsufficientFunds, InvalidInput, InvalidTransition
from reconciliation.models import JournalEntry
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign
from tests.reconciliation.test_ledger_concurrency import run_concurrently

RULES = [{"trigger": "tiktok_login", "fixed_minor": 500}]


def _funds(brand) -> int:
    return brand_funds_account(brand=brand, currency="EUR").available_minor


@pytest.mark.django_db
def test_release_moves_only_the_unreserved_budget_once_per_key(free_brand):
    # given 20.00 funded and one 5.00 reward held
    campaign = funded_campaign(brand=free_brand, amount_minor=2_000, rules=RULES)
    event_ingest(brand=free_brand, payload=event())
    assert campaign_budget(campaign=campaign).available_minor == 1_500

    # when 10.00 goes back, twice with the same key
    campaign_budget_release(campaign=campaign, amount_minor=1_000, idempotency_key="rel-1")
    campaign_budget_release(campaign=campaign, amount_minor=1_000, idempotency_key="rel-1")

    # then once: the budget keeps the reservation, the funds got 10.00, funded dropped
    budget = campaign_budget(campaign=campaign)
    assert (budget.available_minor, budget.held_minor, budget.funded_minor) == (500, 500, 1_000)
    assert _funds(free_brand) == 1_000
    assert CampaignEvent.objects.filter(campaign=campaign, kind="campaign.budget_released").count() == 1
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_release_refuses_money_reserved_for_rewards_and_bad_amounts(free_brand):
    campaign = funded_campaign(brand=free_brand, amount_minor=2_000, rules=RULES)
    event_ingest(brand=free_brand, payload=event())
    entries = JournalEntry.objects.count()

    with pytest.raises(InsufficientFunds):
        campaign_budget_release(campaign=campaign, amount_minor=1_501, idempotency_key="too-much")
    for bad in (0, -5, 10.0, "100"):
        with pytest.raises(InvalidInput):
            campaign_budget_release(campaign=campaign, amount_minor=bad, idempotency_key=f"bad-{bad}")

    # nothing moved, nothing written
    assert JournalEntry.objects.count() == entries
    assert campaign_budget(campaign=campaign).available_minor == 1_500
    assert not CampaignEvent.objects.filter(campaign=campaign, kind="campaign.budget_released").exists()


@pytest.mark.django_db
def test_releasing_what_pays_the_smallest_reward_pauses_an_active_campaign(free_brand):
    campaign = funded_campaign(brand=free_brand, amount_minor=2_000, rules=RULES)
    campaign_budget_release(campaign=campaign, amount_minor=1_600, idempotency_key="rel")
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    paused = CampaignEvent.objects.get(campaign=campaign, kind="campaign.paused")
    assert paused.reason == "budget_released" and paused.data["automatic"] is True


@pytest.mark.django_db
def test_close_ends_and_closes_a_running_campaign_and_returns_everything(free_brand):
    # given an active campaign with one reward reserved, then voided
    campaign = funded_campaign(brand=free_brand, amount_minor=2_000, rules=RULES)
    reward = event_ingest(brand=free_brand, payload=event()).reward
    with pytest.raises(InvalidTransition) as exc:
        campaign_close(campaign=campaign)
    assert exc.value.code == "rewards_reserved"
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.ACTIVE  # refused: nothing changed
    reward_void(reward=reward, reason="undone")

    # when it is closed, twice
    campaign_close(campaign=campaign)
    campaign_close(campaign=campaign)

    # then ended and closed once each, every cent back with the brand, the books verify
    kinds = list(CampaignEvent.objects.filter(campaign=campaign).order_by("id").values_list("kind", flat=True))
    assert kinds[-2:] == ["campaign.ended", "campaign.closed"]
    assert kinds.count("campaign.closed") == 1
    assert campaign_budget(campaign=campaign).available_minor == 0
    assert _funds(free_brand) == 2_000
    assert JournalEntry.objects.filter(kind="budget_release").count() == 1
    assert event_ingest(brand=free_brand, payload=event()).outcome == "rejected"  # no new actions
    assert ledger_verify_report().ok


@pytest.mark.django_db
def test_a_closed_campaign_releases_nothing(free_brand):
    campaign = funded_campaign(brand=free_brand, amount_minor=2_000, rules=RULES)
    campaign_close(campaign=campaign)
    with pytest.raises(InvalidTransition):
        campaign_budget_release(campaign=campaign, amount_minor=100, idempotency_key="late")


def _in_threads(n: int, work) -> list[Exception]:
    """The errors of ``work(i)`` run in ``n`` threads released together."""
    return [r for r in run_concurrently(work, n=n) if isinstance(r, Exception)]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_releases_never_overdraw_the_budget():
    # given 20.00 available and two brand admins each moving 15.00 back at the same moment
    brand = BrandFactory(name="Race", slug="race-release")
    campaign = funded_campaign(brand=brand, amount_minor=2_000, rules=RULES)

    errors = _in_threads(
        2,
        lambda i: campaign_budget_release(campaign=campaign, amount_minor=1_500, idempotency_key=f"race-{i}"),
    )

    # then exactly one moved; the other was refused for lack of money, not by a crash
    assert len(errors) == 1 and isinstance(errors[0], InsufficientFunds)
    assert campaign_budget(campaign=campaign).available_minor == 500
    assert _funds(brand) == 1_500
    assert CampaignTally.objects.get(pk=campaign.pk).funded_minor == 500
    assert ledger_verify_report().ok


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_release_racing_a_close_moves_each_cent_once():
    brand = BrandFactory(name="Race", slug="race-close")
    campaign = funded_campaign(brand=brand, amount_minor=2_000, rules=RULES)

    def work(i: int) -> None:
        if i == 0:
            campaign_budget_release(campaign=campaign, amount_minor=1_500, idempotency_key="race")
        else:
            campaign_close(campaign=Campaign.objects.get(pk=campaign.pk))

    errors = _in_threads(2, work)

    assert all(isinstance(e, InvalidTransition) for e in errors), errors  # the release came too late
    assert campaign_budget(campaign=campaign).available_minor == 0
    assert _funds(brand) == 2_000
    assert ledger_verify_report().ok
