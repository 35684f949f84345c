"""Refund by order id (the Cashback API): a refunded order's reward is voided, reduced or clawed
back, once per Idempotency-Key, and the books still balance."""

import pytest

from campaigns.api_keys import api_key_create
from campaigns.models import OrderRefund, Reward, RewardEvent
from campaigns.services import EventInput, campaign_close, event_ingest, order_refund, rewards_mature
from campaigns.services.brands import brand_funds_account
from reconciliation.models import Account
from reconciliation.selectors import ledger_verify_report
from tests.api.conftest import ALL_SCOPES, client_for
from tests.campaigns.factories import BrandFactory, funded_campaign, package
from tests.reconciliation.test_ledger_concurrency import run_concurrently

pytestmark = pytest.mark.django_db

HELD_10PCT = {"trigger": "purchase", "amount_type": "percent", "percent_bps": 1000, "hold_days": 14}
NOW_10PCT = {"trigger": "purchase", "amount_type": "percent", "percent_bps": 1000}


@pytest.fixture
def shop(db):
    return BrandFactory(name="Sole Shop", slug="sole-shop", plan=package("cashback-api"))


@pytest.fixture
def shop_api(shop):
    return client_for(api_key_create(brand=shop, name="shop", scopes=ALL_SCOPES).token)


def purchase(brand, order_id: str, amount_minor: int = 5_000):
    return event_ingest(
        brand=brand,
        payload=EventInput(
            external_id=f"order-{order_id}",
            campaign="summer",
            type="purchase",
            source="api",
            email="buyer@example.com",
            iban="NL91ABNA0417164300",
            purchase_amount_minor=amount_minor,
            order_id=order_id,
        ),
    ).reward


def refund(api, order_id: str, key: str, **body):
    return api.post(f"/api/v1/orders/{order_id}/refund/", body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def available(campaign) -> int:
    return Account.objects.get(pk=campaign.budget_account_id).available_minor


def test_a_partial_refund_reduces_a_held_reward_once_per_key_and_a_full_one_voids_it(shop, shop_api):
    campaign = funded_campaign(brand=shop, amount_minor=10_000, rules=[HELD_10PCT], mode="cashback")
    reward = purchase(shop, "A-1")
    assert (reward.status, reward.amount_minor, reward.fee_minor) == ("held", 500, 10)

    first = refund(shop_api, "A-1", "refund-1", amount_minor=2_500)
    again = refund(shop_api, "A-1", "refund-1", amount_minor=2_500)
    assert first.status_code == 200, first.content
    assert again.json() == first.json()
    assert first.json()["rewards"][0]["outcome"] == "reduced"
    assert first.json()["refunded_minor"] == 2_500
    reward.refresh_from_db()
    assert (reward.status, reward.amount_minor, reward.fee_minor) == ("held", 250, 5)
    assert RewardEvent.objects.filter(reward=reward, kind="reward.reduced").count() == 1

    full = refund(shop_api, "A-1", "refund-2")
    assert full.json()["rewards"][0]["outcome"] == "voided"
    reward.refresh_from_db()
    assert reward.status == "voided"
    assert available(campaign) == 10_000
    assert ledger_verify_report().ok


def test_a_reduced_reward_matures_for_the_smaller_sum_and_the_rest_goes_back_to_the_budget(shop, shop_api):
    campaign = funded_campaign(brand=shop, amount_minor=10_000, rules=[NOW_10PCT], mode="cashback")
    reward = purchase(shop, "B-7", amount_minor=3_333)
    assert reward.amount_minor == 333
    refund(shop_api, "B-7", "r1", amount_minor=1_000)
    reward.refresh_from_db()
    # 333 × 1000/3333 = 99.9 → the largest remainder takes 100 of it.
    assert reward.amount_minor == 233
    rewards_mature()
    reward.refresh_from_db()
    assert reward.status == "payable"
    assert available(campaign) == 10_000 - 233 - reward.fee_minor
    assert ledger_verify_report().ok


def test_a_full_refund_claws_back_a_payable_reward_and_partial_leaves_it(shop, shop_api):
    campaign = funded_campaign(brand=shop, amount_minor=10_000, rules=[NOW_10PCT], mode="cashback")
    reward = purchase(shop, "C-3")
    rewards_mature()
    partial = refund(shop_api, "C-3", "p1", amount_minor=1_000)
    assert partial.json()["rewards"][0]["outcome"] == "payable_partial"
    full = refund(shop_api, "C-3", "f1")
    assert full.json()["rewards"][0]["outcome"] == "clawed_back"
    reward.refresh_from_db()
    assert reward.status == "clawed_back"
    assert available(campaign) == 10_000
    assert ledger_verify_report().ok


def test_refund_errors_are_problem_json_and_change_nothing(shop, shop_api):
    funded_campaign(brand=shop, amount_minor=10_000, rules=[HELD_10PCT], mode="cashback")
    reward = purchase(shop, "D-1")
    unknown = refund(shop_api, "nope", "k1")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "order_not_found")
    no_key = shop_api.post("/api/v1/orders/D-1/refund/", {}, format="json")
    assert (no_key.status_code, no_key.json()["code"]) == (400, "idempotency_key_required")
    bad = refund(shop_api, "D-1", "k2", amount_minor=0)
    assert (bad.status_code, bad.json()["code"]) == (400, "validation_error")
    reward.refresh_from_db()
    assert (reward.status, reward.amount_minor) == ("held", 500)


