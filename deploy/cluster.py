"""`make run-cluster` (issue 30): the production topology as local processes, started and stopped
by one command.

- PostgreSQL: ``DATABASE_URL`` (default ``postgres://postgres@127.0.0.1:5432/joyback_cluster``),
  created when missing and migrated directly, never through the pooler (as compose's ``migrate``).
- PgBouncer in transaction mode on a free port in front of it (``--pool-size`` server connections).
- Two gunicorn web nodes (``deploy/gunicorn.conf.py``, ``--web-workers`` each) on ``PORT`` and
  ``PORT + 1`` of ``HOST``.
- The worker clusters: one ``qcluster`` per class of background work, the money class on
  ``--money-nodes`` (2) nodes, as two machines would run it.
- Redis as the shared cache (``REDIS_URL``, default ``redis://127.0.0.1:6379/7``: a db number
  of its own; the key prefix names the database, so two clusters never count together).

Every web node and worker connects through PgBouncer (``?pgbouncer=1``), with the local settings,
debug off, and one sandbox bank per database (``sandbox-bank-<database>.sqlite3`` in the project
folder, started afresh with the database). Logs: one file per process in a folder this prints,
removed on exit unless ``--keep-logs`` (a failed ``--check`` keeps them). Ctrl-C or SIGTERM stops
everything: SIGTERM to each process group, SIGKILL to what is left after 30 s.

``--check N`` starts the same topology, then acts as a partner: a live brand with a funded
campaign and an API key (made here, straight in the database), N events over HTTP to the two web
nodes alternately, each sent twice (the second time to the other node, same ``Idempotency-Key``,
same ``external_id``), a quarter of them in bulk calls, each also sent twice; it waits until every
reward is paid, every payout settled and every queue empty, checks that nothing was doubled or
lost, prints a JSON summary and exits 0 only when every check passed.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

import dj_database_url  # noqa: E402
import psycopg  # noqa: E402
import redis  # noqa: E402 - the client Django's RedisCache uses
from psycopg import sql  # noqa: E402

from bench.common import (  # noqa: E402
    PGBOUNCER,
    WEBHOOKS_NICE,
    admin_sql,
    start_logged,
    start_pgbouncer,
    start_qcluster,
    stop_gracefully,
    with_database,
)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/joyback_cluster"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/7"
SETTINGS = "config.settings.local"
STOP_LIMIT_S = 30
WILDCARD_HOSTS = {"", "0.0.0.0", "::"}  # noqa: S104 - bind addresses, compared


class ClusterError(Exception):
    """The topology could not start (a clear message for the person at the terminal)."""


class StopAsked(Exception):  # noqa: N818 - not an error: Ctrl-C or SIGTERM
    """Ctrl-C or SIGTERM: raised in the main thread wherever it is, so everything stops at once."""


def stop_asked(signum, frame):
    raise StopAsked


# --- the topology ---------------------------------------------------------------------------------


def postgres_server(url: str) -> dict:
    """Django's settings for ``url``; refuses anything but PostgreSQL."""
    server = dj_database_url.parse(url)
    if server["ENGINE"] != "django.db.backends.postgresql":
        raise ClusterError(
            f"make run-cluster needs PostgreSQL (PgBouncer, two web nodes and the worker clusters share it); "
            f"DATABASE_URL is {url!r}. Set DATABASE_URL=postgres://user@host:5432/name, or leave it unset "
            f"for {DEFAULT_DATABASE_URL}."
        )
    return server


