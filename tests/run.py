"""`make test`: the suite on a real PostgreSQL whenever one can be had, so the production code
paths (triggers, row locks, COPY, real concurrency) run on every developer machine, not only in CI.

Which database, in this order:

1. ``DATABASE_URL`` when set (CI sets it);
2. a PostgreSQL answering on 127.0.0.1:5432 as ``postgres`` without a password (this machine's,
   and CI's): tests use their own ``test_<name>`` database there, never the named one;
3. a throwaway cluster made with PostgreSQL's ``initdb`` / ``pg_ctl`` in a temporary folder, on a
   free port, removed afterwards (as the ``postgres`` user when run as root: initdb refuses root);
4. SQLite, saying so: tests that need PostgreSQL are skipped with their reason (``-ra``).

Arguments are passed to pytest: ``make test ARGS="tests/api -x"``.
"""

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from contextlib import closing

LOCAL_URL = "postgres://postgres@127.0.0.1:5432/test"


def _answers(host: str, port: int) -> bool:
    try:
        import psycopg
    except ImportError:
        return False
    try:
        with closing(psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", connect_timeout=2)):
            return True
    except psycopg.Error:
        return False


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    runuser = shutil.which("runuser")
    return [runuser, "-u", "postgres", "--", *command] if runuser else command


def _throwaway_cluster():
    """(DATABASE_URL, stop callback) of a new cluster, or None when PostgreSQL is not installed."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if not (initdb and pg_ctl):
        return None
    folder = tempfile.mkdtemp(prefix="joyback-pg-")
    os.chmod(folder, 0o777)  # noqa: S103 - the postgres user writes the cluster here; removed afterwards
    data = os.path.join(folder, "data")
    port = _free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT}
    subprocess.run(_as_postgres([initdb, "-D", data, "-U", "postgres", "-A", "trust"]), check=True, **quiet)
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    start = [pg_ctl, "-D", data, "-o", options, "-l", os.path.join(folder, "log"), "-w", "start"]
    subprocess.run(_as_postgres(start), check=True, **quiet)

    def stop() -> None:
        subprocess.run(_as_postgres([pg_ctl, "-D", data, "-m", "fast", "-w", "stop"]), check=False, **quiet)
        shutil.rmtree(folder, ignore_errors=True)

    return f"postgres://postgres@127.0.0.1:{port}/postgres", stop


def main(argv: list[str]) -> int:
    env = dict(os.environ)
    stop = None
    if env.get("DATABASE_URL"):
        where = env["DATABASE_URL"]
    elif _answers("127.0.0.1", 5432):
        where = env["DATABASE_URL"] = LOCAL_URL
    else:
        cluster = _throwaway_cluster()
        if cluster is not None:
            env["DATABASE_URL"], stop = cluster
            where = f"{env['DATABASE_URL']} (a throwaway cluster)"
        else:
            where = "SQLite: PostgreSQL is not installed, so the tests that need it are skipped (listed below)"
    print(f"make test: database {where}", flush=True)
    try:
        return subprocess.call([sys.executable, "-m", "pytest", *argv], env=env)
    finally:
        if stop is not None:
            stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
