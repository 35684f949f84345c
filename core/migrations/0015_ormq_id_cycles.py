"""django-q2's queue table (its ORM broker) never runs out of ids: its id sequence cycles.

django-q2 declares ``OrmQ.id`` an ``AutoField`` (``integer``): every enqueue takes an id and ids are
never reused, so after 2,147,483,647 enqueues ``nextval`` fails, and with it every enqueue and
every money change that enqueues in its transaction. At 100,000 events a day (about 1.5 queued
tasks each) that is decades away, but a tenfold growth and a few hot campaigns bring it within a
few years.

Widening the column to ``bigint`` (what issue 30 first asked for) does not work on its own: the
field stays an ``AutoField`` in Django, whose lookups treat a value past the 32-bit range as
matching nothing (``IntegerFieldOverflow``), so the broker's claim (``filter(id=…, lock=…)
.update(…)``) and acknowledgement (``filter(pk=…).delete()``) would silently skip every task with a
larger id: enqueued, never run. Making the field big in Django means changing django-q2's models,
which this project does not own (its migrations live in the package).

A queue needs no ever-growing key: a row lives from its enqueue to its acknowledgement, so the ids
in use at any moment are the last few thousand. The sequence therefore cycles back to 1 after
2,147,483,647; a row still waiting from 2^31 enqueues earlier (years of traffic; ``/readyz`` fails
after ``READY_QUEUE_MAX_AGE_SECONDS``) would make that one enqueue fail loudly on the primary key,
never run a task twice. Nothing orders by this id (the broker reads by ``(key, lock)``; task
results are keyed by django-q2's own text ids). No table rewrite, and only a brief lock on the
sequence. The other django-q2 tables need nothing: task results (``django_q_task``, successes
and failures alike) are keyed by a 32-character text id; schedules are a few rows updated in place.

PostgreSQL only: SQLite reuses the largest rowid plus one, 64-bit, and never runs out."""

from django.db import migrations


def _sequence_set(schema_editor, option: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence('django_q_ormq', 'id')")
        (sequence,) = cursor.fetchone()
        # The serial's sequence (installations from before Django 4.1) or the identity's: the same.
        cursor.execute(f"ALTER SEQUENCE {sequence} AS integer MAXVALUE 2147483647 {option}")


def cycle(apps, schema_editor):
    _sequence_set(schema_editor, "CYCLE")


def no_cycle(apps, schema_editor):
    _sequence_set(schema_editor, "NO CYCLE")


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0014_audit_trail_consent_events"),
        ("django_q", "0018_task_success_index"),
    ]
    operations = [migrations.RunPython(cycle, no_cycle)]