def database_ensure(url: str, name: str) -> bool:
    """Create database ``name`` on ``url``'s server when it is missing; True when it was created."""
    maintenance = with_database(url, "postgres")
    try:
        with psycopg.connect(maintenance, autocommit=True, connect_timeout=5) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    except psycopg.OperationalError as exc:
        raise ClusterError(f"PostgreSQL does not answer at {maintenance}: {exc}") from exc
    if exists:
        return False
    admin_sql(maintenance, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return True


def pooled_url(url: str, port: int) -> str:
    """``url`` through the PgBouncer on 127.0.0.1:``port``, flagged so the app turns off what
    transaction pooling breaks (server-side cursors, prepared statements)."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
    query = "&".join(q for q in (parts.query, "pgbouncer=1") if q)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redis_check(url: str) -> None:
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        raise ClusterError(f"Redis does not answer at {url}: {exc}. Start redis-server, or set REDIS_URL.") from exc


def port_check(host: str, port: int) -> None:
    """Refuse a port another server holds, before anything starts (gunicorn would retry for a while)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds: TIME_WAIT is no owner
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ClusterError(f"{host}:{port} is taken ({exc.strerror}): set another PORT (nodes: PORT, PORT+1)")


class Topology:
    """The processes of the cluster, started in order and stopped together."""

    def __init__(self, args: argparse.Namespace, *, folder: Path) -> None:
        self.args = args
        self.folder = folder
        self.logs = folder / "logs"
        self.logs.mkdir(parents=True)
        self.private = folder / "run"  # PgBouncer's config, gunicorn's control sockets: removed at the stop
        self.private.mkdir()
        self.url = args.database_url
        self.server = postgres_server(self.url)
        self.name = self.server["NAME"]
        self.store = PROJECT_DIR / f"sandbox-bank-{self.name}.sqlite3"
        self.pgbouncer = None
        self.pooled = ""
        self.web: list = []
        self.workers: dict[str, object] = {}
        client_host = "127.0.0.1" if args.host in WILDCARD_HOSTS else args.host
        self.node_urls = [f"http://{client_host}:{args.port + k}" for k in range(2)]

    def env(self, **extra: str) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if k not in ("DATABASE_POOLER", "Q_CLUSTER_NAME")}
        return {
            **inherited,
            "DJANGO_SETTINGS_MODULE": SETTINGS,
            "DEBUG": "0",
            "DATABASE_URL": self.pooled or self.url,
            "HOST": self.args.host,
            "PORT": str(self.args.port),  # links in e-mails and the fake TikTok point at node 1
            "CACHE_URL": self.args.redis_url,
            "CACHE_KEY_PREFIX": f"joyback-cluster-{self.name}",
            "SANDBOX_STORE_PATH": str(self.store),
            "LOG_LEVEL": os.environ.get("LOG_LEVEL", "WARNING"),
            **extra,
        }

    def manage(self, *command: str) -> None:
        """``manage.py <command>`` straight to PostgreSQL (not through the pooler), to completion."""
        log = self.logs / f"{command[0]}.log"
        proc = start_logged([sys.executable, str(PROJECT_DIR / "manage.py"), *command], env=self.env(), log=log)
        try:
            code = proc.wait()
        except BaseException:  # Ctrl-C while it runs: it is in a session of its own, so stop it too
            stop_gracefully([proc], limit_s=STOP_LIMIT_S)
            raise
        if code != 0:
            raise ClusterError(f"manage.py {' '.join(command)} failed:\n{log.read_text(errors='replace')[-3000:]}")

    def start(self, *, classes: list[str | None], money: str) -> None:
        redis_check(self.args.redis_url)
        if PGBOUNCER is None:
            raise ClusterError("pgbouncer is not installed (apt-get install pgbouncer)")
        for port in (self.args.port, self.args.port + 1):
            port_check(self.args.host, port)
        if database_ensure(self.url, self.name):
            # A new database restarts the sandbox bank too: an old bank would answer the new
            # payouts' end-to-end ids with transfers made for another database's payouts.
            for stale in self.store.parent.glob(f"{self.store.name}*"):
                stale.unlink()
            print(f"  created database {self.name}", flush=True)
        self.manage("migrate", "--noinput")
        if self.args.seed:
            self.manage("seed_demo", "--force")  # local settings, debug off: the demo logins asked for
        self.pgbouncer, port = start_pgbouncer(
            server=self.server,
            folder=self.private / "pgbouncer",
            log=self.logs / "pgbouncer.log",
            pool_size=self.args.pool_size,
        )
        self.pooled = pooled_url(self.url, port)
        for k in range(2):
            env = self.env(
                GUNICORN_BIND=f"{self.args.host}:{self.args.port + k}", WEB_CONCURRENCY=str(self.args.web_workers)
            )
            command = [sys.executable, "-m", "gunicorn", "--config", "deploy/gunicorn.conf.py"]
            command += ["--control-socket", str(self.private / f"web{k + 1}.ctl"), "config.wsgi"]
            self.web.append(start_logged(command, env=env, log=self.logs / f"web{k + 1}.log"))
        for name in classes:
            for node in range(1, (self.args.money_nodes if name is None else 1) + 1):
                label = f"{name or money}{node if name is None else ''}"
                env = self.env(**({"Q_CLUSTER_NAME": name} if name else {}))
                self.workers[label] = start_qcluster(
                    env=env, log=self.logs / f"worker-{label}.log", nice=WEBHOOKS_NICE if name == "webhooks" else 0
                )
        for base, proc in zip(self.node_urls, self.web, strict=True):
            health(base, proc=proc)

    def processes(self) -> dict[str, object]:
        return {
            **({"pgbouncer": self.pgbouncer} if self.pgbouncer else {}),
            **{f"web{k + 1}": p for k, p in enumerate(self.web)},
            **{f"worker-{k}": p for k, p in self.workers.items()},
        }

    def exited(self) -> dict[str, int]:
        return {name: p.returncode for name, p in self.processes().items() if p.poll() is not None}

    def stop(self) -> None:
        # The web nodes and workers first, while PgBouncer still carries their last transactions.
        stop_gracefully([*self.web, *self.workers.values()], limit_s=STOP_LIMIT_S)
        if self.pgbouncer is not None:
            stop_gracefully([self.pgbouncer], limit_s=STOP_LIMIT_S)
        shutil.rmtree(self.private, ignore_errors=True)


