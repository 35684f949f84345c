"""Test mode in the portal (issue 28): the newcomer's journey "sign up → test key → first test event
→ paid on the sandbox → go-live checklist", the TEST MODE banner and the Live/Test switch on every
page, the simulated transfer, the reset with its confirmation, and who may see a test tenant."""

import re

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from campaigns.models import Brand, BrandInvitation, BrandRole, BrandStatus, Campaign
from campaigns.services import brand_topup_record, rewards_mature
from campaigns.services.test_mode import TRIAL_BALANCE_MINOR, trial_tenant_open
from core.exceptions import NotFound
from payouts.models import Payout, PayoutStatus
from payouts.services import payout_execute, payouts_create_for_payable
from reconciliation.selectors import account_balance_by_code
from tests.campaigns.test_test_mode import trial_campaign
from tests.payouts import payout_fixtures
from tests.payouts.payout_fixtures import iban
from tests.portal.conftest import make_user, member

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

sandbox = payout_fixtures.sandbox
debtor = payout_fixtures.debtor

TENANT_PAGES = ["", "campaigns/", "rewards/", "payouts/", "api-keys/", "webhooks/", "test-mode/"]


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def owner(owner_a):
    return signed_in(owner_a)


def test_newcomer_signs_up_tries_for_free_and_goes_live(sandbox, debtor):
    # --- signs up: a brand of their own, live but not yet allowed to launch live campaigns ------
    client = signed_in(make_user("founder@newshop.example"))
    assert client.post("/portal/", {"name": "New Shop", "default_currency": "EUR"})["Location"] == "/portal/new-shop/"
    brand = Brand.objects.get(slug="new-shop")
    assert brand.livemode and brand.live_since is None
    dashboard = client.get("/portal/new-shop/").content.decode()
    assert 'data-testid="mode-switch"' in dashboard and 'data-testid="go-live-link"' in dashboard
    assert "TEST MODE" not in dashboard
    # --- switches to test mode: the test tenant opens with €1,000 of test money -------------------
    opened = client.post("/portal/new-shop/test-mode/")
    assert opened["Location"] == "/portal/new-shop-test/test-mode/"
    page = client.get("/portal/new-shop-test/test-mode/").content.decode()
    assert "TEST MODE" in page and 'data-testid="trial-limits"' in page and "€1,000.00" in page
    # --- creates a test key ------------------------------------------------------------------------
    created = client.post("/portal/new-shop-test/api-keys/", {"name": "trial", "scopes": ["read", "write", "events"]})
    token = created.context["created"].token
    assert token.startswith("jbk_test_")
    # --- a test campaign, made and funded in the portal with the test money -----------------------
    client.post(
        "/portal/new-shop-test/campaigns/new/",
        {"name": "Try", "mode": "joyback", "currency": "EUR", "starts_at": "2026-01-01T00:00",
         "timezone": "Europe/Rome", "payout_mode": "instant", "aggregate_minutes": "0"},
    )  # fmt: skip
    campaign = Campaign.objects.get(brand__slug="new-shop-test", slug="try")
    client.post(
        f"/portal/new-shop-test/campaigns/{campaign.pk}/rules/new/",
        {"trigger": "tiktok_login", "amount_type": "fixed", "amount": "5.00", "hold_days": "0",
         "approval_policy": "auto", "verification": "partner_attested", "save": "1"},
    )  # fmt: skip
    client.post(
        f"/portal/new-shop-test/campaigns/{campaign.pk}/allocate/", {"amount": "100.00", "idempotency_key": "k1"}
    )
    client.post(f"/portal/new-shop-test/campaigns/{campaign.pk}/launch/")
    campaign.refresh_from_db()
    assert campaign.status == "active"  # test mode needs no checklist
    # --- the first test event, through the API with the test key -----------------------------------
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    sent = api.post(
        "/api/v1/events/",
        {"external_id": "first", "campaign": "try", "type": "tiktok_login", "email": "tester@newshop.example",
         "name": "Tess Tester", "iban": iban()},
        format="json",
    )  # fmt: skip
    assert sent.status_code == 201, sent.content
    # --- paid on the sandbox -----------------------------------------------------------------------
    rewards_mature()
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    assert payout.status == PayoutStatus.SETTLED and payout.rail == "sandbox"
    assert "settled" in client.get("/portal/new-shop-test/payouts/").content.decode().lower()
    # --- the go-live checklist: launching a live campaign names what is missing --------------------
    client.post(
        "/portal/new-shop/campaigns/new/",
        {"name": "Real", "mode": "joyback", "currency": "EUR", "starts_at": "2026-01-01T00:00",
         "timezone": "Europe/Rome", "payout_mode": "instant", "aggregate_minutes": "0"},
    )  # fmt: skip
    live_campaign = Campaign.objects.get(brand=brand, slug="real")
    client.post(
        f"/portal/new-shop/campaigns/{live_campaign.pk}/rules/new/",
        {"trigger": "tiktok_login", "amount_type": "fixed", "amount": "5.00", "hold_days": "0",
         "approval_policy": "auto", "verification": "partner_attested", "save": "1"},
    )  # fmt: skip
    refused = client.post(f"/portal/new-shop/campaigns/{live_campaign.pk}/launch/", follow=True).content.decode()
    assert "Complete going live" in refused and "company details, terms accepted, first top-up" in refused
    checklist = client.get("/portal/new-shop/go-live/").content.decode()
    assert re.findall(r'data-step="(\w+)" data-done="(\w+)"', checklist) == [
        ("company", "no"), ("terms", "no"), ("topup", "no"),
    ]  # fmt: skip
    client.post(
        "/portal/new-shop/go-live/",
        {"step": "company", "legal_name": "New Shop S.r.l.", "address": "Via Roma 1, 20100 Milano"},
    )
    client.post("/portal/new-shop/go-live/", {"step": "terms", "accept": "on"})
    brand_topup_record(
        brand=brand,
        amount_minor=10_000,
        currency="EUR",
        bank_account_code=payout_fixtures.DEBTOR_IBAN,
        idempotency_key="first-real-topup",
        reference=brand.funding_reference,
    )
    checklist = client.get("/portal/new-shop/go-live/").content.decode()
    assert re.findall(r'data-done="(\w+)"', checklist) == ["yes", "yes", "yes"]
    client.post(
        f"/portal/new-shop/campaigns/{live_campaign.pk}/allocate/", {"amount": "100.00", "idempotency_key": "k2"}
    )
    client.post(f"/portal/new-shop/campaigns/{live_campaign.pk}/launch/")
    live_campaign.refresh_from_db()
    brand.refresh_from_db()
    assert live_campaign.status == "active" and brand.live_since is not None


