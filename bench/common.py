"""Helpers every benchmark shares: the `meta` block, percentiles, the printed table, the `targets`
list and writing ``bench-results/<name>.json`` (conventions in the benchmarks README); forked load
processes that start together; real ``qcluster`` and PgBouncer processes started and stopped; a
loopback webhook receiver.

Plain functions with no Django import at module level, so a benchmark can import them before
``django.setup()`` and the peer benchmark (``bench/peer/``) can use them from its own virtualenv.
"""

import glob
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

PROJECT_DIR = Path(__file__).resolve().parent.parent
RESULTS_DIR = PROJECT_DIR / "bench-results"

_FDATASYNC_LINE = re.compile(r"^\s*fdatasync\s+([0-9.]+) ops/sec")


def with_database(url: str, name: str) -> str:
    """``url`` (a PostgreSQL URL) with its database name replaced by ``name``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def admin_sql(url: str, statement: sql.Composable) -> None:
    """Run one statement outside a transaction (CREATE/DROP DATABASE cannot run inside one)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


def iban(n: int) -> str:
    """A valid Italian IBAN whose account number is ``n`` (up to 12 digits)."""
    bban = f"X0542811101{n:012d}"
    digits = "".join(str(int(ch, 36)) for ch in f"{bban}IT00")
    return f"IT{98 - int(digits) % 97:02d}{bban}"


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least ``pct`` % of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def latency_ms(seconds: Sequence[float]) -> dict[str, float | None]:
    """p50/p99 (nearest rank) of latencies given in seconds, in milliseconds."""
    p50, p99 = percentile(seconds, 50), percentile(seconds, 99)
    return {
        "p50_ms": None if p50 is None else round(p50 * 1000, 3),
        "p99_ms": None if p99 is None else round(p99 * 1000, 3),
    }


def rate_by_thirds(event_times: Sequence[float], *, start: float, end: float) -> list[float]:
    """Events per second in each third of the wall-clock window [start, end]: shows whether a
    workload slows down as it goes (e.g. as an account's history grows)."""
    third = (end - start) / 3
    if third <= 0:
        return [0.0, 0.0, 0.0]
    counts = [0, 0, 0]
    for t in event_times:
        counts[min(2, max(0, int((t - start) / third)))] += 1
    return [round(c / third, 1) for c in counts]


