"""``rows_insert``: ``bulk_create`` for hot paths, through COPY on PostgreSQL.

Django's ``bulk_create`` spends most of its time preparing each value of each object in Python
and the driver more in quoting them into one statement; for a thousand rows of a dozen columns
that is more than the database's own work. On PostgreSQL this reserves the primary keys from the
table's sequence in one query and streams the rows with COPY (binary-driver adaptation, no SQL
text). Row triggers and constraints run exactly as for INSERT, so nothing the database enforces
is bypassed. Elsewhere (SQLite) it is ``bulk_create``.

Only for plain models: no multi-table inheritance, an integer auto primary key, and values that
are already what the column stores (``pre_save`` runs, so ``auto_now_add`` works; JSON fields
are serialised here). Signals are not sent, as with ``bulk_create``.
"""

import enum
import functools
import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import TypeVar

import psycopg
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, models, router, transaction
from django.db.models import QuerySet
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from psycopg.types.json import Jsonb

M = TypeVar("M", bound=models.Model)

# Below this many rows one INSERT (one round trip) beats COPY (two, plus the id reservation).
COPY_FROM = 8


def rows_insert(model: type[M], objs: Sequence[M]) -> list[M]:
    """Insert ``objs`` (new, unsaved) and set their primary keys; returns them in order."""
    objs = list(objs)
    if connection.vendor != "postgresql" or len(objs) < COPY_FROM:
        return model.objects.bulk_create(objs)
    meta = model._meta
    pk = meta.pk
    fields = [f for f in meta.concrete_fields if f is not pk]
    table = connection.ops.quote_name(meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
            [meta.db_table, pk.column, len(objs)],
        )
        ids = [row[0] for row in cursor.fetchall()]
        for obj, pk_value in zip(objs, ids, strict=True):
            setattr(obj, pk.attname, pk_value)
        columns = ", ".join(connection.ops.quote_name(f.column) for f in [pk, *fields])
        # Per row: one attrgetter for every column, then only the columns that need more — the
        # fields whose pre_save does something (auto_now_add) and the JSON ones. A field-by-field
        # pre_save() was most of this function's time.
        read = operator.attrgetter(*(f.attname for f in [pk, *fields]))
        computed = [(at, f) for at, f in enumerate(fields, 1) if _pre_save_computes(f)]
        json_at = [(at, _dumps(f)) for at, f in enumerate(fields, 1) if isinstance(f, models.JSONField)]
        # The raw driver cursor, so errors are wrapped by hand: callers catch IntegrityError.
        with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for obj in objs:
                # A TextChoices member as itself would be written by its name: its value is.
                row = [v.value if isinstance(v, enum.Enum) else v for v in read(obj)]
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


def model_new(model: type[M], **values) -> M:
    """``model(**values)`` for the hot paths' new rows, without ``Model.__init__``'s per-field
    keyword handling (a fifth of a bulk ingest's Python): ``values`` go straight into the
    instance, the other fields take their defaults as there, and a related object given by field
    name (``person=…``) sets its id and is cached as the descriptor would. Falls back to
    ``model(**values)`` when anything listens for ``pre_init``/``post_init``. Keys must be field
    names or attnames of concrete fields; anything else is a TypeError, as it would be there."""
    blueprint = _blueprint(model)
    if blueprint.signalled():
        return model(**values)
    obj = model.__new__(model)
    state = obj._state = ModelState()
    data = obj.__dict__
    data.update(blueprint.defaults)
    for attname, default in blueprint.called:
        data[attname] = default()
    cache = state.fields_cache
    for name, value in values.items():
        relation = blueprint.relations.get(name)
        if relation is not None:
            attname, target, reverse = relation
            cache[name] = value
            if value is None:
                data[attname] = None
                continue
            data[attname] = getattr(value, target)
            if state.db is None:  # the descriptor's choice: where the related object lives
                state.db = router.db_for_write(model, instance=value)
            if reverse is not None:  # one-to-one: the other side knows too
                reverse.set_cached_value(value, obj)
        elif name in blueprint.attnames:
            data[name] = value
        else:
            raise TypeError(f"{model.__name__}() got unexpected keyword arguments: '{name}'")
    return obj


