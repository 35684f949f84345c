"""The deployment files (issue 30) where Docker is not available to the tests: the gunicorn
config's values, the entry point's roles, and a compose file with every class's worker cluster and
both web nodes behind PgBouncer in transaction mode."""

import configparser
import os
import re
import runpy
import subprocess
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from config.settings.base import database_from_url

ROOT = Path(__file__).resolve().parents[1]


def gunicorn_config(**env) -> dict:
    old = dict(os.environ)
    os.environ.update(env)
    try:
        return runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_gunicorn_takes_workers_and_timeouts_from_the_environment(tmp_path):
    config = gunicorn_config(
        WEB_CONCURRENCY="7", GUNICORN_TIMEOUT="45", GUNICORN_GRACEFUL_TIMEOUT="20", FORWARDED_ALLOW_IPS="10.0.0.0/8"
    )
    assert (config["workers"], config["timeout"], config["graceful_timeout"]) == (7, 45, 20)
    assert config["forwarded_allow_ips"] == "10.0.0.0/8"
    assert config["bind"] == "0.0.0.0:8000" and config["worker_class"] == "sync"
    assert config["accesslog"] is None  # unmasked request lines stay off unless asked for
    # a graceful stop shorter than the kill timeout: requests in flight finish on a rolling deploy
    defaults = gunicorn_config()
    assert defaults["graceful_timeout"] <= defaults["timeout"] and defaults["workers"] >= 1


def test_gunicorn_starts_prometheus_multiprocess_mode_with_an_empty_folder(tmp_path):
    folder = tmp_path / "prometheus"
    folder.mkdir()
    (folder / "counter_123.db").write_bytes(b"stale")
    config = gunicorn_config(PROMETHEUS_MULTIPROC_DIR=str(folder))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    try:
        config["on_starting"](None)
        assert folder.is_dir() and list(folder.iterdir()) == []
        config["child_exit"](None, type("Worker", (), {"pid": 123})())
    finally:
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]


def entrypoint(tmp_path, *args, **env) -> list[str]:
    """Run deploy/entrypoint.sh with python and gunicorn replaced by stubs that log their arguments."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "gunicorn"):
        stub = bin_dir / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n')
        stub.chmod(0o755)
    log.write_text("")
    path = f"{bin_dir}:{os.environ['PATH']}"
    subprocess.run(["sh", str(ROOT / "deploy" / "entrypoint.sh"), *args], env={"PATH": path, **env}, check=True)
    return log.read_text().splitlines()


def test_the_entrypoint_runs_each_role_and_migrates_first_only_when_asked(tmp_path):
    assert entrypoint(tmp_path) == ["gunicorn --config deploy/gunicorn.conf.py config.wsgi"]
    assert entrypoint(tmp_path, "web", MIGRATE_ON_START="true") == [
        "python manage.py migrate --noinput",
        "gunicorn --config deploy/gunicorn.conf.py config.wsgi",
    ]
    assert entrypoint(tmp_path, "worker") == ["python manage.py qcluster"]
    assert entrypoint(tmp_path, "migrate", MIGRATE_ON_START="true") == ["python manage.py migrate --noinput"]
    assert entrypoint(tmp_path, "python", "manage.py", "ledger_verify") == ["python manage.py ledger_verify"]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def _url(service: dict) -> str:
    return service["environment"]["DATABASE_URL"].replace("${DB_PASSWORD:?set DB_PASSWORD}", "pw")


def test_compose_runs_a_worker_cluster_for_every_class(compose):
    classes = {settings.Q_CLUSTER["name"], *settings.Q_CLUSTER["ALT_CLUSTERS"]}
    workers = {
        s["environment"]["Q_CLUSTER_NAME"]: name
        for name, s in compose["services"].items()
        if s.get("command") == ["worker"]
    }
    assert set(workers) == classes


def test_compose_has_two_web_nodes_behind_pgbouncer_and_a_migrate_that_goes_direct(compose):
    services = compose["services"]
    webs = [name for name, s in services.items() if s.get("command") == ["web"]]
    assert len(webs) >= 2
    for name, service in services.items():
        if service.get("command") in (["web"], ["worker"]):
            database = database_from_url(_url(service).replace("${DB_USER:-joyback}", "joyback"))
            assert database["HOST"] == "pgbouncer", name
            assert database["DISABLE_SERVER_SIDE_CURSORS"] is True and database["OPTIONS"]["prepare_threshold"] is None
            assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
            assert service["environment"]["CACHE_URL"].startswith("redis://")
    migrate = database_from_url(_url(services["migrate"]).replace("${DB_USER:-joyback}", "joyback"))
    assert migrate["HOST"] == "postgres" and services["migrate"]["command"] == ["migrate"]
    upstream = (ROOT / "deploy" / "nginx" / "default.conf").read_text()
    assert all(f"server {name}:8000" in upstream for name in webs)


def test_the_pgbouncer_of_compose_pools_by_transaction():
    ini = configparser.ConfigParser(inline_comment_prefixes=(";",))
    ini.read(ROOT / "deploy" / "pgbouncer" / "pgbouncer.ini")
    assert ini["pgbouncer"]["pool_mode"] == "transaction"
    assert ini["pgbouncer"]["listen_port"] == "6432"


def test_the_image_is_multi_stage_runs_unprivileged_and_collects_static_files():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.count("FROM python:3.11-slim") == 2
    assert "collectstatic --noinput" in dockerfile
    assert "\nUSER 10001\n" in dockerfile and 'ENTRYPOINT ["/app/deploy/entrypoint.sh"]' in dockerfile


def test_the_systemd_units_run_web_workers_and_migrate():
    units = ROOT / "deploy" / "systemd"
    assert "gunicorn --config deploy/gunicorn.conf.py config.wsgi" in (units / "joyback-web.service").read_text()
    worker = (units / "joyback-worker@.service").read_text()
    assert "Environment=Q_CLUSTER_NAME=%i" in worker and "manage.py qcluster" in worker
    assert "Type=oneshot" in (units / "joyback-migrate.service").read_text()


def test_the_example_env_leaves_only_required_secrets_empty(compose):
    """An empty value counts as set (it would pass a production check that looks for a default), so
    the example may leave empty only what compose refuses to start without."""
    required = set(re.findall(r"\$\{(\w+):\?", (ROOT / "compose.yaml").read_text()))
    lines = (ROOT / "deploy" / "env.example").read_text().splitlines()
    empty = {line[:-1] for line in lines if line and not line.startswith("#") and line.endswith("=")}
    assert empty and empty <= required
    assert all(
        s["env_file"] == ".env" for s in compose["services"].values() if s.get("command") in (["web"], ["worker"])
    )