def pg_test_fsync_rate(*, timeout_s: float = 20.0) -> float | None:
    """The fdatasync rate (ops/s, one 8 kB write) from PostgreSQL's ``pg_test_fsync -s 1``, or None
    when the tool is not installed. Stops the tool after the first section: the rest is not needed.
    The test file sits in the system temp directory, which may be another disk than PGDATA's."""
    tools = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_test_fsync"))
    if not tools:
        return None
    with tempfile.TemporaryDirectory(prefix="bench-fsync-") as tmp:
        proc = subprocess.Popen(
            [tools[-1], "-s", "1", "-f", os.path.join(tmp, "fsync.out")],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        rate = None
        try:
            for line in proc.stdout:
                match = _FDATASYNC_LINE.match(line)
                if match:
                    rate = float(match.group(1))
                    break
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return rate


def python_reference_ms(*, runs: int = 5) -> float:
    """Milliseconds a fixed pure-Python loop takes here (best of ``runs``). Shared VMs of the same
    "kind" differ by 2x and more in single-core speed; figures from two machines compare only
    through this (seen here: 41 to 57 ms on one machine across a session)."""
    best = math.inf
    for _ in range(runs):
        start = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return round(best * 1000, 1)


class CpuMeter:
    """CPU seconds (user + system) spent by process groups during a phase, read from /proc:
    where a benchmark's cores went. ``self``: this process and the children it has reaped (the
    load generator; forked workers once joined); ``server``: the process ``tree_of`` and its
    children (gunicorn's master and workers); ``postgres``: every PostgreSQL process. A parent's
    reaped-children times count too, so processes born and ended within the phase (a backend per
    forked worker, a recycled connection) are not missed. None off Linux."""

    _TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def __init__(self, *, tree_of: int | None = None) -> None:
        self.tree_of = tree_of  # a server's master pid: it and its children
        self._start: dict[str, float] = {}

    def _read(self) -> dict[str, float] | None:
        if not os.path.isdir("/proc/self"):
            return None
        totals = {"server": 0.0, "postgres": 0.0}
        postgres: dict[int, tuple[int, float, float]] = {}  # pid -> (ppid, own, reaped children)
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    raw = f.read()
            except OSError:
                continue
            name = raw[raw.index("(") + 1 : raw.rindex(")")]
            fields = raw[raw.rindex(")") + 2 :].split()
            pid, ppid = int(entry), int(fields[1])
            own = (int(fields[11]) + int(fields[12])) / self._TICK
            reaped = (int(fields[13]) + int(fields[14])) / self._TICK
            if name == "postgres":
                postgres[pid] = (ppid, own, reaped)
            elif self.tree_of == pid:
                totals["server"] += own + reaped
            elif self.tree_of is not None and self.tree_of == ppid:
                totals["server"] += own
        for ppid, own, reaped in postgres.values():
            # The postmaster (its parent is no postgres) has reaped every ended backend.
            totals["postgres"] += own + (reaped if ppid not in postgres else 0.0)
        usage = os.times()
        return {"self": usage.user + usage.system + usage.children_user + usage.children_system, **totals}

    def start(self) -> None:
        self._start = self._read() or {}

    def stop(self, per: int) -> dict[str, float] | None:
        """Milliseconds of CPU per unit (request, event) since ``start``, by group."""
        now = self._read()
        if now is None or not self._start:
            return None
        return {group: round((now[group] - self._start[group]) * 1000 / per, 3) for group in now}


def git_commit() -> str | None:
    """HEAD's commit, suffixed ``-dirty`` when tracked files differ from it (read-only git calls)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PROJECT_DIR, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "diff-index", "--quiet", "HEAD", "--"], cwd=PROJECT_DIR).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{head}-dirty" if dirty else head


def meta(*, postgres_version: str | None, fsync_rate: float | None = None, **extra) -> dict:
    """The `meta` block every result file carries."""
    return {
        "cpus": os.cpu_count(),
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "postgres": postgres_version,
        "git_commit": git_commit(),
        "pg_test_fsync_fdatasync_ops_per_s": fsync_rate,
        "python_reference_ms": python_reference_ms(),
        **extra,
    }


def target(name: str, value: float | None, *, unit: str, target: float, op: str = ">=") -> dict:
    """One entry of the `targets` list; a missing value never counts as met."""
    if op not in (">=", "<="):
        raise ValueError(f"Unknown op {op!r}")
    met = value is not None and (value >= target if op == ">=" else value <= target)
    return {"name": name, "value": value, "unit": unit, "target": target, "op": op, "met": met}


def write_results(name: str, payload: dict) -> Path:
    """Write ``bench-results/<name>.json`` in the project folder and return its path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain monospace table: numbers right-aligned, text left-aligned."""

    def cell(value: object) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.2f}"
        if isinstance(value, int) and not isinstance(value, bool):
            return f"{value:,}"
        return str(value)

    text_rows = [[cell(v) for v in row] for row in rows]
    numeric = [
        all(isinstance(row[i], int | float) and not isinstance(row[i], bool) or row[i] is None for row in rows)
        for i in range(len(headers))
    ]
    widths = [max([len(h)] + [len(r[i]) for r in text_rows]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in text_rows)])


def format_targets(targets: Sequence[dict]) -> str:
    rows = [
        (t["name"], t["value"], f"{t['op']} {t['target']}", t["unit"], "MET" if t["met"] else "NOT MET")
        for t in targets
    ]
    return format_table(["target", "value", "required", "unit", "result"], rows)


# --- forked load processes -------------------------------------------------------------------------

BARRIER_TIMEOUT_S = 300


@dataclass
class WorkerResult:
    """What a forked load process sends back: its latencies (seconds), outcomes by name, its
    monotonic start and end, a crash's traceback and a few error samples."""

    worker: int
    latencies: list[float] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0
    crashed: str = ""
    error_samples: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


@contextmanager
def reporting(result: WorkerResult, barrier, out):
    """A forked worker's frame: a crash is recorded and frees the others from the barrier; the
    connection is closed and the result sent back whatever happened."""
    from django.db import connection  # Django only in the forked workers of a Django benchmark

    try:
        yield
    except BaseException:
        result.crashed = traceback.format_exc()
        barrier.abort()
    finally:
        connection.close()
        out.put(result)


def in_processes(jobs: Sequence[tuple[Callable, tuple]]) -> list[WorkerResult]:
    """Run each ``target(w, *args, barrier, out)`` of ``jobs`` in a forked process of its own, all
    released together by one barrier; their results, in the order they finished. Raises when one
    crashed."""
    from django.db import connections

    context = multiprocessing.get_context("fork")
    connections.close_all()  # no connection may cross the fork
    barrier = context.Barrier(len(jobs))
    out = context.Queue()
    procs = [context.Process(target=target, args=(w, *args, barrier, out)) for w, (target, args) in enumerate(jobs)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    crashed = [r.crashed for r in results if r.crashed]
    if crashed:
        raise RuntimeError("A benchmark worker crashed:\n" + "\n".join(crashed))
    return results


# --- real qcluster processes -----------------------------------------------------------------------


def database_url(settings_dict: dict) -> str:
    """A ``DATABASE_URL`` for Django's ``connection.settings_dict``: what a child process needs."""
    auth = settings_dict["USER"] + (f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else "")
    host, port = settings_dict["HOST"] or "127.0.0.1", settings_dict["PORT"] or 5432
    return f"postgres://{auth}@{host}:{port}/{settings_dict['NAME']}"


def start_logged(command: Sequence[str], *, env: dict[str, str], log: Path) -> subprocess.Popen:
    """``command`` in the project folder, in a session of its own (so its group can be signalled
    as one, and a terminal's Ctrl-C reaches only its parent), its output appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=PROJECT_DIR
        )


# The webhooks clusters run at a lower CPU priority (``nice -n 10``, systemd's ``Nice=10`` in
# production: README "Production"): money and notices take the CPU first, webhooks what is left.
# One A/B run (2026-12-04, --people 1000, 2 nodes, 2 cores): people fully paid/s hot 4.03 against
# 3.19 at nice 0 (1.26x), spread 4.47 against 4.34 (1.03x); drain ratio hot 0.50 against 0.36;
# webhook p99 143/164 s against 151/178 s.
WEBHOOKS_NICE = 10


def start_qcluster(*, env: dict[str, str], log: Path, nice: int = 0) -> subprocess.Popen:
    """``manage.py qcluster`` (``start_logged``). ``env`` is the whole environment: Q_CLUSTER_NAME
    picks the class, DJANGO_SETTINGS_MODULE the settings. ``nice`` above 0 starts it under
    ``nice -n`` (what systemd's ``Nice=`` does for a unit): the class gets the CPU the others leave."""
    # System checks (URLs, templates, admin) belong to the web process; the worker skips them.
    command = [sys.executable, str(PROJECT_DIR / "manage.py"), "qcluster", "--skip-checks"]
    return start_logged(["nice", "-n", str(nice), *command] if nice else command, env=env, log=log)


def sigterm_and_wait(proc: subprocess.Popen, *, limit_s: float) -> float | None:
    """SIGTERM to the cluster's main process only (what ``kill <pid>``, systemd's main-PID mode or
    docker stop send); seconds until it exited, or None if it had not after ``limit_s`` (then the
    whole group is killed)."""
    if proc.poll() is not None:
        return 0.0
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=limit_s)
        return round(time.monotonic() - start, 2)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def stop_gracefully(procs: Sequence[subprocess.Popen], *, limit_s: float = 30) -> None:
    """SIGTERM to each process's main process only, all at once (a qcluster's or gunicorn's clean
    stop: a qcluster whose workers get the SIGTERM too never exits), then SIGKILL to the whole
    group of each after ``limit_s`` in all, and to whatever a main process left in its group."""
    running = [p for p in procs if p.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + limit_s
    for proc in procs:
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        with suppress(ProcessLookupError):  # raised when the group is empty: it stopped cleanly
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, *, proc: subprocess.Popen, what: str, limit_s: float = 30) -> None:
    """Return once 127.0.0.1:``port`` accepts a connection; raise RuntimeError when ``proc`` exits
    first or ``limit_s`` passes."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {proc.returncode} before listening on port {port}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not listen on port {port} within {limit_s:.0f} s")
            time.sleep(0.1)


PGBOUNCER = shutil.which("pgbouncer") or next(
    (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None
)


def start_pgbouncer(
    *, server: dict, folder: Path, log: Path, pool_size: int, max_clients: int = 200
) -> tuple[subprocess.Popen, int]:
    """A PgBouncer in transaction mode on a free port of 127.0.0.1 in front of the PostgreSQL that
    ``server`` names (Django's ``connection.settings_dict``: HOST, PORT, USER, PASSWORD), with
    ``pool_size`` server connections per database and user; its config in ``folder``, its output
    appended to ``log``. Returns the process, in a session of its own, and the port, once it
    listens. PgBouncer refuses to run as root: as root, it drops to the ``postgres`` user, which
    must then read ``folder``."""
    if PGBOUNCER is None:
        raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "users.txt").write_text(f'"{server["USER"]}" "{server["PASSWORD"] or ""}"\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server['HOST'] or '127.0.0.1'} port={server['PORT'] or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = {'trust' if not server['PASSWORD'] else 'plain'}\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmax_client_conn = {max_clients}\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
    )
    folder.chmod(0o755)
    for path in (folder / "users.txt", folder / "pgbouncer.ini"):
        path.chmod(0o644)
    command = [PGBOUNCER, *(["-u", "postgres"] if os.geteuid() == 0 else []), str(folder / "pgbouncer.ini")]
    proc = start_logged(command, env=dict(os.environ), log=log)
    try:
        wait_for_port(port, proc=proc, what="pgbouncer", limit_s=10)
    except RuntimeError as exc:
        stop_group(proc, limit_s=5)
        raise RuntimeError(f"{exc}: {log.read_text(errors='replace')[-2000:]}") from exc
    return proc, port


def stop_group(proc: subprocess.Popen, *, limit_s: float = 30) -> None:
    """SIGTERM to the whole process group, SIGKILL after ``limit_s``: nothing is left running."""
    stop_groups([proc], limit_s=limit_s)


def stop_groups(procs: Sequence[subprocess.Popen], *, limit_s: float = 30) -> None:
    """``stop_group`` for several at once: all are signalled first, then given ``limit_s`` in all."""
    running = [p for p in procs if p.poll() is None]
    for proc in running:
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + limit_s
    for proc in running:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# --- loopback webhook receiver ---------------------------------------------------------------------


class Receiver:
    """Every POST on 127.0.0.1, as (endpoint index from the path, event id header, arrival time):
    an endpoint is ``{url}/<index>``. It answers in HTTP/1.1 and keeps the connection open, as a
    partner's web server does, so a send task may POST its batch on one connection."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[int, str, float]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # the status line and the body leave without waiting

            def do_POST(self):  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers["Content-Length"]))
                arrival = (int(self.path.rsplit("/", 1)[-1]), self.headers["JoyBack-Event-Id"], time.time())
                with receiver._lock:
                    receiver.arrivals.append(arrival)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self) -> int:
        with self._lock:
            return len(self.arrivals)

    def snapshot(self) -> list[tuple[int, str, float]]:
        with self._lock:
            return list(self.arrivals)
