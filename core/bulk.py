"""The ingestion's three measured speed tricks, fenced here (STYLE 15); everything else is the ORM.

``rows_insert``: the new rows of one table in one statement — COPY on PostgreSQL once a batch is
big enough, ``bulk_create`` otherwise. For a thousand rows of a dozen columns, ``bulk_create``
spends longer preparing each value in Python and quoting it into one statement than the database
spends storing it; COPY streams the rows with the driver's own adaptation and no SQL text. Row
triggers and constraints run exactly as for INSERT, so nothing the database enforces is
bypassed. Only for plain models: no multi-table inheritance, an integer auto primary key, and
values that are already what the column stores (``pre_save`` runs, so ``auto_now_add`` works;
JSON fields are serialised here). Signals are not sent, as with ``bulk_create``. Measured (A/B in
one run, bench.ab --n 2000, best of three, on a shared machine): with ``bulk_create`` instead,
bulk fell to 0.71x and bulk_2 to 0.30x.

``queries_run``: a batch's reads (ORM QuerySets, or SQL of the lock module) sent to PostgreSQL
at once in psycopg's pipeline mode, each a server-side prepared statement: one round trip, each
statement still starting after the one before it finished, so a lock taken by one is held when
the next reads. Ingestion sends its IBAN locks with every fact the rules need, then its campaign
locks with the counters. Measured the same way: with the reads sent one by one, bulk_2 (two bulk
callers) fell to 0.62x, the other phases within noise (single_1 1.03x, single_8 1.11x, bulk
0.96x); prepared plans also halved PostgreSQL's CPU per single event (6.9 against 12.9 ms).

``joined_models``: the two reads every request makes before anything else (the API key with its
brand; the campaign with its budget account and active rules) as one hand-joined SELECT whose
rows become instances as the ORM builds them (``Model.from_db`` after the fields' converters).
The ORM spent more Python compiling those wide models' queries than PostgreSQL spent answering
them. Measured (A/B in one run, bench.ab --n 2000 --api 2000, best of two, against the same code
reading through ``select_related`` and a second query): single_1 1.26x, single_8 1.13x, bulk
1.19x, api single 1.09x. A plain INSERT instead of ``bulk_create`` for a single event's rows was
tried the same way and dropped: single_1 1.04x, single_8 0.83x.
"""

import enum
import functools
import json
import operator
from collections.abc import Callable, Sequence
from typing import TypeVar

import psycopg
from django.db import connection, models
from django.db.models import QuerySet
from psycopg.types.json import Jsonb

M = TypeVar("M", bound=models.Model)

# Below this many rows one INSERT (one round trip) beats COPY (two, plus the key reservation).
COPY_FROM = 8


def rows_insert(model: type[M], objs: Sequence[M], *, keys: bool = True) -> list[M]:
    """Insert ``objs`` (new, unsaved) in order and return them. With ``keys`` their primary keys
    are set; without, the database numbers rows nobody refers to in the same breath (audit rows).
    Raises IntegrityError (and the other database errors) as ``bulk_create`` does."""
    objs = list(objs)
    if connection.vendor != "postgresql" or len(objs) < COPY_FROM:
        return model.objects.bulk_create(objs)
    meta = model._meta
    fields = [f for f in meta.concrete_fields if f is not meta.pk]
    if keys:
        fields.insert(0, meta.pk)
    for obj in objs:
        obj._prepare_related_fields_for_save(operation_name="bulk_create")  # a parent saved since it was set
    with connection.cursor() as cursor:
        if keys:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [meta.db_table, meta.pk.column, len(objs)],
            )
            for obj, (pk_value,) in zip(objs, cursor.fetchall(), strict=True):
                setattr(obj, meta.pk.attname, pk_value)
        columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        # One attrgetter for every column, then only the columns that need more: the fields whose
        # pre_save computes (auto_now_add) and the JSON ones.
        read = operator.attrgetter(*(f.attname for f in fields))
        computed = [(at, f) for at, f in enumerate(fields) if _pre_save_computes(f)]
        json_at = [(at, _dumps(f)) for at, f in enumerate(fields) if isinstance(f, models.JSONField)]
        table = connection.ops.quote_name(meta.db_table)
        # The raw driver cursor, so errors are wrapped by hand: callers catch IntegrityError.
        with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for obj in objs:
                values = read(obj)
                # A TextChoices member as itself would be written by its name: its value is.
                row = [_plain(v) for v in (values if len(fields) > 1 else (values,))]
                for at, field in computed:
                    row[at] = _plain(field.pre_save(obj, add=True))
                for at, dumps in json_at:
                    if row[at] is not None:
                        row[at] = Jsonb(row[at], dumps=dumps)
                copy.write_row(row)
    for obj in objs:
        obj._state.adding = False
        obj._state.db = "default"
    return objs


