"""Test mode through the partner API (issue 28): a ``jbk_test_`` key works on the brand's test
tenant — events, rewards, payouts on the sandbox, webhooks marked ``livemode: false`` — and test and
live objects never mix: every id route answers 404 across modes, both ways, as an attacker would try."""

import json

import pytest

from campaigns.api_keys import api_key_create
from campaigns.models import Brand, DeliveryStatus, Reward, WebhookDelivery
from campaigns.services import campaign_allocate, campaign_create, campaign_launch, rewards_mature, rule_create
from campaigns.services.test_mode import trial_tenant_open, trial_tenant_reset
from campaigns.webhooks import webhook_delivery_attempt, webhook_endpoint_create, webhook_events_collect
from payouts.models import Payout, PayoutStatus
from payouts.services import payout_execute, payouts_create_for_payable
from reconciliation.selectors import account_balance_by_code
from tests.api.conftest import ALL_SCOPES, LOGIN_500, assert_problem, client_for, ingest
from tests.api.test_isolation import BODIES, ID_ROUTES, _snapshot, make_payout
from tests.campaigns.factories import CAMPAIGN_START
from tests.payouts import payout_fixtures
from tests.payouts.payout_fixtures import iban

pytestmark = pytest.mark.postgres

# The payout tests' sandbox bank and operating account (their brand and campaign are the API's here).
sandbox = payout_fixtures.sandbox
debtor = payout_fixtures.debtor


@pytest.fixture
def tenant(brand):
    return trial_tenant_open(brand=brand)


@pytest.fixture
def trial(tenant):
    """A launched test campaign, funded from the free test money."""
    campaign = campaign_create(brand=tenant, name="Summer", slug="summer", mode="joyback", starts_at=CAMPAIGN_START)
    rule_create(campaign=campaign, **LOGIN_500)
    campaign_allocate(campaign=campaign, amount_minor=50_000, idempotency_key=f"alloc:{campaign.pk}")
    return campaign_launch(campaign=campaign)


@pytest.fixture
def test_token(tenant):
    return api_key_create(brand=tenant, name="trial backend", scopes=ALL_SCOPES).token


@pytest.fixture
def test_api(test_token):
    return client_for(test_token)


def objects_of(brand, campaign, tag: str) -> dict:
    result = ingest(campaign, email=f"{tag}@example.com")
    endpoint = webhook_endpoint_create(brand=brand, url=f"https://{tag}.example/h", event_types=[]).endpoint
    webhook_events_collect()
    return {
        "campaign": campaign.pk,
        "rule": campaign.rules.get().pk,
        "event": result.event.pk,
        "person": result.event.person_id,
        "reward": result.reward.pk,
        "payout": make_payout([result.reward]).pk,
        "endpoint": endpoint.pk,
        "delivery": endpoint.deliveries.first().pk,
    }


def test_a_test_key_shows_its_mode_and_works_on_the_test_tenant(test_token, test_api, tenant, trial):
    assert test_token.startswith("jbk_test_")
    campaigns = test_api.get("/api/v1/campaigns/").json()["results"]
    assert [c["id"] for c in campaigns] == [trial.pk]


def test_a_key_sent_in_the_other_modes_form_names_no_key(brand, tenant, test_token):
    live_token = api_key_create(brand=brand, name="live", scopes=ALL_SCOPES).token
    assert live_token.startswith("jbk_") and not live_token.startswith("jbk_test_")
    as_test = live_token.replace("jbk_", "jbk_test_", 1)
    as_live = test_token.replace("jbk_test_", "jbk_", 1)
    for token in (as_test, as_live):
        assert client_for(token).get("/api/v1/campaigns/").status_code == 401


@pytest.mark.parametrize(
    ("route", "method"), [(route, method) for route, (methods, _) in ID_ROUTES.items() for method in methods]
)
def test_a_test_key_gets_404_for_live_ids(test_api, trial, brand, campaign, route, method):
    live = objects_of(brand, campaign, "live-fan")
    url = "/api/v1/" + route.replace("<int:pk>", str(live[ID_ROUTES[route][1]]))
    before = _snapshot()
    response = getattr(test_api, method)(url, BODIES.get(method, {}), format="json")
    assert response.status_code == 404, response.content
    assert _snapshot() == before


