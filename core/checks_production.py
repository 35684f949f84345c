"""System checks for running on real infrastructure: the connection pooler, the shared cache and
who may read ``/metrics``. Beside ``core.checks`` (what production must never fake) and run the
same way: ``manage.py check``, ``migrate`` and the WSGI start-up (``refuse_unsafe_start`` runs
every registered check).

- The pooler check runs everywhere: behind PgBouncer in transaction mode a named cursor or a
  prepared statement made in one transaction is gone in the next (``cursor "_django_curs_…" does
  not exist``, ``prepared statement "_pg3_0" already exists``), whatever the environment.
- The replica check (``DATABASE_REPLICA_URL``) too, as warnings: a replica that is the primary
  itself, or that looks like a PgBouncer (port 6432, a host named so) without the pooler's flags.
- The others only where ``PRODUCTION_CHECKS`` is on: without ``CACHE_URL`` every process counts
  rate limits on its own, so four gunicorn workers on two nodes let eight times the limit through;
  and an open ``/metrics`` tells anyone the queue depths and payout volumes.
"""

import ipaddress

from django.conf import settings
from django.core import checks

from core.checks import production_checks_on
from core.replica import REPLICA

MIN_METRICS_TOKEN_LENGTH = 24


@checks.register(checks.Tags.database, deploy=False)
def pooler_safety(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if getattr(settings, "DATABASE_POOLER", "") != "pgbouncer":
        return []
    problems = []
    for alias, database in settings.DATABASES.items():
        if not database.get("ENGINE", "").endswith("postgresql"):
            continue
        if not database.get("DISABLE_SERVER_SIDE_CURSORS"):
            problems.append(
                checks.Error(
                    f"DATABASE_POOLER=pgbouncer but DATABASES[{alias!r}] keeps server-side cursors: every "
                    ".iterator() (exports, erasure, admin lists) would fail in transaction mode.",
                    hint=f"Set DATABASES[{alias!r}]['DISABLE_SERVER_SIDE_CURSORS'] = True "
                    "(config.settings.base.database_from_url does it for DATABASE_POOLER=pgbouncer).",
                    id="core.E140",
                )
            )
        if database.get("OPTIONS", {}).get("prepare_threshold") is not None:
            problems.append(
                checks.Error(
                    f"DATABASE_POOLER=pgbouncer but DATABASES[{alias!r}] prepares statements: they collide "
                    "on PgBouncer's shared server connections (prepared statement already exists).",
                    hint=f"Set DATABASES[{alias!r}]['OPTIONS']['prepare_threshold'] = None.",
                    id="core.E140",
                )
            )
    return problems


PGBOUNCER_PORT = "6432"


def _where(database: dict) -> tuple[str, str, str]:
    return (database.get("HOST") or "localhost", str(database.get("PORT") or "5432"), database.get("NAME") or "")


@checks.register(checks.Tags.database, deploy=False)
def replica_safety(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """``DATABASE_REPLICA_URL`` (core.replica): warnings only, the replica never decides anything."""
    replica = settings.DATABASES.get(REPLICA)
    if replica is None or not replica.get("ENGINE", "").endswith("postgresql"):
        return []
    problems = []
    if _where(replica) == _where(settings.DATABASES["default"]):
        problems.append(
            checks.Warning(
                "DATABASE_REPLICA_URL names the primary itself: the lag-tolerant reads gain nothing.",
                hint="Point DATABASE_REPLICA_URL at a streaming standby, or unset it.",
                id="core.W145",
            )
        )
    host, port, _name = _where(replica)
    looks_pooled = port == PGBOUNCER_PORT or "pgbouncer" in host.lower()
    prepares = replica.get("OPTIONS", {}).get("prepare_threshold") is not None
    pooler_safe = replica.get("DISABLE_SERVER_SIDE_CURSORS") and not prepares
    if looks_pooled and not pooler_safe:
        problems.append(
            checks.Warning(
                f"DATABASE_REPLICA_URL looks like a PgBouncer ({host}:{port}) but keeps server-side cursors or "
                "prepared statements: in transaction mode the exports' .iterator() and prepared statements fail.",
                hint="Add ?pgbouncer=1 to DATABASE_REPLICA_URL (or set DATABASE_POOLER=pgbouncer).",
                id="core.W146",
            )
        )
    return problems


@checks.register(checks.Tags.security, deploy=False)
def infrastructure_safety(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    problems = _metrics_addresses()
    if not production_checks_on():
        return problems
    if not getattr(settings, "CACHE_URL", ""):
        problems.append(
            checks.Error(
                "CACHE_URL is not set: every web process would count rate limits on its own, so each "
                "process and node multiplies the API and claim-page limits.",
                hint="Set CACHE_URL=redis://host:6379/0 (shared by every web node).",
                id="core.E143",
            )
        )
    token = getattr(settings, "METRICS_TOKEN", "")
    if token and len(token) < MIN_METRICS_TOKEN_LENGTH:
        problems.append(
            checks.Error(
                f"METRICS_TOKEN is under {MIN_METRICS_TOKEN_LENGTH} characters.",
                hint="Set METRICS_TOKEN to python -c 'import secrets; print(secrets.token_urlsafe(32))'.",
                id="core.E141",
            )
        )
    if not token and not getattr(settings, "METRICS_ALLOWED_IPS", []):
        problems.append(
            checks.Error(
                "/metrics has neither METRICS_TOKEN nor METRICS_ALLOWED_IPS: nobody could scrape it.",
                hint="Set METRICS_TOKEN (Prometheus sends it as a bearer token) or METRICS_ALLOWED_IPS "
                "(the scraper's addresses or networks).",
                id="core.E141",
            )
        )
    return problems


def _metrics_addresses() -> list[checks.CheckMessage]:
    problems = []
    for value in getattr(settings, "METRICS_ALLOWED_IPS", []):
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            problems.append(
                checks.Error(
                    f"METRICS_ALLOWED_IPS has {value!r}, which is no address or network.",
                    hint="Set METRICS_ALLOWED_IPS to comma-separated addresses or networks (10.0.0.0/8).",
                    id="core.E142",
                )
            )
    return problems


@checks.register(checks.Tags.security, deploy=False)
def trusted_proxies(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    problems = []
    for value in getattr(settings, "TRUSTED_PROXY_IPS", []):
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            problems.append(
                checks.Error(
                    f"TRUSTED_PROXY_IPS has {value!r}, which is no address or network.",
                    hint="Set TRUSTED_PROXY_IPS to the load balancers' addresses or networks, comma-separated.",
                    id="core.E144",
                )
            )
    return problems
