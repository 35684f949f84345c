from django.db import migrations


class Migration(migrations.Migration):
    """The hold's unique idempotency key also got a varchar_pattern_ops index (Django builds one
    for every unique CharField, for LIKE); nothing searches keys by pattern, and each index is
    written on every reservation. The unique index itself stays."""

    dependencies = [("reconciliation", "0008_posting_entry_checked_by_trigger")]

    operations = [
        migrations.RunSQL(
            'DROP INDEX IF EXISTS "reconciliation_hold_idempotency_key_16d9ca00_like"',
            reverse_sql=(
                'CREATE INDEX "reconciliation_hold_idempotency_key_16d9ca00_like" '
                'ON "reconciliation_hold" ("idempotency_key" varchar_pattern_ops)'
            ),
        )
    ]
