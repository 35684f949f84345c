import pytest
from django.conf import settings

from tests.campaigns.factories import package


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


_DB_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "live_server"}


@pytest.fixture(autouse=True)
def packages_seeded(request):
    """The four packages migration 0019 seeds, made again when a transactional test before this
    one flushed them: a brand is created on the default one (``brand_create``)."""
    marker = request.node.get_closest_marker("django_db")
    wanted = _DB_FIXTURES & set(request.fixturenames)
    if marker is None and not wanted:
        return
    if marker is None:
        request.getfixturevalue(sorted(wanted)[0])
    for slug in ("all-in-one", "tiktok-only", "whatsapp-with-reward", "cashback-api"):
        package(slug)
