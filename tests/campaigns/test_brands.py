"""brand_create: which unique column refused a new brand decides the answer."""

import pytest

from campaigns.funding_reference import funding_reference_generate
from campaigns.models import Brand
from campaigns.services import brands
from campaigns.services.brands import brand_create
from core.exceptions import InvalidInput

pytestmark = pytest.mark.django_db


def test_a_taken_slug_is_refused_and_nothing_is_created():
    brand_create(name="Gelato Bros")

    with pytest.raises(InvalidInput) as exc:
        brand_create(name="Gelato Bros")

    assert exc.value.code == "duplicate_slug"
    assert Brand.objects.count() == 1


def test_a_funding_reference_that_collides_is_drawn_again(monkeypatch):
    first = brand_create(name="Gelato Bros")
    fresh = funding_reference_generate()
    draws = iter([first.funding_reference, fresh])
    monkeypatch.setattr(brands, "funding_reference_generate", lambda: next(draws))

    second = brand_create(name="Pizza Bros")

    assert second.funding_reference == fresh
    assert Brand.objects.count() == 2
