"""gunicorn for the web nodes (the image's ``web`` command, ``deploy/systemd/joyback-web.service``).
Every value comes from the environment; the defaults suit one node of 2 cores.

- Sync workers, one request each: requests are short database transactions, and each worker
  holds one database connection (size PgBouncer's pool, or ``max_connections``, to match).
- ``timeout`` kills a worker silent for that long (the bulk API call of 1,000 events is the
  longest request); ``graceful_timeout`` lets requests in flight finish on SIGTERM (a rolling
  deploy) before the workers are killed.
- ``forwarded_allow_ips``: the proxies whose ``X-Forwarded-Proto`` is believed (Django's
  ``SECURE_PROXY_SSL_HEADER``); set it to the same as ``TRUSTED_PROXY_IPS``, which
  ``core.proxy`` reads for the client's address.
- Prometheus: with ``PROMETHEUS_MULTIPROC_DIR`` set, each worker writes its HTTP and database
  metrics there and ``/metrics`` sums them; the folder is emptied at start and a dead worker's
  gauges are dropped.
- No access log by default: gunicorn writes its lines without the masking of personal data that
  every application log line goes through (``core.logging``); the load balancer's log has the
  requests.
"""

import os
import shutil
from pathlib import Path


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = _int("WEB_CONCURRENCY", 2 * (os.cpu_count() or 1) + 1)
worker_class = "sync"
timeout = _int("GUNICORN_TIMEOUT", 60)
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = _int("GUNICORN_KEEPALIVE", 5)
# A fresh process now and then: a slow leak in any library never grows without bound.
max_requests = _int("GUNICORN_MAX_REQUESTS", 5000)
max_requests_jitter = _int("GUNICORN_MAX_REQUESTS_JITTER", 500)
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
# Heartbeat files in memory, not on a container's overlay disk (a slow disk reads as a hung worker).
worker_tmp_dir = "/dev/shm" if Path("/dev/shm").is_dir() else None  # noqa: S108
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
proc_name = "joyback-web"


def on_starting(server) -> None:
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        Path(folder).mkdir(parents=True, exist_ok=True)


def child_exit(server, worker) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