def test_another_brands_order_is_not_found(shop, shop_api):
    other = BrandFactory(plan=package("cashback-api"))
    funded_campaign(brand=other, amount_minor=10_000, rules=[HELD_10PCT], mode="cashback")
    reward = purchase(other, "E-1")
    response = refund(shop_api, "E-1", "k")
    assert response.status_code == 404
    assert Reward.objects.get(pk=reward.pk).status == "held"


def test_refunds_with_different_keys_add_up_and_a_late_replay_adds_nothing(shop, shop_api):
    campaign = funded_campaign(brand=shop, amount_minor=10_000, rules=[HELD_10PCT], mode="cashback")
    reward = purchase(shop, "F-1")  # 500 on a 5,000 purchase
    assert refund(shop_api, "F-1", "a", amount_minor=1_000).json()["refunded_minor"] == 1_000
    assert refund(shop_api, "F-1", "b", amount_minor=1_000).json()["refunded_minor"] == 2_000
    # "a" again, after "b": the same refund, not a third one.
    assert refund(shop_api, "F-1", "a", amount_minor=1_000).json()["refunded_minor"] == 1_000
    reward.refresh_from_db()
    assert reward.amount_minor == 300  # 500 less 2,000/5,000 of it
    assert list(OrderRefund.objects.filter(order_id="F-1").order_by("id").values_list("key", "total_minor")) == [
        ("a", 1_000),
        ("b", 2_000),
    ]
    # More than what is left refunds the rest, once.
    assert refund(shop_api, "F-1", "c", amount_minor=9_000).json()["refunded_minor"] == 5_000
    assert refund(shop_api, "F-1", "d").json()["refunded_minor"] == 5_000
    assert OrderRefund.objects.get(key="d").amount_minor == 0
    reward.refresh_from_db()
    assert reward.status == "voided"
    assert available(campaign) == 10_000
    assert ledger_verify_report().ok


def test_partial_refunds_of_a_payable_reward_add_up_to_its_claw_back(shop, shop_api):
    campaign = funded_campaign(brand=shop, amount_minor=10_000, rules=[NOW_10PCT], mode="cashback")
    reward = purchase(shop, "G-1")
    rewards_mature()
    assert refund(shop_api, "G-1", "p1", amount_minor=3_000).json()["rewards"][0]["outcome"] == "payable_partial"
    second = refund(shop_api, "G-1", "p2", amount_minor=2_000).json()
    assert (second["refunded_minor"], second["rewards"][0]["outcome"]) == (5_000, "clawed_back")
    reward.refresh_from_db()
    assert reward.status == "clawed_back"
    assert available(campaign) == 10_000
    assert ledger_verify_report().ok


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_refunds_with_different_keys_all_count(shop):
    """Four partial refunds of one order at once, each with its own key: the order's total is
    their sum and the reward ends where that total puts it, whichever committed first."""
    funded_campaign(brand=shop, amount_minor=10_000, rules=[HELD_10PCT], mode="cashback")
    reward = purchase(shop, "H-1")  # 500 on 5,000

    def one(i):
        return order_refund(brand=shop, order_id="H-1", key=f"k{i}", amount_minor=500).refunded_minor

    totals = run_concurrently(one, n=4)
    assert sorted(totals) == [500, 1_000, 1_500, 2_000], totals
    reward.refresh_from_db()
    assert reward.amount_minor == 300  # 500 less 2,000/5,000 of it
    assert ledger_verify_report().ok


def test_a_claw_back_after_the_campaign_closed_goes_to_the_brands_funds(shop, shop_api):
    """A closed campaign's budget lets nothing out: what a claw-back returns goes on to the brand."""
    campaign = funded_campaign(brand=shop, amount_minor=10_000, rules=[NOW_10PCT], mode="cashback")
    reward = purchase(shop, "K-1")
    rewards_mature()
    reward.refresh_from_db()
    campaign_close(campaign=campaign)
    funds_before = brand_funds_account(brand=shop, currency="EUR").available_minor

    response = refund(shop_api, "K-1", "full")

    answer = response.json()["rewards"][0]
    assert answer["outcome"] == "clawed_back"
    assert answer["reward"]["status"] == "clawed_back"  # as the refund left it
    assert available(campaign) == 0
    after = brand_funds_account(brand=shop, currency="EUR").available_minor
    assert after - funds_before == reward.amount_minor + reward.fee_minor
    assert ledger_verify_report().ok
