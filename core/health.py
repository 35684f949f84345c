"""Probes and metrics over HTTP: ``/healthz``, ``/readyz`` and ``/metrics``.

They are answered by a middleware placed first (``config/settings/base.py``), before the host
check, the https redirect, sessions and the URL resolver: a load balancer or an orchestrator
probes by address over plain http, and a probe must not cost a session or a redirect.

- ``/healthz``: the process answers. No database: a database outage must not make an
  orchestrator restart every web process at once.
- ``/readyz``: this node can serve — the database answers, every migration on disk is applied,
  and no class of background work has a task waiting longer than
  ``READY_QUEUE_MAX_AGE_SECONDS``. 503 with a JSON body naming what failed.
- ``/metrics``: Prometheus text (``core.metrics``), for a bearer ``METRICS_TOKEN`` or an address
  in ``METRICS_ALLOWED_IPS``; anything else gets 403.
"""

import functools
import hmac
import ipaddress
import logging
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST

from core.metrics import metrics_render, queue_state

logger = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


_migrations_applied = False


def migrations_pending() -> list[str]:
    """The migrations on disk not applied to the database, as ``app.name``. Once none is
    pending the answer is kept for the life of the process: a migration never un-applies itself,
    and building the graph reads every migration file."""
    global _migrations_applied
    if _migrations_applied:
        return []
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    pending = [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]
    _migrations_applied = not pending
    return pending


def readiness() -> tuple[bool, dict]:
    """Whether this node is ready, and each check's result for the body."""
    checks: dict[str, dict] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True}
        pending = migrations_pending()
        checks["migrations"] = {"ok": not pending, "pending": pending[:20]}
        limit = settings.READY_QUEUE_MAX_AGE_SECONDS
        if limit:
            for name, (waiting, _running, age) in queue_state().items():
                checks[f"queue:{name}"] = {
                    "ok": age <= limit,
                    "waiting": waiting,
                    "oldest_age_seconds": round(age, 1),
                    "max_age_seconds": limit,
                }
    except DatabaseError as exc:
        logger.warning("readiness: database unavailable (%s)", exc.__class__.__name__)
        checks["database"] = {"ok": False, "error": exc.__class__.__name__}
    ready = all(check["ok"] for check in checks.values())
    return ready, checks


def readyz(request: HttpRequest) -> HttpResponse:
    ready, checks = readiness()
    body = {"status": "ok" if ready else "fail", "failed": [name for name, c in checks.items() if not c["ok"]]}
    return JsonResponse({**body, "checks": checks}, status=200 if ready else 503)


@functools.cache
def allowed_networks(values: tuple[str, ...]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """``METRICS_ALLOWED_IPS`` parsed; an entry that is no address or network allows nothing (the
    production checks name it: core.E142)."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            continue
    return networks


def metrics_allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    scheme, _, presented = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in allowed_networks(tuple(settings.METRICS_ALLOWED_IPS)))


def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_allowed(request):
        return JsonResponse({"error": "metrics need a bearer token or an allowed address"}, status=403)
    return HttpResponse(metrics_render(), content_type=CONTENT_TYPE_LATEST)


ROUTES: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": healthz,
    "/readyz": readyz,
    "/metrics": metrics,
}


class HealthMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = ROUTES.get(request.path_info.rstrip("/"))
        if view is None:
            return self.get_response(request)
        return view(request)
