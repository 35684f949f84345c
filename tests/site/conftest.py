import pytest

from campaigns.models import Plan
from campaigns.selectors import plans_for_sale


@pytest.fixture
def packages() -> list[Plan]:
    """The packages on sale, as migration 0019 seeds them (tests/conftest.py puts them back after
    a transactional test's flush)."""
    return list(plans_for_sale())


@pytest.fixture(autouse=True)
def _site_packages(packages):
    return packages