@dataclass(frozen=True)
class _Blueprint:
    model: type[models.Model]
    defaults: dict  # attname → the field's default, for fields whose default is not callable
    called: list  # (attname, get_default) for callable and database defaults: one per instance
    relations: dict  # field name → (attname, the target field's attname, one-to-one's reverse or None)
    attnames: frozenset

    def signalled(self) -> bool:
        return pre_init.has_listeners(self.model) or post_init.has_listeners(self.model)


@functools.cache
def _blueprint(model: type[models.Model]) -> _Blueprint:
    defaults, called, relations = {}, [], {}
    for f in model._meta.concrete_fields:
        if (f.has_default() and callable(f.default)) or f.has_db_default():
            called.append((f.attname, f.get_default))
        else:
            defaults[f.attname] = f.get_default()
        if f.is_relation:
            relations[f.name] = (f.attname, f.target_field.attname, f.remote_field if f.one_to_one else None)
    attnames = frozenset(f.attname for f in model._meta.concrete_fields)
    return _Blueprint(model, defaults, called, relations, attnames)


def rows_copy(model: type[models.Model], names: Sequence[str], rows: Sequence[Sequence]) -> None:
    """Insert plain rows — values for the fields ``names`` (attnames: ``person_id``), the other
    fields taking their model defaults — without building model objects or reading ids back:
    for audit and link rows nobody reads in the same breath. COPY on PostgreSQL, ``bulk_create``
    elsewhere."""
    if not rows:
        return
    meta = model._meta
    by_attname = {f.attname: f for f in meta.concrete_fields}
    given = [by_attname[name] for name in names]
    rest = [f for f in meta.concrete_fields if f is not meta.pk and f.attname not in names]
    now = timezone.now()
    defaults = [
        now if getattr(f, "auto_now_add", False) or getattr(f, "auto_now", False) else f.get_default() for f in rest
    ]
    if connection.vendor != "postgresql" or len(rows) < COPY_FROM:
        model.objects.bulk_create(
            [
                model(
                    **dict(zip(names, row, strict=True)), **{f.attname: d for f, d in zip(rest, defaults, strict=True)}
                )
                for row in rows
            ]
        )
        return
    json_at = [i for i, f in enumerate(given) if isinstance(f, models.JSONField)]
    dumps_at = {i: _dumps(given[i]) for i in json_at}
    fixed = [
        Jsonb(d, dumps=_dumps(f)) if isinstance(f, models.JSONField) and d is not None else _plain(d)
        for f, d in zip(rest, defaults, strict=True)
    ]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in [*given, *rest])
    table = connection.ops.quote_name(meta.db_table)
    with (
        connection.cursor() as cursor,
        connection.wrap_database_errors,
        cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,  # noqa: S608 - names from the model
    ):
        for row in rows:
            values = [_plain(v) for v in row]
            for i in json_at:
                if values[i] is not None:
                    values[i] = Jsonb(values[i], dumps=dumps_at[i])
            copy.write_row([*values, *fixed])


def ids_reserve(wanted: Sequence[tuple[type[models.Model], int]]) -> list[list[int]]:
    """Primary keys for rows to insert later, drawn from each table's sequence in one query
    (PostgreSQL). With the keys known up front, dependent INSERTs need no RETURNING and can go
    to the server together (``statements_run``). Unused keys are gaps, as after any rollback."""
    parts, params = [], []
    for model, n in wanted:
        parts.append("ARRAY(SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s))")
        params += [model._meta.db_table, model._meta.pk.column, n]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(parts)}", params)
        return [list(ids) for ids in cursor.fetchone()]


def insert_statement(model: type[models.Model], objs: Sequence[models.Model], *, keys: bool = True) -> tuple[str, list]:
    """``INSERT … VALUES`` for ``objs``, values prepared exactly as ``save`` prepares them; no
    RETURNING. With ``keys`` their primary keys are set (``ids_reserve``); without, the database
    assigns them (rows nobody refers to). No objects, no statement: ``("", [])``."""
    if not objs:
        return "", []
    conn = connections[DEFAULT_DB_ALIAS]  # not the proxy: it looks the connection up on every use
    plan = _insert_plan(model, keys, conn.vendor)
    params = []
    for obj in objs:
        for value, field, (plain, wrap) in zip(plan.read(obj), plan.fields, plan.preparation, strict=True):
            if plain is not None and (value is None or type(value) is plain):
                params.append(value if wrap is None or value is None else wrap(value))
            else:
                params.append(field.get_db_prep_save(field.pre_save(obj, add=True), conn))
    return f"{plan.head} {', '.join([plan.row] * len(objs))}", params


