"""The Cashback API page's quick-start, replayed as a developer would (issue 28): the curl and the
Python samples are read from the rendered page, sent with a test key of a shop on the Cashback
API plan in test mode, and the order they name is then refunded through the documented endpoint —
the books of the test tenant still verify."""

import ast
import html
import json
import re

import pytest

from campaigns.api_keys import api_key_create
from campaigns.models import Reward, RewardStatus
from campaigns.services import campaign_allocate, campaign_create, campaign_launch, rule_create
from campaigns.services.test_mode import trial_tenant_open
from reconciliation.selectors import ledger_verify_report
from tests.api.conftest import ALL_SCOPES, client_for
from tests.campaigns.factories import CAMPAIGN_START, BrandFactory, package

pytestmark = pytest.mark.django_db


def _samples(page: str) -> tuple[dict, dict]:
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    curl = json.loads(re.search(r"-d '(\{.*?\})'", text, re.S).group(1))
    python = ast.literal_eval(re.search(r"json=(\{.*?\}),\n", text, re.S).group(1))
    return curl, python


def test_the_quick_start_works_with_a_test_key_and_its_order_can_be_refunded(client):
    curl, python = _samples(client.get("/cashback-api/").content.decode())
    assert curl == python  # the two samples send the same event

    # given a shop on the Cashback API plan, in test mode, with the sample's campaign
    shop = BrandFactory(name="Sole Shop", slug="sole-shop", plan=package("cashback-api"))
    tenant = trial_tenant_open(brand=shop)
    campaign = campaign_create(
        brand=tenant, name="Summer", slug=curl["campaign"], mode="cashback", starts_at=CAMPAIGN_START
    )
    rule_create(campaign=campaign, trigger="purchase", amount_type="percent", percent_bps=1000, hold_days=14)
    campaign_allocate(campaign=campaign, amount_minor=10_000, idempotency_key="quick-start:alloc")
    campaign_launch(campaign=campaign)
    key = api_key_create(brand=tenant, name="quick start", scopes=ALL_SCOPES).token
    assert key.startswith("jbk_test_")
    api = client_for(key)

    # when the developer sends the sample (twice: external_id is the idempotency key)
    first = api.post("/api/v1/events/", curl, format="json")
    again = api.post("/api/v1/events/", python, format="json")

    # then one reward is held for the buyer, 10 % of the purchase
    assert first.status_code == 201, first.content
    assert again.status_code in (200, 201) and again.json()["event"]["id"] == first.json()["event"]["id"]
    (reward,) = Reward.objects.filter(campaign=campaign)
    assert (reward.status, reward.amount_minor) == (RewardStatus.HELD, 500)

    # and the documented refund by order id voids it, the books still balance
    refund = api.post(f"/api/v1/orders/{curl['order_id']}/refund/", {}, format="json", HTTP_IDEMPOTENCY_KEY="r-1")
    assert refund.status_code == 200, refund.content
    reward.refresh_from_db()
    assert reward.status == RewardStatus.VOIDED
    assert ledger_verify_report().ok
