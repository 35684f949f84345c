"""A campaign of an API-only plan (the Cashback API alone) has no public claim page and sends no
claim links, unless the brand turns on claim links for buyers without a bank account."""

import pytest
from django.test import Client

from campaigns.models import Campaign
from campaigns.services import event_ingest
from campaigns.services.claim_links import claim_links_send_due
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign, package

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(db):
    brand = BrandFactory(name="Sole Shop", slug="sole", plan=package("cashback-api"))
    funded_campaign(
        brand=brand,
        amount_minor=10_000,
        slug="shop",
        mode="cashback",
        rules=[{"trigger": "purchase", "fixed_minor": 500}],
    )
    return brand


def buy(brand, n: int):
    return event_ingest(
        brand=brand,
        payload=event(
            campaign="shop", type="purchase", source="api", email=f"buyer{n}@example.com", purchase_amount_minor=5000
        ),
    )


def test_no_public_page_and_no_claim_link_without_the_campaigns_consent(shop):
    assert Client().get("/c/sole/shop/").status_code == 404
    assert buy(shop, 1).outcome == "rewarded"
    assert claim_links_send_due() == 0


def test_claim_links_for_buyers_turn_both_on(shop):
    Campaign.objects.filter(brand=shop, slug="shop").update(buyer_claim_links=True)
    assert Client().get("/c/sole/shop/").status_code == 200
    buy(shop, 2)
    assert claim_links_send_due() == 1