def test_every_test_mode_page_shows_the_banner_and_the_way_back(owner, brand_a):
    tenant = trial_tenant_open(brand=brand_a)
    for page in TENANT_PAGES:
        body = owner.get(f"/portal/{tenant.slug}/{page}").content.decode()
        assert 'data-testid="test-mode-banner"' in body, page
        assert 'href="/portal/alpha/" data-testid="switch-to-live"' in body, page
    for page in ["", "campaigns/", "payouts/", "api-keys/"]:
        body = owner.get(f"/portal/alpha/{page}").content.decode()
        assert 'data-testid="test-mode-banner"' not in body and 'data-testid="switch-to-test"' in body, page


def test_a_test_tenant_funds_itself_by_a_simulated_transfer_only(owner, brand_a):
    tenant = trial_tenant_open(brand=brand_a)
    # its funding page (a real transfer to its reference would never be booked) leads to the simulation
    assert owner.get(f"/portal/{tenant.slug}/funding/")["Location"] == f"/portal/{tenant.slug}/test-mode/"
    for _ in range(2):  # a double submit of one form adds once
        owner.post(f"/portal/{tenant.slug}/test-mode/transfer/", {"amount": "250.00", "key": "form-1"})
    funds = account_balance_by_code(code=f"brand:{tenant.pk}:funds:EUR").posted_minor
    assert funds == TRIAL_BALANCE_MINOR + 25_000
    # and the live brand has no such button
    assert owner.post("/portal/alpha/test-mode/transfer/", {"amount": "250.00", "key": "form-2"}).status_code == 302
    assert not Brand.objects.get(pk=brand_a.pk).test_tenants.exclude(pk=tenant.pk).exists()
    with pytest.raises(NotFound):  # the live brand has no funds account at all
        account_balance_by_code(code=f"brand:{brand_a.pk}:funds:EUR")


