"""The cross-object audit view also lists payout batches' staff actions (payouts 0003): a pain.001
file built, approved by a second person (four-eyes) and every download of it, and its expiry, each
with who, when and why; the object is the batch (``batch``, its id), the data carries its MsgId,
count, control sum and currency (a download also the sha256 of the bytes handed out).

The selects of 0008 stay as they were, one more is appended. PostgreSQL replaces the view in place
(grants on it stay; ``kind`` and ``reason`` are cast so every column keeps its type); SQLite cannot,
and drops it first."""

import importlib

from django.db import migrations

_0008 = importlib.import_module("core.migrations.0008_audit_trail_bank_actions")

BATCHES = (
    "SELECT 'batch:' || e.id AS uid, 'batch' AS object_type, e.batch_id AS object_id, {kind} AS kind, "
    "e.actor_id AS actor_id, {reason} AS reason, e.data AS data, e.created_at AS created_at "
    "FROM payouts_payoutbatchevent e"
)


def replace_view(with_batches: bool):
    def run(apps, schema_editor):
        postgresql = schema_editor.connection.vendor == "postgresql"
        select = _0008.EVENTS + " UNION ALL " + (_0008.BANK_POSTGRESQL if postgresql else _0008.BANK_SQLITE)
        if with_batches:
            cast = {"kind": "e.kind::varchar", "reason": "e.reason::varchar"} if postgresql else {}
            select += " UNION ALL " + BATCHES.format(kind=cast.get("kind", "e.kind"), reason=cast.get("reason", "e.reason"))
        with schema_editor.connection.cursor() as cursor:
            if postgresql:
                cursor.execute(f"CREATE OR REPLACE VIEW core_audittrail AS {select}")
            else:
                cursor.execute("DROP VIEW IF EXISTS core_audittrail")
                cursor.execute(f"CREATE VIEW core_audittrail AS {select}")

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0008_audit_trail_bank_actions"),
        ("payouts", "0003_batch_events_audited"),
    ]

    operations = [migrations.RunPython(replace_view(with_batches=True), replace_view(with_batches=False))]
