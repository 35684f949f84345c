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
