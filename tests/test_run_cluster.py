"""`make run-cluster` (issue 30): ``deploy/cluster.py --check`` starts the production topology as
local processes — PgBouncer in transaction mode, two gunicorn web nodes, Redis, a qcluster per
class with money on two nodes — sends events over HTTP to both nodes, each twice, waits for the
payouts and checks nothing was doubled or lost; then stops everything. Here it runs on a database
of its own, named after the test database (so parallel runs never share one), dropped afterwards."""

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from bench.common import PGBOUNCER, admin_sql, database_url, free_port, with_database

ROOT = Path(__file__).resolve().parents[1]
EVENTS = 60
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/7"


def _redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=2).ping())
    except redis.RedisError:
        return False


def _two_free_ports() -> int:
    """A port free on 127.0.0.1 whose next one is free too (web node 1 and web node 2)."""
    while True:
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def _processes_with(marker: str) -> list[str]:
    """Processes whose environment holds ``marker`` (every process the cluster started has it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {command[:200]}")
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _summary(stdout: str) -> dict:
    return json.loads(stdout[stdout.index("\n{") : stdout.rindex("\n}") + 2])


def test_the_cluster_refuses_sqlite_before_starting_anything(tmp_path):
    run = subprocess.run(
        [sys.executable, "deploy/cluster.py", "--database-url", f"sqlite:///{tmp_path / 'db.sqlite3'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert "make run-cluster needs PostgreSQL" in run.stderr and "Stopped" not in run.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db
def test_events_and_payouts_through_the_cluster_are_neither_doubled_nor_lost():
    if PGBOUNCER is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
    if importlib.util.find_spec("gunicorn") is None:
        pytest.skip("gunicorn is not installed (make install)")
    if not _redis_answers(REDIS_URL):
        pytest.skip(f"Redis does not answer at {REDIS_URL} (apt-get install redis-server, or set REDIS_URL)")
    # given a database of this test's own, and the sandbox bank beside it
    name = f"{connection.settings_dict['NAME']}_cluster"[:63]
    url = with_database(database_url(connection.settings_dict), name)
    maintenance = with_database(url, "postgres")
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    store = ROOT / f"sandbox-bank-{name}.sqlite3"
    admin_sql(maintenance, drop)  # left by a run that was killed
    try:
        # when the check runs events and payouts through the whole topology
        run = subprocess.run(
            [sys.executable, "deploy/cluster.py", "--check", str(EVENTS), "--database-url", url]
            + ["--port", str(_two_free_ports()), "--redis-url", REDIS_URL],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        # then nothing it started is left running, nor connected to its database
        left = _processes_with(f"SANDBOX_STORE_PATH={store}")
        with psycopg.connect(maintenance, autocommit=True) as conn:  # a fresh view of pg_stat_activity
            connected = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [name]).fetchone()[0]
    finally:
        admin_sql(maintenance, drop)
        for path in ROOT.glob(f"{store.name}*"):
            path.unlink()
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    summary = _summary(run.stdout)
    # and every event came once, every person was paid once, and the books and queues are clean
    assert summary["ok"] and all(summary["checks"].values()), summary["checks"]
    assert summary["state"] == {
        "rewards": EVENTS,
        "rewards_paid": EVENTS,
        "payouts": EVENTS,
        "payouts_settled": EVENTS,
        "queued_tasks": 0,
    }
    partner = summary["partner"]
    assert partner["requests"] == 2 * (partner["single_events"] + partner["bulk_calls"]), partner
    assert summary["workers"] == ["joyback1", "joyback2", "ticks", "notices", "webhooks"]
    assert left == [] and connected == 0, (left, connected)
    assert "Stopped: web nodes, worker clusters, PgBouncer." in run.stdout
