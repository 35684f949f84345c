"""How much the database grows per trigger event, measured on the database as it is (issue 30).

Every table's bytes on disk (``pg_total_relation_size``: the heap, its indexes and its TOAST) and
rows are divided by the trigger events it holds, and projected to a day and a year at a given
rate, once as if nothing were ever deleted and once with the retention purge keeping only the
last ``RETENTION_*_DAYS`` of the tables it deletes from (``core.retention``; the kinds that blank
fields keep their rows, so they count as kept). Only the tables that grow with events are projected:
those with at least ``min_rows_per_event`` rows per event (0.25 by default); the others (brands,
campaigns, users, permissions, cursors) are listed with their size, projected at 0. A table's bytes
include its fixed cost (an empty table with three indexes is ~40 kB) and the dead rows its updates
left until a vacuum reuses them, so the figures mean something only on a database with thousands
of events: measure after a benchmark or a seeded run, never on an empty one.

PostgreSQL only: the sizes are PostgreSQL's. Reads only (a count per table)."""

from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import connection

from campaigns.models import TriggerEvent
from core.exceptions import InvalidInput
from core.personal_data import DELETE, personal_data

DAYS_PER_YEAR = 365


@dataclass(frozen=True)
class TableSize:
    table: str
    rows: int
    bytes: int  # heap + indexes + TOAST
    heap_bytes: int
    index_bytes: int
    toast_bytes: int
    rows_per_event: float
    bytes_per_event: float
    grows: bool  # grows with events (projected); False: a fixed table, projected at 0
    retention_days: int | None  # None: kept for ever (or only blanked)
    bytes_per_day: int
    bytes_per_year: int
    bytes_per_year_with_retention: int


@dataclass(frozen=True)
class SizingReport:
    events: int
    events_per_day: int
    tables: list[TableSize]

    @property
    def total(self) -> dict:
        growing = [t for t in self.tables if t.grows]
        return {
            "rows": sum(t.rows for t in self.tables),
            "bytes": sum(t.bytes for t in self.tables),
            "fixed_bytes": sum(t.bytes for t in self.tables if not t.grows),
            "rows_per_event": round(sum(t.rows_per_event for t in growing), 3),
            "bytes_per_event": round(sum(t.bytes_per_event for t in growing), 1),
            "bytes_per_day": sum(t.bytes_per_day for t in self.tables),
            "bytes_per_year": sum(t.bytes_per_year for t in self.tables),
            "bytes_per_year_with_retention": sum(t.bytes_per_year_with_retention for t in self.tables),
        }

    def as_dict(self) -> dict:
        return {
            "events": self.events,
            "events_per_day": self.events_per_day,
            "tables": [asdict(t) for t in self.tables],
            "total": self.total,
        }


def _retention_days() -> dict[str, int]:
    """Table → days kept, for the tables the retention purge deletes from."""
    return {
        entry.model._meta.db_table: getattr(settings, entry.retention.setting, entry.retention.default_days)
        for entry in personal_data()
        if entry.retention is not None and entry.retention.purge == DELETE
    }


def data_sizing_measure(*, events_per_day: int, min_rows_per_event: float = 0.25) -> SizingReport:
    """Measure every table of the current database per trigger event and project those that grow
    with events at ``events_per_day``. Tables without rows are left out. Raises InvalidInput on a database that
    is not PostgreSQL or holds no trigger event (nothing to divide by)."""
    if connection.vendor != "postgresql":
        raise InvalidInput("sizing measures PostgreSQL's relation sizes", code="sizing_needs_postgresql")
    if events_per_day <= 0:
        raise InvalidInput("events per day must be positive", code="sizing_rate_invalid")
    events = TriggerEvent.objects.count()
    if not events:
        raise InvalidInput("no trigger events to measure against", code="sizing_no_events")
    kept = _retention_days()
    tables = []
    with connection.cursor() as cursor:
        for table in sorted(connection.introspection.table_names(cursor)):
            quoted = connection.ops.quote_name(table)
            cursor.execute(f"SELECT count(*) FROM {quoted}")  # noqa: S608 - a name from the catalogue, quoted
            (rows,) = cursor.fetchone()
            if not rows:
                continue
            cursor.execute(
                "SELECT pg_total_relation_size(c.oid), pg_relation_size(c.oid), pg_indexes_size(c.oid) "
                "FROM pg_class c WHERE c.oid = %s::regclass",
                [quoted],
            )
            total, heap, indexes = cursor.fetchone()
            per_event = total / events
            grows = rows / events >= min_rows_per_event
            per_day = round(per_event * events_per_day) if grows else 0
            days = kept.get(table)
            stored_days = min(days, DAYS_PER_YEAR) if days is not None else DAYS_PER_YEAR
            tables.append(
                TableSize(
                    table=table,
                    rows=rows,
                    bytes=total,
                    heap_bytes=heap,
                    index_bytes=indexes,
                    toast_bytes=total - heap - indexes,
                    rows_per_event=round(rows / events, 3),
                    bytes_per_event=round(per_event, 1),
                    grows=grows,
                    retention_days=days,
                    bytes_per_day=per_day,
                    bytes_per_year=per_day * DAYS_PER_YEAR,
                    bytes_per_year_with_retention=per_day * stored_days,
                )
            )
    tables.sort(key=lambda t: (not t.grows, -t.bytes, t.table))
    return SizingReport(events=events, events_per_day=events_per_day, tables=tables)
