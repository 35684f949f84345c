import importlib

import pytest

from campaigns.models import Plan


@pytest.fixture
def packages() -> list[Plan]:
    """The four packages as migration 0019 seeds them. Seeded rows do not survive a transactional
    test (its flush empties every table), so the site's tests put them back themselves."""
    seed = importlib.import_module("campaigns.migrations.0019_plans_seed")
    return [Plan.objects.update_or_create(slug=fields["slug"], defaults=fields)[0] for fields in seed.PLANS]


@pytest.fixture(autouse=True)
def _site_packages(packages):
    return packages
