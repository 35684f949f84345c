"""The portal finishes what it starts: deciding rewards in review, closing a campaign and moving
its unspent budget back — each a confirmation page (GET) then the act (POST), idempotent on
replay, refused for another brand (404) and for bad input (4xx, nothing written)."""

import pytest
from django.test import Client

from campaigns.models import Campaign, CampaignEvent, CampaignStatus, Reward, RewardEvent, RewardStatus
from campaigns.selectors import campaign_budget
from campaigns.services import brand_funds_account, event_ingest
from reconciliation.models import JournalEntry
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.portal.conftest import member
from tests.portal.test_portal_italian import assert_italian

pytestmark = pytest.mark.django_db

KEY = "0123456789abcdef0123456789abcdef"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def review_campaign(brand_a):
    campaign = funded_campaign(
        brand=brand_a,
        slug="reviewed",
        amount_minor=10_000,
        brand_reviews=True,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 500, "approval_policy": "always_review"}],
    )
    return campaign


def _in_review(brand, campaign) -> Reward:
    reward = event_ingest(brand=brand, payload=event(campaign=campaign.slug)).reward
    assert reward.status == RewardStatus.REVIEW
    return reward


# --- rewards in review -------------------------------------------------------------------------


def test_the_brand_approves_its_reward_after_a_confirmation_page_and_a_replay_changes_nothing(
    brand_a, owner_a, review_campaign
):
    reward = _in_review(brand_a, review_campaign)
    client = _client(owner_a)
    assert reward.pk in [r.pk for r in client.get("/portal/alpha/review/").context["rewards"]]
    url = f"/portal/alpha/review/{reward.pk}/approve/"

    page = client.get(url)
    assert page.status_code == 200
    reward.refresh_from_db()
    assert reward.status == RewardStatus.REVIEW  # the GET only asks

    assert client.post(url).status_code == 302
    assert client.post(url).status_code == 302  # replayed
    reward.refresh_from_db()
    assert reward.status in (RewardStatus.HELD, RewardStatus.PAYABLE)
    assert reward.decided_by == owner_a
    assert RewardEvent.objects.filter(reward=reward, kind="reward.approved").count() == 1


def test_the_brand_rejects_with_a_reason_and_the_money_goes_back_to_the_budget(brand_a, owner_a, review_campaign):
    reward = _in_review(brand_a, review_campaign)
    client = _client(owner_a)
    url = f"/portal/alpha/review/{reward.pk}/reject/"

    # no reason: 400, nothing decided
    assert client.post(url, {"reason": ""}).status_code == 400
    reward.refresh_from_db()
    assert reward.status == RewardStatus.REVIEW

    assert client.post(url, {"reason": "Not our customer"}).status_code == 302
    assert client.post(url, {"reason": "Not our customer"}).status_code == 302
    reward.refresh_from_db()
    assert reward.status == RewardStatus.VOIDED and reward.decision_reason == "Not our customer"
    assert RewardEvent.objects.filter(reward=reward, kind="reward.rejected").count() == 1
    assert campaign_budget(campaign=review_campaign).available_minor == 10_000


def test_a_campaign_our_reviewers_decide_and_another_brands_rewards_are_404(
    brand_a, brand_b, owner_a, owner_b, review_campaign
):
    reward = _in_review(brand_a, review_campaign)
    ops_only = funded_campaign(
        brand=brand_a,
        slug="ops-review",
        amount_minor=2_000,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 500, "approval_policy": "always_review"}],
    )
    ops_reward = _in_review(brand_a, ops_only)
    mine = _client(owner_a)
    other = _client(owner_b)
    for action in ("approve", "reject"):
        assert mine.get(f"/portal/alpha/review/{ops_reward.pk}/{action}/").status_code == 404
        assert mine.post(f"/portal/alpha/review/{ops_reward.pk}/{action}/", {"reason": "x"}).status_code == 404
        assert other.get(f"/portal/beta/review/{reward.pk}/{action}/").status_code == 404
        assert other.post(f"/portal/beta/review/{reward.pk}/{action}/", {"reason": "x"}).status_code == 404
        assert other.post(f"/portal/alpha/review/{reward.pk}/{action}/", {"reason": "x"}).status_code == 404
    assert set(Reward.objects.filter(pk__in=[reward.pk, ops_reward.pk]).values_list("status", flat=True)) == {
        RewardStatus.REVIEW
    }
    assert not RewardEvent.objects.filter(kind__in=["reward.approved", "reward.rejected"]).exists()


def test_an_analyst_cannot_decide(brand_a, review_campaign):
    reward = _in_review(brand_a, review_campaign)
    analyst = _client(member(brand_a, "analyst"))
    assert analyst.get("/portal/alpha/review/").status_code == 200
    assert analyst.post(f"/portal/alpha/review/{reward.pk}/approve/").status_code == 404
    reward.refresh_from_db()
    assert reward.status == RewardStatus.REVIEW


# --- closing -----------------------------------------------------------------------------------