def _pre_save_computes(field: models.Field) -> bool:
    """Whether ``field.pre_save`` may return something other than the attribute's value."""
    if isinstance(field, models.DateField):  # DateTimeField too: only auto_now(_add) compute
        return field.auto_now or field.auto_now_add
    return type(field).pre_save is not models.Field.pre_save


def _plain(value):
    return value.value if isinstance(value, enum.Enum) else value


def _dumps(field: models.JSONField):
    encoder = field.encoder
    return (lambda value: json.dumps(value, cls=encoder)) if encoder else json.dumps


# A read: a QuerySet (``values_list``, not flat) or ``(sql, params)``, and what takes its rows
# (None: the rows are not wanted, e.g. a lock).
Read = tuple["QuerySet | tuple[str, Sequence] | None", "Callable[[list[tuple]], None] | None"]


def queries_run(reads: Sequence[Read]) -> None:
    """Run ``reads`` in order, in the caller's transaction, handing each one's rows to its
    parser; a read whose query is None is skipped. One round trip on PostgreSQL; elsewhere each
    runs on its own. The rows of a QuerySet are the database's, without Django's converters:
    read only columns the driver already hands back as Python wants them (numbers, text, times).
    Not Django's cursor: ``execute_wrapper`` hooks and query capture do not see these reads."""
    reads = [(query, parse) for query, parse in reads if query is not None]
    if not reads:
        return
    if connection.vendor != "postgresql":
        for query, parse in reads:
            if isinstance(query, QuerySet):
                rows = [tuple(row) for row in query]
            else:
                with connection.cursor() as cursor:
                    cursor.execute(*query)
                    rows = cursor.fetchall() if cursor.description else []
            if parse is not None:
                parse(rows)
        return
    statements = [query.query.sql_with_params() if isinstance(query, QuerySet) else query for query, _ in reads]
    connection.ensure_connection()
    raw = connection.connection
    cursors = [psycopg.Cursor(raw) for _ in statements]
    try:
        with connection.wrap_database_errors:
            with raw.pipeline():
                for cursor, (sql, params) in zip(cursors, statements, strict=True):
                    # Prepared once per connection: the hot paths' statements repeat with the same text.
                    cursor.execute(sql, params or None, prepare=True)
            # Rows or none by the result's status: ``description`` would build a Column object
            # for every column of every result to say so.
            results = [cursor.fetchall() if _has_rows(cursor) else [] for cursor in cursors]
    finally:
        for cursor in cursors:
            cursor.close()
    for rows, (_, parse) in zip(results, reads, strict=True):
        if parse is not None:
            parse(rows)


def _has_rows(cursor: psycopg.Cursor) -> bool:
    result = cursor.pgresult
    return result is not None and result.status == psycopg.pq.ExecStatus.TUPLES_OK


def joined_models(
    models: tuple[tuple[type[models.Model], str], ...], sql_from: str, params: Sequence
) -> list[list[models.Model | None]]:
    """``SELECT`` every column of each ``(model, alias)`` in turn, then ``sql_from`` (its FROM,
    joins, WHERE and ORDER BY, with ``%s`` for ``params``): each row's instances built as the ORM
    builds them (``Model.from_db`` after each field's converters), None where a LEFT JOIN found
    nothing. For the reads every event makes: one query instead of a select_related and a second
    query, and no compiling."""
    plans = [_hydration(model) for model, _ in models]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_select_list(models)} {sql_from}", params)
        rows = cursor.fetchall()
    out = []
    for row in rows:
        instances, start = [], 0
        for (model, _), (attnames, converters) in zip(models, plans, strict=True):
            values = list(row[start : start + len(attnames)])
            start += len(attnames)
            if values[0] is None:  # the primary key: no row joined
                instances.append(None)
                continue
            for i, col, found in converters:
                for converter in found:
                    values[i] = converter(values[i], col, connection)
            instances.append(model.from_db(connection.alias, attnames, values))
        out.append(instances)
    return out


@functools.cache
def _select_list(models: tuple[tuple[type[models.Model], str], ...]) -> str:
    return ", ".join(
        f"{alias}.{connection.ops.quote_name(f.column)}" for model, alias in models for f in model._meta.concrete_fields
    )


@functools.cache
def _hydration(model: type[models.Model]) -> tuple[list[str], list[tuple]]:
    """The attnames, in column order, and the converters of the fields that have any."""
    fields = model._meta.concrete_fields
    converters = []
    for i, f in enumerate(fields):
        col = f.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(col) + f.get_db_converters(connection)
        if found:
            converters.append((i, col, found))
    return [f.attname for f in fields], converters
