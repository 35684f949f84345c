"""The opt-in read replica (issue 30): which reads may go to it (``core.replica.lag_tolerant``),
the read-after-write pin, the admin change lists, the settings, the checks and the lag gauge; and
a run against a real streaming standby started by the test (initdb, pg_basebackup -R) whose replay
is paused, so each read's result says where it read."""

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db import connections
from django.http import HttpResponse
from django.test import RequestFactory

from campaigns.models import Reward, RewardInReview
from core.checks_production import replica_safety
from core.metrics import replica_metrics
from core.replica import PIN_COOKIE, REPLICA, LagTolerantChangelist, ReadAfterWriteMiddleware, lag_tolerant
from tests.run import _as_postgres, _binary, _free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def replica(monkeypatch):
    """A ``replica`` alias that is a second connection to the test database (a primary)."""
    monkeypatch.setitem(settings.DATABASES, REPLICA, {**connections["default"].settings_dict})
    yield REPLICA
    if hasattr(connections._connections, REPLICA):
        connections[REPLICA].close()
        del connections[REPLICA]


def test_without_a_replica_nothing_changes():
    assert REPLICA not in settings.DATABASES
    assert "core.replica.ReadAfterWriteMiddleware" not in settings.MIDDLEWARE
    rewards = Reward.objects.all()
    assert lag_tolerant(rewards) is rewards
    assert replica_safety() == []


def test_the_replica_url_is_parsed_like_the_database_url_with_the_pooler_and_db_metrics():
    script = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "r = s.DATABASES['replica']; print(json.dumps([r['HOST'], r['PORT'], r['ENGINE'], "
        "r['DISABLE_SERVER_SIDE_CURSORS'], r['OPTIONS'].get('prepare_threshold'), r['TEST'], "
        "'core.replica.ReadAfterWriteMiddleware' in s.MIDDLEWARE, s.DATABASES['default']['HOST']]))"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("METRICS_", "DATABASE_", "DB_"))},
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "DATABASE_URL": "postgres://app:pw@primary:5432/joyback",
        "DATABASE_REPLICA_URL": "postgres://app:pw@standby-bouncer:6432/joyback?pgbouncer=1",
    }
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    host, port, engine, no_cursors, threshold, test, middleware, primary = json.loads(done.stdout.splitlines()[-1])
    assert (host, port, primary) == ("standby-bouncer", 6432, "primary")
    assert engine == "django_prometheus.db.backends.postgresql"
    assert (no_cursors, threshold) == (True, None)  # its own ?pgbouncer=1
    assert test["MIRROR"] == "default" and middleware


def test_a_lag_tolerant_read_goes_to_the_replica_outside_a_transaction(replica):
    assert lag_tolerant(Reward.objects.filter(status="paid")).db == REPLICA
    assert Reward.objects.filter(status="paid").db == "default"  # nothing else moves


@pytest.mark.django_db
def test_inside_a_transaction_it_stays_on_the_primary(replica):
    assert connections["default"].in_atomic_block
    assert lag_tolerant(Reward.objects.all()).db == "default"


def _through_middleware(request):
    seen = {}

    def view(request):
        seen["db"] = lag_tolerant(Reward.objects.all()).db
        return HttpResponse("ok")

    response = ReadAfterWriteMiddleware(view)(request)
    return seen["db"], response


def test_a_write_and_the_pin_seconds_after_it_read_the_primary(replica, settings):
    settings.DATABASE_REPLICA_PIN_SECONDS = 15
    factory = RequestFactory()
    # given a browser that has written nothing: the replica
    assert _through_middleware(factory.get("/portal/alpha/"))[0] == REPLICA
    # when it posts: that request reads the primary and carries the pin away
    sent = time.time()
    db, response = _through_middleware(factory.post("/portal/alpha/campaigns/1/allocate/"))
    answered = time.time()
    assert db == "default"
    pin = response.cookies[PIN_COOKIE]
    assert pin["max-age"] == 15 and pin["httponly"] and pin["samesite"] == "Lax"
    assert sent + 15 - 0.001 <= float(pin.value) <= answered + 15 + 0.001  # the cookie keeps milliseconds
    # then its next pages read the primary until the pin ends
    factory.cookies[PIN_COOKIE] = pin.value
    assert _through_middleware(factory.get("/portal/alpha/"))[0] == "default"
    for stale in (str(time.time() - 1), "garbage"):
        factory.cookies[PIN_COOKIE] = stale
        assert _through_middleware(factory.get("/portal/alpha/"))[0] == REPLICA
    # a read never pins
    assert PIN_COOKIE not in _through_middleware(factory.get("/portal/alpha/"))[1].cookies


