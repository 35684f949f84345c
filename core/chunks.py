"""Reading a large table a chunk at a time, for scans that must see every row.

Django's ``.iterator()`` streams through a server-side cursor — unless server-side cursors are off,
as they must be behind PgBouncer in transaction mode (``DATABASE_POOLER``), where the cursor would
be gone by the next transaction. Then psycopg receives the whole result before the first row is
handed out: a scan of a table that grows with traffic holds all of it in memory. ``rows_by_key``
reads ``size`` rows per query in primary-key order instead, so memory stays bounded either way."""

from collections.abc import Iterator

from django.db.models import Model, QuerySet


def rows_by_key(queryset: QuerySet, *, size: int = 2000) -> Iterator[Model]:
    """Every row of ``queryset``, in primary-key order, ``size`` per query (each its own statement:
    rows written meanwhile behind the last key read are seen, rows deleted are not)."""
    ordered = queryset.order_by("pk")
    last = None
    while True:
        page = list((ordered if last is None else ordered.filter(pk__gt=last))[:size])
        yield from page
        if len(page) < size:
            return
        last = page[-1].pk
