"""Audit tables append-only and hash-chained per stream (core.audit_sql), the seal table, and the
cross-object view. On SQLite only the view and the seal table exist, as for the ledger's rules."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from core.audit_sql import SEAL_GUARD_SQL, SEAL_UNGUARD_SQL, install_sql, uninstall_sql
from core.migrations._audit_0004 import AUDIT_TABLES

VIEW = " UNION ALL ".join(
    f"SELECT '{t.label}:' || id AS uid, '{t.label}' AS object_type, {t.stream} AS object_id, kind, actor_id, "
    f"{t.reason or chr(39) * 2} AS reason, {t.data} AS data, created_at FROM {t.table}"
    for t in AUDIT_TABLES
)


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # No parameters: the SQL's '%' (RAISE formats) must reach PostgreSQL as written.
    with schema_editor.connection.cursor() as cursor:
        for spec in AUDIT_TABLES:
            cursor.execute(install_sql(spec))
        cursor.execute(SEAL_GUARD_SQL)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(SEAL_UNGUARD_SQL)
        for spec in AUDIT_TABLES:
            cursor.execute(uninstall_sql(spec))


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0003_ops_roles"),
        ("campaigns", "0013_webhook_delivery_queued"),
        ("payouts", "0002_payouts_tick_schedule"),
        ("recipients", "0004_people_per_brand"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditSeal",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created_at", models.DateTimeField()),
                (
                    "tables",
                    models.JSONField(help_text="table → {max_id, count, digest}: every row up to max_id, as sealed."),
                ),
                ("prev_hash", models.CharField(blank=True, default="", max_length=64)),
                ("seal_hash", models.CharField(max_length=64, unique=True)),
            ],
        ),
        migrations.CreateModel(
            name="AuditTrail",
            fields=[
                ("uid", models.CharField(max_length=40, primary_key=True, serialize=False)),
                ("object_type", models.CharField(max_length=10)),
                ("object_id", models.BigIntegerField()),
                ("kind", models.CharField(max_length=40)),
                ("reason", models.TextField()),
                ("data", models.JSONField()),
                ("created_at", models.DateTimeField()),
                (
                    "actor",
                    models.ForeignKey(
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "audit event",
                "verbose_name_plural": "audit trail",
                "db_table": "core_audittrail",
                "ordering": ["-created_at", "-uid"],
                "managed": False,
            },
        ),
        migrations.RunPython(install, uninstall),
        migrations.RunSQL(f"CREATE VIEW core_audittrail AS {VIEW}", "DROP VIEW IF EXISTS core_audittrail"),
    ]
