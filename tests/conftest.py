import importlib

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
def packages_on_sale(request):
    """The four packages the plans migration seeds, back after a transactional test's flush
    emptied the table (a brand is created on the default one): every test that uses the
    database finds them, whatever ran before it on its worker."""
    marker = request.node.get_closest_marker("django_db")
    if marker is None and not {"db", "transactional_db", "live_server"} & set(request.fixturenames):
        return
    request.getfixturevalue("transactional_db" if marker and marker.kwargs.get("transaction") else "db")
    from campaigns.models import Plan

    if not Plan.objects.exists():
        for fields in importlib.import_module("campaigns.migrations.0019_plans_seed").PLANS:
            Plan.objects.update_or_create(slug=fields["slug"], defaults=fields)