def test_only_the_change_lists_of_the_big_tables_are_lag_tolerant():
    reward_admin = admin.site._registry[Reward]
    assert isinstance(reward_admin, LagTolerantChangelist)
    assert reward_admin.get_changelist(RequestFactory().get("/")) is not ChangeList
    # the review queue is a work list ops decide from
    assert admin.site._registry[RewardInReview].get_changelist(RequestFactory().get("/")) is ChangeList


@pytest.mark.parametrize(
    ("replica_url", "codes"),
    [
        ({"HOST": "db", "PORT": "5432", "NAME": "joyback"}, ["core.W145"]),
        ({"HOST": "standby", "PORT": "5432", "NAME": "joyback"}, []),
        ({"HOST": "standby", "PORT": "6432", "NAME": "joyback"}, ["core.W146"]),
        ({"HOST": "pgbouncer-ro", "PORT": "5432", "NAME": "joyback"}, ["core.W146"]),
        (
            {
                "HOST": "standby",
                "PORT": "6432",
                "NAME": "joyback",
                "DISABLE_SERVER_SIDE_CURSORS": True,
                "OPTIONS": {"prepare_threshold": None},
            },
            [],
        ),
    ],
)
def test_the_check_warns_of_a_replica_that_is_the_primary_or_an_unflagged_pgbouncer(monkeypatch, replica_url, codes):
    engine = {"ENGINE": "django.db.backends.postgresql"}
    primary = {**engine, "HOST": "db", "PORT": 5432, "NAME": "joyback"}
    databases = {"default": primary, REPLICA: {**engine, **replica_url}}
    monkeypatch.setattr(settings, "DATABASES", databases)
    found = replica_safety()
    assert [m.id for m in found] == codes
    assert not any(m.is_serious() for m in found) and all(m.hint for m in found)


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_gauge_says_when_the_replica_is_no_standby():
    # a second connection to the test database, a primary (made by hand: Django's test case
    # refuses a configured alias it was not told of)
    default = connections["default"]
    connections[REPLICA] = default.__class__({**default.settings_dict}, alias=REPLICA)
    try:
        families = {m.name: m.samples[0].value for m in replica_metrics()}
    finally:
        connections[REPLICA].close()
        del connections[REPLICA]
    assert families == {"joyback_replica_is_standby": 0}


# A real streaming standby ------------------------------------------------------------------------


