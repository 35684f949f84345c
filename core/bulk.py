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
import json
from collections.abc import Sequence
from typing import TypeVar

from django.db import connection, models
from psycopg.types.json import Jsonb

M = TypeVar("M", bound=models.Model)


def rows_insert(model: type[M], objs: Sequence[M]) -> list[M]:
    """Insert ``objs`` (new, unsaved) and set their primary keys; returns them in order."""
    objs = list(objs)
    if connection.vendor != "postgresql" or len(objs) < 8:
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
        json_fields = {f.attname for f in fields if isinstance(f, models.JSONField)}
        columns = ", ".join(connection.ops.quote_name(f.column) for f in [pk, *fields])
        # The raw driver cursor, so errors are wrapped by hand: callers catch IntegrityError.
        with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for obj in objs:
                row = [getattr(obj, pk.attname)]
                for field in fields:
                    value = field.pre_save(obj, add=True)
                    if field.attname in json_fields and value is not None:
                        value = Jsonb(value, dumps=_dumps(field))
                    elif isinstance(value, enum.Enum):  # a TextChoices member: the driver would write its name
                        value = value.value
                    row.append(value)
                copy.write_row(row)
    for obj in objs:
        obj._state.adding = False
        obj._state.db = "default"
    return objs


def _dumps(field: models.JSONField):
    encoder = field.encoder
    return (lambda value: json.dumps(value, cls=encoder)) if encoder else json.dumps