def test_closing_asks_first_then_returns_the_unspent_budget_once(brand_a, owner_a, campaign_a):
    client = _client(owner_a)
    url = f"/portal/alpha/campaigns/{campaign_a.pk}/close/"
    page = client.get(url)
    assert page.status_code == 200 and page.context["budget"].available_minor == 100_000
    assert Campaign.objects.get(pk=campaign_a.pk).status == CampaignStatus.ACTIVE

    assert client.post(url).status_code == 302
    assert client.post(url).status_code == 302  # replayed

    assert Campaign.objects.get(pk=campaign_a.pk).status == CampaignStatus.CLOSED
    assert brand_funds_account(brand=brand_a, currency="EUR").available_minor == 100_000
    assert CampaignEvent.objects.filter(campaign=campaign_a, kind="campaign.closed").count() == 1
    assert JournalEntry.objects.filter(kind="budget_release").count() == 1
    assert ledger_verify_report().ok


def test_closing_with_rewards_reserved_is_refused_with_nothing_written(brand_a, owner_a, campaign_a):
    event_ingest(brand=brand_a, payload=event())
    client = _client(owner_a)
    url = f"/portal/alpha/campaigns/{campaign_a.pk}/close/"
    assert client.get(url).context["reserved"] == 1
    response = client.post(url)
    assert response.status_code == 409
    assert Campaign.objects.get(pk=campaign_a.pk).status == CampaignStatus.ACTIVE
    assert not JournalEntry.objects.filter(kind="budget_release").exists()


def test_another_brand_cannot_close_or_release(brand_a, owner_b, campaign_a, campaign_b):
    client = _client(owner_b)
    for path in ("close", "release"):
        for slug in ("alpha", "beta"):
            url = f"/portal/{slug}/campaigns/{campaign_a.pk}/{path}/"
            assert client.get(url).status_code == 404
            assert client.post(url, {"amount": "10", "idempotency_key": KEY}).status_code == 404
    assert Campaign.objects.get(pk=campaign_a.pk).status == CampaignStatus.ACTIVE
    assert not JournalEntry.objects.filter(kind="budget_release").exists()


# --- moving budget back ------------------------------------------------------------------------


def test_release_asks_for_an_amount_and_a_replay_moves_it_once(brand_a, owner_a, campaign_a):
    client = _client(owner_a)
    url = f"/portal/alpha/campaigns/{campaign_a.pk}/release/"
    page = client.get(url)
    assert page.status_code == 200
    key = page.context["form"].initial["idempotency_key"]

    assert client.post(url, {"amount": "250.00", "idempotency_key": key}).status_code == 302
    assert client.post(url, {"amount": "250.00", "idempotency_key": key}).status_code == 302

    assert campaign_budget(campaign=campaign_a).available_minor == 75_000
    assert brand_funds_account(brand=brand_a, currency="EUR").available_minor == 25_000
    assert CampaignEvent.objects.filter(campaign=campaign_a, kind="campaign.budget_released").count() == 1


@pytest.mark.parametrize(
    ("data", "status"),
    [
        ({"amount": "", "idempotency_key": KEY}, 400),
        ({"amount": "-5", "idempotency_key": KEY}, 400),
        ({"amount": "1.001", "idempotency_key": KEY}, 400),
        ({"amount": "abc", "idempotency_key": KEY}, 400),
        ({"amount": "10"}, 400),  # no key from the confirmation page
        ({"amount": "10", "idempotency_key": "not-a-key"}, 400),
        ({"amount": "1000.01", "idempotency_key": KEY}, 422),  # more than is unspent
    ],
)
def test_bad_release_input_is_a_4xx_with_nothing_moved(brand_a, owner_a, campaign_a, data, status):
    entries = JournalEntry.objects.count()
    response = _client(owner_a).post(f"/portal/alpha/campaigns/{campaign_a.pk}/release/", data)
    assert response.status_code == status
    assert JournalEntry.objects.count() == entries
    assert campaign_budget(campaign=campaign_a).available_minor == 100_000
    assert not CampaignEvent.objects.filter(kind="campaign.budget_released").exists()


# --- in Italian ----------------------------------------------------------------------------------


def test_the_new_pages_read_italian(brand_a, owner_a, campaign_a, review_campaign):
    reward = _in_review(brand_a, review_campaign)
    client = _client(owner_a)
    client.cookies["django_language"] = "it"
    c = f"/portal/alpha/campaigns/{campaign_a.pk}"
    assert_italian(client.get(f"{c}/close/"), english=["Close"], italian=["Sì, chiudi la campagna"])
    assert_italian(client.get(f"{c}/release/"), english=["Move"], italian=["Riporta ai miei fondi"])
    assert_italian(client.get("/portal/alpha/review/"), english=["Approve"], italian=["Approva", "Rifiuta"])
    assert_italian(client.get(f"/portal/alpha/review/{reward.pk}/reject/"), english=["Reject"], italian=["Sì, rifiuta"])
    assert_italian(client.get("/portal/alpha/withdraw/"), english=["Withdraw"], italian=["Aggiungi conto bancario"])


def test_ending_asks_first(brand_a, owner_a, campaign_a):
    client = _client(owner_a)
    url = f"/portal/alpha/campaigns/{campaign_a.pk}/end/"
    assert client.get(url).status_code == 200
    assert Campaign.objects.get(pk=campaign_a.pk).status == CampaignStatus.ACTIVE
    assert client.get(f"/portal/alpha/campaigns/{campaign_a.pk}/pause/").status_code == 302  # no page: one click
    assert Campaign.objects.get(pk=campaign_a.pk).status == CampaignStatus.ACTIVE
    assert client.post(url).status_code == 302
    assert Campaign.objects.get(pk=campaign_a.pk).status == CampaignStatus.ENDED