def health(base: str, *, proc: subprocess.Popen, limit_s: float = 60) -> None:
    """Return once ``base``/healthz answers 200; ClusterError when ``proc`` (its gunicorn) exits
    first or ``limit_s`` passes."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:  # noqa: S310 - our own node
                if response.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None:
            raise ClusterError(f"the web node at {base} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise ClusterError(f"{base}/healthz did not answer 200 within {limit_s:.0f} s")
        time.sleep(0.2)


def print_banner(topology: Topology, money: str) -> None:
    one, two = topology.node_urls
    workers = ", ".join(topology.workers)
    print(
        f"""
  Web node 1:                   {one}/   (admin {one}/admin/, portal {one}/portal/, API docs {one}/api/docs/)
  Web node 2:                   {two}/
  Demo logins (after --seed):   ops / ops-demo-password, admin / admin-demo-password,
                                brand@demo.joyback.example / brand-demo-password
  PgBouncer (transaction mode): {topology.pooled.split("?")[0]}  (the web nodes and workers connect here)
  PostgreSQL (direct):          {topology.url}
  Redis (shared cache):         {topology.args.redis_url}
  Workers:                      {workers} ({money}: the money class, on {topology.args.money_nodes} nodes)
  Sandbox bank:                 {topology.store}
  Logs, one file per process:   {topology.logs}
  Stop them all with Ctrl-C (or SIGTERM to pid {os.getpid()}).
""",
        flush=True,
    )


# --- main -----------------------------------------------------------------------------------------


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].strip("`"))
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")), help="web node 1; node 2: +1")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL)
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL)
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers per web node")
    parser.add_argument("--money-nodes", type=int, default=2, help="money clusters (one per machine)")
    parser.add_argument("--pool-size", type=int, default=10, help="PgBouncer's server connections")
    parser.add_argument("--seed", action="store_true", help="load the demo data (seed_demo) first")
    parser.add_argument("--check", type=int, nargs="?", const=200, metavar="N", help="run N events through it")
    parser.add_argument("--wait", type=float, default=300, help="seconds --check waits for the payouts")
    parser.add_argument("--keep-logs", action="store_true", help="keep the logs folder on exit")
    args = parser.parse_args(argv)
    if args.check is not None and args.check < 1:
        parser.error("--check needs at least 1 event")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    folder = Path(tempfile.mkdtemp(prefix="joyback-cluster-"))
    signal.signal(signal.SIGINT, stop_asked)
    signal.signal(signal.SIGTERM, stop_asked)
    keep = args.keep_logs
    topology = None
    try:
        topology = Topology(args, folder=folder)
        # This process reads and writes straight to PostgreSQL, with the settings every node has.
        os.environ.update({k: v for k, v in topology.env().items() if k != "DATABASE_URL"})
        os.environ["DATABASE_URL"] = topology.url
        import django

        django.setup()
        from django.conf import settings

        money = settings.Q_CLUSTER["name"]
        topology.start(classes=[None, *settings.Q_CLASSES], money=money)
        if args.check is None:
            print_banner(topology, money)
            while not topology.exited():
                time.sleep(1)
            print(f"  a process exited: {topology.exited()}", flush=True)
            keep = True
            return 1
        import cluster_check  # Django's models: only once it is set up

        summary = cluster_check.check(
            nodes=topology.node_urls, store=topology.store, n=args.check, wait_s=args.wait, exited=topology.exited
        )
        summary.update(database=topology.name, workers=list(topology.workers))
        keep = keep or not summary["ok"]
        summary["logs"] = str(topology.logs) if keep else None
        print(json.dumps(summary, indent=2, default=str), flush=True)
        return 0 if summary["ok"] else 1
    except StopAsked:
        print("\n  Stopping …", flush=True)
        return 0 if args.check is None else 1
    except (ClusterError, RuntimeError) as exc:
        print(f"run-cluster: {exc}", file=sys.stderr, flush=True)
        keep = True
        return 2
    finally:
        # A second Ctrl-C or SIGTERM does not cut the stop short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if topology is not None and topology.processes():
            topology.stop()
            print("  Stopped: web nodes, worker clusters, PgBouncer.", flush=True)
        if keep and any((folder / "logs").glob("*")):
            print(f"  Logs kept in {folder / 'logs'}", flush=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