@pytest.mark.parametrize(
    ("route", "method"), [(route, method) for route, (methods, _) in ID_ROUTES.items() for method in methods]
)
def test_a_live_key_gets_404_for_test_ids(api, campaign, tenant, trial, route, method):
    test_objects = objects_of(tenant, trial, "test-fan")
    url = "/api/v1/" + route.replace("<int:pk>", str(test_objects[ID_ROUTES[route][1]]))
    before = _snapshot()
    response = getattr(api, method)(url, BODIES.get(method, {}), format="json")
    assert response.status_code == 404, response.content
    assert _snapshot() == before


def test_lists_and_slugs_never_cross_modes(api, test_api, campaign, trial):
    # the two campaigns share the slug "summer": each key reaches its own mode's only
    assert [c["id"] for c in api.get("/api/v1/campaigns/").json()["results"]] == [campaign.pk]
    assert [c["id"] for c in test_api.get("/api/v1/campaigns/").json()["results"]] == [trial.pk]
    response = test_api.post(
        "/api/v1/events/",
        {"external_id": "x1", "campaign": "summer", "type": "tiktok_login", "email": "a@example.com"},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert list(Reward.objects.values_list("campaign_id", flat=True)) == [trial.pk]
    assert api.get("/api/v1/rewards/").json()["results"] == []


def test_test_event_to_sandbox_payout_to_livemode_false_webhook(
    test_api, tenant, trial, brand, campaign, sandbox, debtor, receiver
):
    # given webhooks of both modes
    webhook_endpoint_create(brand=tenant, url=receiver.url, event_types=["reward.held"])
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    # when the test key sends an event with the person's bank account
    response = test_api.post(
        "/api/v1/events/",
        {
            "external_id": "trial-1",
            "campaign": "summer",
            "type": "tiktok_login",
            "email": "tester@example.com",
            "name": "Test Person",
            "iban": iban(),
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    ingest(campaign, email="live-fan@example.com")
    rewards_mature()
    (payout_id,) = [
        p for p in payouts_create_for_payable().created if Payout.objects.get(pk=p).person.brand_id == tenant.pk
    ]
    payout_execute(payout_id=payout_id)
    # then the test payout settled on the sandbox, and the API shows it to the test key only
    payout = Payout.objects.get(pk=payout_id)
    assert payout.status == PayoutStatus.SETTLED and payout.rail == "sandbox"
    assert test_api.get(f"/api/v1/payouts/{payout_id}/").json()["status"] == "settled"
    assert account_balance_by_code(code="testmode:platform:bank:sandbox:EUR").posted_minor == 100_000 - 500
    # and the webhooks say which mode they come from
    webhook_events_collect()
    for delivery in WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING):
        webhook_delivery_attempt(delivery_id=delivery.pk)
    modes = {}
    for headers, body in receiver.requests:
        payload = json.loads(body)
        assert headers["JoyBack-Livemode"] == json.dumps(payload["livemode"])
        modes[payload["data"]["reward"]["event_external_id"]] = payload["livemode"]
    assert modes == {"trial-1": False, Reward.objects.get(campaign=campaign).event.external_id: True}


def test_a_reset_tenants_key_stops(test_api, brand, tenant):
    trial_tenant_reset(brand=brand)
    assert test_api.get("/api/v1/campaigns/").status_code == 401
    assert Brand.objects.get(pk=tenant.pk).status == "suspended"


def test_a_live_key_cannot_be_made_to_reach_test_data_by_header_tricks(api, trial):
    response = api.get("/api/v1/campaigns/", HTTP_JOYBACK_LIVEMODE="false")
    assert [c["id"] for c in response.json()["results"]] != [trial.pk]
    assert_problem(api.get(f"/api/v1/campaigns/{trial.pk}/"), 404, "not_found")
