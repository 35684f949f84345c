"""Personas for the partner API: two brands (Joy Shoes and Rival Shop), each with a funded
JoyBack campaign paying 5.00 per TikTok login, API keys with every scope, and an HTTP client
that sends a key."""

import itertools

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from campaigns.api_keys import api_key_create
from campaigns.services import EventInput, event_ingest
from tests.campaigns.factories import BrandFactory, funded_campaign
from tests.fakes.webhook_receiver import Receiver

LOGIN_500 = {"trigger": "tiktok_login", "fixed_minor": 500, "verification": "partner_attested"}
ALL_SCOPES = ["read", "write", "events"]
_n = itertools.count(1)


@pytest.fixture(autouse=True)
def fresh_rate_limits():
    """The rate limit counts in the cache; each test starts with none used."""
    cache.clear()


def client_for(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def brand(db):
    return BrandFactory(name="Joy Shoes", slug="joy-shoes")


@pytest.fixture
def rival(db):
    return BrandFactory(name="Rival Shop", slug="rival-shop")


@pytest.fixture
def campaign(brand):
    return funded_campaign(brand=brand, amount_minor=100_000, rules=[LOGIN_500])


@pytest.fixture
def rival_campaign(rival):
    return funded_campaign(brand=rival, amount_minor=100_000, rules=[LOGIN_500])


@pytest.fixture
def token(brand):
    return api_key_create(brand=brand, name="shop backend", scopes=ALL_SCOPES).token


@pytest.fixture
def api(token):
    return client_for(token)


@pytest.fixture
def rival_api(rival):
    return client_for(api_key_create(brand=rival, name="rival backend", scopes=ALL_SCOPES).token)


def login_event(campaign, **fields) -> EventInput:
    n = next(_n)
    fields.setdefault("external_id", f"api-evt-{n}")
    fields.setdefault("email", f"fan{n}@example.com")
    return EventInput(campaign=campaign.slug, type="tiktok_login", source="api", **fields)


def ingest(campaign, **fields):
    return event_ingest(brand=campaign.brand, payload=login_event(campaign, **fields))


def assert_problem(response, status: int, code: str):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == code and body["status"] == status and body["type"] == f"urn:joyback:problem:{code}"
    return body


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOW_HTTP = True
    r = Receiver()
    yield r
    r.server.shutdown()