@dataclass(frozen=True)
class _InsertPlan:
    head: str  # INSERT INTO table (columns) VALUES
    row: str  # (%s, %s, …)
    fields: list
    read: Callable  # obj -> the fields' attribute values
    # Per field: (the exact type whose values pass as they are, or None: always the field's own
    # preparation; what wraps them). For a plain str, int, bool or None in a text, integer,
    # boolean or integer-keyed relation field, get_db_prep_save returns the value itself, or an
    # integer wrapped in the backend's sized type (psycopg's Int4/Int8: a prepared statement's
    # parameter types stay the same). Field-by-field preparation was most of a single event's
    # INSERT building.
    preparation: list


@functools.cache
def _insert_plan(model: type[models.Model], keys: bool, vendor: str) -> _InsertPlan:
    conn = connections[DEFAULT_DB_ALIAS]
    pk = model._meta.pk
    fields = [f for f in model._meta.concrete_fields if keys or f is not pk]
    columns = ", ".join(conn.ops.quote_name(f.column) for f in fields)
    table = conn.ops.quote_name(model._meta.db_table)
    return _InsertPlan(
        head=f"INSERT INTO {table} ({columns}) VALUES",  # noqa: S608 - names from the model
        row="(" + ", ".join(["%s"] * len(fields)) + ")",
        fields=fields,
        read=lambda obj, _get=operator.attrgetter(*(f.attname for f in fields)): _as_tuple(_get(obj), len(fields)),
        preparation=[_preparation(f, conn) for f in fields],
    )


def _as_tuple(values, n: int) -> tuple:
    return values if n > 1 else (values,)


def _preparation(field: models.Field, conn) -> tuple[type | None, Callable | None]:
    if _pre_save_computes(field):
        return None, None
    target = field.target_field if field.is_relation else field
    if field.is_relation and not isinstance(field, models.ForeignKey):
        return None, None
    if isinstance(target, models.IntegerField):
        sized = getattr(conn.ops, "integerfield_type_map", {}).get(target.get_internal_type())
        return int, sized
    if field.is_relation:  # a non-integer key: its own preparation
        return None, None
    if isinstance(target, models.BooleanField):
        return bool, None
    if type(target) in (models.CharField, models.TextField):
        return str, None
    return None, None


def statements_run(statements: Sequence[tuple[str, list]], *, savepoint: str = "") -> None:
    """Run several statements in one round trip (``_pipelined``), in order, in the caller's
    transaction; the first refusal raises as usual. With ``savepoint`` they run inside one (in the
    same round trip): a refusal rolls back to it, leaving the caller's transaction usable. One by
    one, in a savepoint, on other databases."""
    statements = [(sql, params) for sql, params in statements if sql]
    if not statements:
        return
    if connection.vendor != "postgresql":
        with transaction.atomic(), connection.cursor() as cursor:
            for sql, params in statements:
                cursor.execute(sql, params)
        return
    name = connection.ops.quote_name(savepoint) if savepoint else ""
    if name:
        statements = [(f"SAVEPOINT {name}", []), *statements, (f"RELEASE SAVEPOINT {name}", [])]
    try:
        _pipelined(statements)
    except DatabaseError:
        if name:
            _pipelined([(f"ROLLBACK TO SAVEPOINT {name}", []), (f"RELEASE SAVEPOINT {name}", [])])
        raise


Read = tuple["QuerySet | tuple[str, Sequence]", "Callable[[list[tuple]], None] | None"]


def queries_run(reads: Sequence[Read]) -> None:
    """Run several reads — QuerySets (``values_list``, not flat) or ``(sql, params)`` — in
    order and hand each one's rows to its parser (None: rows ignored, e.g. a lock). On
    PostgreSQL they travel in one round trip (``_pipelined``); each statement still starts after
    the one before it finished, so a lock taken by one is held when the next reads. Elsewhere
    each runs on its own. A read whose query is None is skipped."""
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
    compiled = [query.query.sql_with_params() if isinstance(query, QuerySet) else query for query, _ in reads]
    for rows, (_, parse) in zip(_pipelined(compiled), reads, strict=True):
        if parse is not None:
            parse(rows)


