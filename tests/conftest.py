from importlib import import_module

import pytest
from django.conf import settings


def _on_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


def pytest_report_header(config):
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    note = "" if _on_postgres() else " (tests marked 'postgres' will be skipped: set DATABASE_URL=postgres://...)"
    return f"database: {engine}{note}"


def pytest_collection_modifyitems(config, items):
    if _on_postgres():
        return
    skip = pytest.mark.skip(
        reason="needs PostgreSQL (triggers, row locks, real concurrency); set DATABASE_URL=postgres://..."
    )
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _packages_seeded(request):
    """The packages on sale are migration data (campaigns 0019), which a transactional test's
    flush deletes: put them back for the next test that uses the database, as a fresh install has
    them (a brand cannot be created without its default plan)."""
    if request.node.get_closest_marker("django_db") is None and not {"db", "transactional_db"} & set(
        request.fixturenames
    ):
        return
    request.getfixturevalue("_django_db_helper")
    from campaigns.models import Plan

    if not Plan.objects.exists():
        Plan.objects.bulk_create(
            Plan(**fields) for fields in import_module("campaigns.migrations.0019_plans_seed").PLANS
        )