def test_reset_asks_for_the_word_then_starts_afresh(owner, brand_a):
    tenant = trial_tenant_open(brand=brand_a)
    owner.post(f"/portal/{tenant.slug}/test-mode/reset/", {"confirm": "yes"})
    assert Brand.objects.get(pk=tenant.pk).status == BrandStatus.ACTIVE
    done = owner.post(f"/portal/{tenant.slug}/test-mode/reset/", {"confirm": "RESET"})
    fresh = Brand.objects.get(test_of=brand_a, status=BrandStatus.ACTIVE)
    assert fresh.pk != tenant.pk and done["Location"] == f"/portal/{fresh.slug}/test-mode/"
    # the retired tenant's pages are gone
    assert owner.get(f"/portal/{tenant.slug}/").status_code == 404


def test_another_brand_never_reaches_a_test_tenant(owner_b, brand_a, owner_a):
    tenant = trial_tenant_open(brand=brand_a)
    rival = signed_in(owner_b)
    for page in TENANT_PAGES:
        assert rival.get(f"/portal/{tenant.slug}/{page}").status_code == 404, page
    assert rival.post(f"/portal/{tenant.slug}/test-mode/transfer/", {"amount": "1.00", "key": "x"}).status_code == 404
    assert rival.post(f"/portal/{tenant.slug}/test-mode/reset/", {"confirm": "RESET"}).status_code == 404
    assert Brand.objects.get(pk=tenant.pk).status == BrandStatus.ACTIVE
    assert account_balance_by_code(code=f"brand:{tenant.pk}:funds:EUR").posted_minor == TRIAL_BALANCE_MINOR


def test_an_analyst_sees_test_mode_but_cannot_open_or_reset_it(brand_a):
    analyst = signed_in(member(brand_a, BrandRole.ANALYST))
    analyst.post("/portal/alpha/test-mode/")
    assert not Brand.objects.filter(test_of=brand_a).exists()
    tenant = trial_tenant_open(brand=brand_a)
    assert analyst.get(f"/portal/{tenant.slug}/").status_code == 200
    assert analyst.post(f"/portal/{tenant.slug}/test-mode/reset/", {"confirm": "RESET"}).status_code == 404
    assert Brand.objects.get(pk=tenant.pk).status == BrandStatus.ACTIVE


def test_the_demo_has_a_trial_brand_in_test_mode(settings):
    settings.DEBUG = True
    call_command("seed_demo")
    call_command("seed_demo")  # idempotent
    trial = Brand.objects.get(slug="bici-trial")
    tenant = Brand.objects.get(test_of=trial, status=BrandStatus.ACTIVE)
    assert trial.live_since is None and Brand.objects.filter(test_of=trial).count() == 1
    assert Campaign.objects.get(brand=tenant, slug="try-joy").status == "active"
    assert account_balance_by_code(code=f"brand:{tenant.pk}:funds:EUR").posted_minor == TRIAL_BALANCE_MINOR - 20_000
    client = Client()
    assert client.login(username="trial@demo.joyback.example", password="trial-demo-password")
    assert 'data-testid="test-mode-banner"' in client.get(f"/portal/{tenant.slug}/").content.decode()
    # and the demo's live brand may open test mode and fund itself there too
    owner = Client()
    assert owner.login(username="brand@demo.joyback.example", password="brand-demo-password")
    opened = owner.post("/portal/sole-shoes/test-mode/")
    assert opened["Location"] == "/portal/sole-shoes-test/test-mode/"
    owner.post("/portal/sole-shoes-test/test-mode/transfer/", {"amount": "500.00", "key": "demo"})
    sole_test = Brand.objects.get(slug="sole-shoes-test")
    assert account_balance_by_code(code=f"brand:{sole_test.pk}:funds:EUR").posted_minor == TRIAL_BALANCE_MINOR + 50_000


def test_test_mode_has_no_team_of_its_own(owner, brand_a):
    tenant = trial_tenant_open(brand=brand_a)
    refused = owner.post(f"/portal/{tenant.slug}/team/invite/", {"email": "x@example.com", "role": "analyst"})
    assert refused.status_code in (200, 302)
    assert not BrandInvitation.objects.exists()


def test_a_test_campaigns_claim_page_says_it_is_a_test(client, brand_a, campaign_a):
    tenant = trial_tenant_open(brand=brand_a)
    campaign = trial_campaign(tenant)
    page = client.get(f"/c/{tenant.slug}/{campaign.slug}/").content.decode()
    assert 'data-testid="claim-test-mode"' in page
    live_page = client.get(f"/c/alpha/{campaign_a.slug}/").content.decode()
    assert 'data-testid="claim-test-mode"' not in live_page
