"""The read replica (``DATABASE_REPLICA_URL``): opt-in, and only for reads marked lag-tolerant.

A streaming standby is behind the primary by a moment that grows with load: in a measurement 249
of 300 rows just written were not yet on the standby at the first read. So there is no router that
sends reads there by default. A read goes to the replica only when its call site says, through
``lag_tolerant(queryset)``, that a few seconds' lag changes nothing it decides — the portal's
dashboard, the CSV exports, the admin's change lists of the big tables
(``LagTolerantChangelist``). Never a read that decides money or state: payouts, rewards, the
ledger, caps and fraud checks, and the webhook collector, whose snapshot horizon read on a standby
would skip rows of writers still running on the primary, all read the primary.

``lag_tolerant`` keeps a read on the primary when:

- no replica is configured (without ``DATABASE_REPLICA_URL`` there is no ``replica`` alias and
  nothing changes);
- it is called inside a transaction: the caller reads its own writes or one snapshot;
- the request is a write (POST, PUT, PATCH, DELETE), or the same browser sent one within
  ``DATABASE_REPLICA_PIN_SECONDS`` (``ReadAfterWriteMiddleware``): a brand that has just funded a
  campaign or an ops user who has just run an action sees the result on the next page, whatever
  the lag. Any unsafe request pins, whether it wrote or not: a statement sniffer would miss the
  writes made by SQL functions and CTEs, and pinning a request that wrote nothing costs only a few
  seconds of reads on the primary.

The pin is a cookie holding only the moment it ends (no personal data, nothing to sign: forging it
only moves the sender's own reads). It covers the browser that wrote; another user, or a partner
whose API call wrote, may see the change a moment late on a lag-tolerant page, which is what
lag-tolerant means.
"""

import time
from contextvars import ContextVar
from typing import TypeVar

from django.conf import settings
from django.contrib.admin.views.main import ChangeList
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

REPLICA = "replica"
PIN_COOKIE = "joyback_primary_until"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Q = TypeVar("Q", bound=QuerySet)

_primary_only: ContextVar[bool] = ContextVar("replica_primary_only", default=False)


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


def lag_tolerant(queryset: Q) -> Q:
    """``queryset`` read from the replica when one is configured and this read may lag: not in a
    transaction, not in or just after a write by this browser (module docstring). Call it where
    the query is built; where it runs later (a streamed CSV) the choice made here holds."""
    if not replica_configured() or _primary_only.get():
        return queryset
    if connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return queryset
    return queryset.using(REPLICA)


def _pinned_by_cookie(request: HttpRequest, now: float) -> bool:
    try:
        return float(request.COOKIES.get(PIN_COOKIE, "")) > now
    except ValueError:
        return False


class ReadAfterWriteMiddleware:
    """Keeps a browser's lag-tolerant reads on the primary during its writes and for
    ``DATABASE_REPLICA_PIN_SECONDS`` after each. Installed only with a replica configured."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        now = time.time()
        writes = request.method not in SAFE_METHODS
        token = _primary_only.set(writes or _pinned_by_cookie(request, now))
        try:
            response = self.get_response(request)
        finally:
            _primary_only.reset(token)
        if writes:
            seconds = settings.DATABASE_REPLICA_PIN_SECONDS
            response.set_cookie(
                PIN_COOKIE,
                f"{now + seconds:.3f}",
                max_age=seconds,
                httponly=True,
                samesite="Lax",
                secure=request.is_secure(),
            )
        return response


class _LagTolerantChangeList(ChangeList):
    def get_queryset(self, request: HttpRequest, exclude_parameters=None) -> QuerySet:
        queryset = super().get_queryset(request, exclude_parameters)
        if request.method not in SAFE_METHODS:
            return queryset
        # The root queryset also gives the unfiltered count ("N total"): a scan of the whole table.
        self.root_queryset = lag_tolerant(self.root_queryset)
        return lag_tolerant(queryset)


class LagTolerantChangelist:
    """A ModelAdmin mixin for the big tables: the change list page (a GET) reads its rows and
    counts from the replica. The change form, the delete page, autocompletes and actions (POSTs:
    their selection is read again on the primary) never do, so nothing is decided or edited on
    what a standby shows."""

    def get_changelist(self, request: HttpRequest, **kwargs) -> type[ChangeList]:
        return _LagTolerantChangeList
