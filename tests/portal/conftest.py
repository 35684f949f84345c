"""Personas for the portal: two brands with an owner each (verified email), a funded, launched
campaign per brand with a reward and a settled payout, and an analyst in brand A."""

import itertools
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model

from campaigns.models import BrandRole
from campaigns.platforms.tiktok_fake import wsgi_app
from campaigns.services import brand_membership_set
from tests.campaigns.factories import BrandFactory, funded_campaign

_n = itertools.count(1)


def make_user(email: str):
    user = get_user_model().objects.create_user(username=email, email=email, password="pw-Secret-123")
    EmailAddress.objects.create(user=user, email=email, verified=True, primary=True)
    return user


def member(brand, role=BrandRole.OWNER, email: str | None = None):
    user = make_user(email or f"user{next(_n)}@example.com")
    brand_membership_set(brand=brand, user=user, role=role)
    return user


@pytest.fixture
def brand_a(db):
    return BrandFactory(name="Alpha Shoes", slug="alpha")


@pytest.fixture
def brand_b(db):
    return BrandFactory(name="Beta Drinks", slug="beta")


@pytest.fixture
def owner_a(brand_a):
    return member(brand_a, BrandRole.OWNER, "owner@alpha.example")


@pytest.fixture
def owner_b(brand_b):
    return member(brand_b, BrandRole.OWNER, "owner@beta.example")


@pytest.fixture
def analyst_a(brand_a):
    return member(brand_a, BrandRole.ANALYST, "analyst@alpha.example")


@pytest.fixture
def campaign_a(brand_a):
    return funded_campaign(brand=brand_a, amount_minor=100_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}])


@pytest.fixture
def campaign_b(brand_b):
    return funded_campaign(brand=brand_b, amount_minor=100_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 700}])


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def fake_tiktok(settings):
    """The TikTok fake on a real socket on 127.0.0.1, with allauth and the Display API client
    pointed at it."""
    server = make_server("127.0.0.1", 0, wsgi_app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    settings.TIKTOK_AUTH_BASE_URL = base
    settings.TIKTOK_API_BASE_URL = base
    yield base
    server.shutdown()
    server.server_close()
