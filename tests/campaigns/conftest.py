import itertools

import pytest

from campaigns.services import EventInput
from tests.campaigns.factories import BrandFactory
from tests.portal.conftest import brand_a, brand_b, fake_tiktok  # noqa: F401 - fixtures

_ids = itertools.count(1)


@pytest.fixture
def brand(db):
    """Brand 'Joy Shoes' with a 10 cent + 2 % fee per reward."""
    return BrandFactory(name="Joy Shoes", slug="joy-shoes", fee_fixed_minor=10, fee_bps=200)


@pytest.fixture
def free_brand(db):
    """A brand without fees, for exact budget arithmetic."""
    return BrandFactory(name="Free Brand", slug="free-brand")


def event(**fields) -> EventInput:
    """An EventInput with a fresh external id, a person identified by email, type tiktok_login
    from the TikTok adapter (first-party) unless told otherwise."""
    n = next(_ids)
    fields.setdefault("external_id", f"evt-{n}")
    fields.setdefault("campaign", "summer")
    fields.setdefault("type", "tiktok_login")
    fields.setdefault("source", "tiktok")
    if not any(fields.get(k) for k in ("email", "whatsapp", "iban", "social_uid")):
        fields["email"] = f"person{n}@example.com"
    return EventInput(**fields)
