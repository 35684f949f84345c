"""PgBouncer in transaction mode (issue 30): the settings a pooler needs, the check that refuses the
unsafe combination, ``.iterator()`` reading with client-side cursors, and a smoke run of the API,
inline tasks and a CSV export through a real PgBouncer (Debian's package, installed by .ci/run)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings

from bench.common import PGBOUNCER, start_pgbouncer, stop_group
from config.settings.base import database_from_url, url_pooler
from core.checks_production import pooler_safety
from tests.core.test_audit_admin import admin_client, voided  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]


def test_the_pooler_turns_off_server_side_cursors_and_prepared_statements(monkeypatch):
    monkeypatch.delenv("DB_PREPARED_STATEMENTS", raising=False)
    direct = database_from_url("postgres://app@db:5432/joyback")
    assert direct["DISABLE_SERVER_SIDE_CURSORS"] is False and direct["OPTIONS"]["prepare_threshold"]
    for pooled in (
        database_from_url("postgres://app@pgbouncer:6432/joyback", pooler="pgbouncer"),
        database_from_url("postgres://app@pgbouncer:6432/joyback?pgbouncer=1&sslmode=require"),
    ):
        assert pooled["DISABLE_SERVER_SIDE_CURSORS"] is True
        assert pooled["OPTIONS"]["prepare_threshold"] is None
        assert "pgbouncer" not in pooled["OPTIONS"]  # not a libpq option
    assert pooled["OPTIONS"]["sslmode"] == "require"
    assert url_pooler("postgres://a@b/c?pgbouncer=1") == ("postgres://a@b/c", "pgbouncer")
    assert url_pooler("postgres://a@b/c") == ("postgres://a@b/c", "")


@pytest.mark.parametrize(
    ("database", "problems"),
    [
        ({"DISABLE_SERVER_SIDE_CURSORS": True, "OPTIONS": {"prepare_threshold": None}}, 0),
        ({"DISABLE_SERVER_SIDE_CURSORS": False, "OPTIONS": {"prepare_threshold": None}}, 1),
        ({"DISABLE_SERVER_SIDE_CURSORS": True, "OPTIONS": {"prepare_threshold": 2**31 - 1}}, 1),
        ({"DISABLE_SERVER_SIDE_CURSORS": False, "OPTIONS": {"prepare_threshold": 5}}, 2),
    ],
)
def test_the_check_refuses_a_pooler_with_cursors_or_prepared_statements_left_on(database, problems):
    databases = {"default": {"ENGINE": "django.db.backends.postgresql", **database}}
    with override_settings(DATABASE_POOLER="pgbouncer"), _databases(databases):
        found = pooler_safety()
    assert len(found) == problems
    assert all(m.id == "core.E140" and m.is_serious() and m.hint.startswith("Set") for m in found)
    with override_settings(DATABASE_POOLER=""), _databases(databases):
        assert pooler_safety() == []


class _databases:
    """``settings.DATABASES`` seen by the check only (override_settings would reconnect)."""

    def __init__(self, value):
        self.value = value

    def __enter__(self):
        from django.conf import settings

        self.saved, settings.DATABASES = settings.DATABASES, self.value

    def __exit__(self, *exc):
        from django.conf import settings

        settings.DATABASES = self.saved


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("disabled", [True, False])
def test_the_csv_export_reads_without_a_named_cursor_when_the_pooler_is_on(admin_client, voided, monkeypatch, disabled):  # noqa: F811
    # given the audit trail export, which reads with .iterator()
    client, _ = admin_client
    named = []
    create_cursor = connection.create_cursor
    monkeypatch.setattr(connection, "create_cursor", lambda name=None: named.append(name) or create_cursor(name))
    monkeypatch.setitem(connection.settings_dict, "DISABLE_SERVER_SIDE_CURSORS", disabled)
    # when it runs
    export = client.get("/admin/core/audittrail/export/")
    rows = b"".join(export.streaming_content).decode().strip().splitlines()
    # then every row is there, and only without the setting does Django declare a server-side cursor
    assert export.status_code == 200 and len(rows) > 3
    assert any(named) is not disabled


@pytest.fixture
def pgbouncer():
    """A PgBouncer in transaction mode on a free port in front of the test database's server, with
    fewer server connections than the smoke run has clients, so they share them."""
    if PGBOUNCER is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
    folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    try:
        try:
            process, port = start_pgbouncer(
                server=connection.settings_dict,
                folder=folder,
                log=folder / "pgbouncer.log",
                pool_size=2,
                max_clients=50,
            )
        except RuntimeError as exc:
            pytest.fail(str(exc))
        try:
            yield port
        finally:
            stop_group(process, limit_s=10)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_api_tasks_and_an_export_work_through_pgbouncer_in_transaction_mode(pgbouncer):
    db = connection.settings_dict
    url = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@127.0.0.1:{pgbouncer}/{db['NAME']}?pgbouncer=1"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "ALLOWED_HOSTS": "testserver",
    }
    env.pop("DATABASE_POOLER", None)
    run = subprocess.run(
        [sys.executable, "-m", "tests.core.pgbouncer_smoke"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["event_statuses"] == [201] * 32, result
    assert result["bulk_status"] == 200 and result["bulk_outcomes"] == ["rewarded"] * 20, result
    # the export read every audit row with .iterator() through the pooler
    assert result["export_status"] == 200 and result["export_rows"] >= 52, result
    assert get_user_model().objects.filter(username="pooled-auditor").exists()
