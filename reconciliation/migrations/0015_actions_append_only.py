"""Reconciliation actions become an audit table like the event tables (core.audit_sql): append-only
and hash-chained per statement line in PostgreSQL, existing rows chained in id order. A write-off
decision is now its own row (``decides`` → the request), so the four-eyes step needs no UPDATE.
On SQLite only the column and the constraint exist, as for the other audit tables."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from core.audit_sql import install_sql, uninstall_sql
from reconciliation.audit import RECONCILIATION_ACTIONS


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # No parameters: the SQL's '%' (RAISE formats) must reach PostgreSQL as written.
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(install_sql(RECONCILIATION_ACTIONS))


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(uninstall_sql(RECONCILIATION_ACTIONS))


class Migration(migrations.Migration):
    dependencies = [
        ("reconciliation", "0014_local_booking_days_uetr_amount_mismatch"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="reconciliationaction",
            name="decides",
            field=models.OneToOneField(
                blank=True,
                help_text="The write-off request this row decides; one decision per request.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="decision",
                to="reconciliation.reconciliationaction",
            ),
        ),
        migrations.AlterField(
            model_name="reconciliationaction",
            name="status",
            field=models.CharField(
                choices=[
                    ("done", "Done"),
                    ("pending_approval", "Requested: a second person decides"),
                    ("approved", "Approved and executed"),
                    ("rejected", "Rejected"),
                ],
                default="done",
                max_length=20,
            ),
        ),
        migrations.AddConstraint(
            model_name="reconciliationaction",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("decides__isnull", True),
                    models.Q(
                        ("approved_by__isnull", False),
                        ("decided_at__isnull", False),
                        ("kind", "write_off"),
                        ("status__in", ["approved", "rejected"]),
                    ),
                    _connector="OR",
                ),
                name="action_decision_is_a_decided_write_off",
            ),
        ),
        migrations.RunPython(install, uninstall),
    ]