def _run(command: list[str], **kwargs) -> None:
    done = subprocess.run(_as_postgres(command), capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{command[0]}: {done.stdout}{done.stderr}"


@pytest.fixture
def streaming_standby():
    """(primary port, standby port): a throwaway primary (initdb) and its streaming standby
    (pg_basebackup -R), on free ports in a temporary folder; both stopped and removed afterwards,
    whatever happened."""
    initdb, pg_ctl, basebackup = _binary("initdb"), _binary("pg_ctl"), _binary("pg_basebackup")
    if not (initdb and pg_ctl and basebackup):
        pytest.skip("PostgreSQL's initdb, pg_ctl and pg_basebackup are not installed (/usr/lib/postgresql/*/bin)")
    folder = tempfile.mkdtemp(prefix="joyback-replica-")
    os.chmod(folder, 0o777)  # noqa: S103 - the postgres user writes both clusters here; removed afterwards
    primary, standby = os.path.join(folder, "primary"), os.path.join(folder, "standby")
    ports = _free_port(), _free_port()
    started = []
    try:
        # initdb's pg_hba trusts replication connections from 127.0.0.1 with -A trust.
        _run([initdb, "-D", primary, "-U", "postgres", "-A", "trust"])
        common = f"-k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
        _run([pg_ctl, "-D", primary, "-o", f"-p {ports[0]} {common} -c wal_level=replica -c max_wal_senders=4",
              "-l", os.path.join(folder, "primary.log"), "-w", "start"])  # fmt: skip
        started.append(primary)
        _run([basebackup, "-h", "127.0.0.1", "-p", str(ports[0]), "-U", "postgres", "-D", standby, "-R", "-X",
              "stream", "--checkpoint=fast"])  # fmt: skip
        _run([pg_ctl, "-D", standby, "-o", f"-p {ports[1]} {common} -c hot_standby=on",
              "-l", os.path.join(folder, "standby.log"), "-w", "start"])  # fmt: skip
        started.append(standby)
        with psycopg.connect(host="127.0.0.1", port=ports[0], user="postgres", dbname="postgres", autocommit=True) as c:
            c.execute("CREATE DATABASE joyback")
        yield ports
    finally:
        for data in reversed(started):
            subprocess.run(_as_postgres([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"]), capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.postgres
@pytest.mark.slow
def test_lag_tolerant_reads_read_the_standby_and_nothing_that_decides_does(streaming_standby):
    primary, standby = streaming_standby
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "DB_"))},
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{primary}/joyback",
        "DATABASE_REPLICA_URL": f"postgres://postgres@127.0.0.1:{standby}/joyback",
        "ALLOWED_HOSTS": "testserver",
        "WEBHOOK_ALLOW_HTTP": "true",  # the smoke's endpoint is a closed port on 127.0.0.1
    }
    smoke = [sys.executable, "-m", "tests.core.replica_smoke"]
    run = subprocess.run(smoke, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    r = json.loads(run.stdout.strip().splitlines()[-1])
    before = r["before"]
    assert before["status"] == 200 and before["rewards"] == 3 and before["replica"] > 0

    # events, inline tasks and the webhook collector ran on the primary only
    assert r["money"]["statuses"] == [201] * 4 and r["money"]["default"] > 0 and r["money"]["replica"] == 0, r
    assert r["collector_emitted"] > 0 and r["collector"]["default"] > 0 and r["collector"]["replica"] == 0, r
    assert r["rewards_on_primary"] == 7

    # the owner's write pins the owner's dashboard to the primary: the new money and rewards show
    assert r["allocate"]["status"] == 302 and r["allocate"]["pinned"] and r["allocate"]["replica"] == 0, r
    owner = r["owner_after_write"]
    assert owner["funded_minor"] == before["funded_minor"] + 10_000 and owner["rewards"] == 7, r
    assert owner["replica"] == 0
    # a team mate who wrote nothing reads the paused standby: the dashboard and the CSV lag behind
    analyst = r["analyst"]
    assert (analyst["funded_minor"], analyst["rewards"]) == (before["funded_minor"], 3), r
    assert analyst["replica"] > 0
    assert r["export"]["rows"] == 3 and r["export"]["replica"] > 0, r

    # admin: the change list is the standby's, a change form the primary's (the newest reward
    # exists only there), the review queue and an action's selection never read the standby
    assert r["changelist"]["status"] == 200 and r["changelist"]["count"] == 3 and r["changelist"]["replica"] > 0, r
    assert r["change_form"]["status"] == 200 and r["change_form"]["replica"] == 0, r
    assert r["review_queue"]["status"] == 200 and r["review_queue"]["replica"] == 0, r
    assert r["action"] == {"status": 302, "reward": "voided", "default": r["action"]["default"], "replica": 0}, r

    # readiness ignores the replica however far behind it is; the gauge shows the lag
    assert r["readiness"]["ok"] and r["readiness"]["replica"] == 0, r
    assert r["lag_paused"]["joyback_replica_is_standby"] == 1 and r["lag_paused"]["joyback_replica_lag_seconds"] > 0
    # once replay resumes the standby catches up, and so do the lag-tolerant reads
    assert r["after_resume"]["rewards"] == 7 and r["after_resume"]["funded_minor"] == owner["funded_minor"]
    assert r["lag_caught_up"] == {"joyback_replica_is_standby": 1, "joyback_replica_lag_seconds": 0}
    assert r["metrics_text_has_lag"]