def _pipelined(statements: Sequence[tuple[str, Sequence]]) -> list[list[tuple]]:
    """Send statements in psycopg's pipeline mode — one round trip, then one sync — each as a
    server-side prepared statement (planned once per connection, not per event; the statements
    of the hot paths repeat with the same text). Returns each one's rows. Errors are Django's;
    the first refusal stops the rest and aborts the transaction, as usual.

    Not Django's cursor, so ``execute_wrapper`` hooks and query capture do not see these."""
    connection.ensure_connection()
    raw = connection.connection
    cursors = [psycopg.Cursor(raw) for _ in statements]
    try:
        with connection.wrap_database_errors:
            with raw.pipeline():
                for cursor, (sql, params) in zip(cursors, statements, strict=True):
                    cursor.execute(sql, params or None, prepare=True)
            # Rows or none by the result's status: ``description`` would build a Column object
            # for every column of every result (fifty for an event with its reward) to say so.
            return [cursor.fetchall() if _has_rows(cursor) else [] for cursor in cursors]
    finally:
        for cursor in cursors:
            cursor.close()


def _has_rows(cursor: psycopg.Cursor) -> bool:
    result = cursor.pgresult
    return result is not None and result.status == psycopg.pq.ExecStatus.TUPLES_OK


def any_of(column: str, values) -> tuple[str, list]:
    """``column`` matches one of ``values``: ``= ANY(%s)`` with one array parameter on PostgreSQL
    (the statement's text does not change with the count, so its prepared plan is reused),
    ``IN (%s, …)`` elsewhere."""
    values = list(values)
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [values]
    if not values:
        return "1 = 0", []
    return f"{column} IN ({', '.join(['%s'] * len(values))})", values


def as_datetime(value):
    """A timestamp from a raw row: PostgreSQL gives aware datetimes, SQLite naive ones or text,
    both in UTC (how Django stores them there)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


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


def model_columns(model: type[models.Model], alias: str) -> str:
    """Every concrete column of ``model`` as ``alias."column"``, in ``model_from_row``'s order: the
    select list of a join whose rows are cut into instances. Built once per model and alias (it
    is on every ingested event's path)."""
    return _model_columns(model, alias, connection.vendor)


@functools.cache
def _model_columns(model: type[models.Model], alias: str, vendor: str) -> str:
    return ", ".join(f"{alias}.{connection.ops.quote_name(f.column)}" for f in model._meta.concrete_fields)


def model_from_row(model: type[M], row: Sequence) -> M:
    """The instance the ORM would make of a row of ``model_columns`` (each field's converters run)."""
    plan = _plan(model)
    values = list(row)
    for i, col, converters in plan.converters:
        for converter in converters:
            values[i] = converter(values[i], col, plan.wrapper)
    return model.from_db(plan.wrapper.alias, plan.attnames, values)


@dataclass(frozen=True)
class _ModelPlan:
    attnames: list[str]
    converters: list[tuple]  # (index, column, converters) for the fields that have any
    wrapper: object  # the DatabaseWrapper the converters were asked of


def _plan(model) -> _ModelPlan:
    """What ``model_from_row`` needs of ``model``, worked out once per connection (converters may
    be bound to it): it runs for every ingested event."""
    wrapper = connections[DEFAULT_DB_ALIAS]  # not the proxy: it looks the connection up on every use
    plans = wrapper.__dict__.setdefault("_bulk_model_plans", {})
    plan = plans.get(model)
    if plan is None:
        fields = model._meta.concrete_fields
        converters = []
        for i, f in enumerate(fields):
            col = f.get_col(model._meta.db_table)
            found = wrapper.ops.get_db_converters(col) + f.get_db_converters(wrapper)
            if found:
                converters.append((i, col, found))
        plan = plans[model] = _ModelPlan(
            attnames=[f.attname for f in fields],
            converters=converters,
            wrapper=wrapper,
        )
    return plan
