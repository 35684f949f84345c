"""Payout batches get an audit table (``PayoutBatchEvent``): building, four-eyes approval, every
download and the expiry of a pain.001 file, each with who, when and why. Until now approval and
download were only columns of the editable batch row. Existing batches get their events from those
columns (built by ``created_by`` at ``created_at``, approved, downloaded), then PostgreSQL makes the
table append-only and hash-chained per batch (``core.audit_sql``), chaining them in id order. On
SQLite only the table exists, as for the other audit tables."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from core.audit_sql import install_sql, uninstall_sql
from payouts.audit import PAYOUT_BATCH_EVENTS


def backfill(apps, schema_editor):
    PayoutBatch = apps.get_model("payouts", "PayoutBatch")
    PayoutBatchEvent = apps.get_model("payouts", "PayoutBatchEvent")
    events = []
    for batch in PayoutBatch.objects.order_by("id").iterator():
        facts = {"batch": batch.batch_id, "count": batch.count, "control_sum_minor": batch.control_sum_minor}
        facts["currency"] = batch.currency
        events.append(
            PayoutBatchEvent(
                batch=batch, kind="batch.built", actor_id=batch.created_by_id, data=facts, created_at=batch.created_at
            )
        )
        if batch.approved_at:
            events.append(
                PayoutBatchEvent(
                    batch=batch,
                    kind="batch.approved",
                    actor_id=batch.approved_by_id,
                    reason="Four-eyes approval (recorded before batch events existed)",
                    data={**facts, "created_by": batch.created_by_id},
                    created_at=batch.approved_at,
                )
            )
        if batch.downloaded_at:
            events.append(
                PayoutBatchEvent(
                    batch=batch,
                    kind="batch.downloaded",
                    actor_id=batch.downloaded_by_id,
                    reason="First download (recorded before batch events existed)",
                    data={**facts, "first": True},
                    created_at=batch.downloaded_at,
                )
            )
    PayoutBatchEvent.objects.bulk_create(events, batch_size=1000)


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # No parameters: the SQL's '%' (RAISE formats) must reach PostgreSQL as written.
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(install_sql(PAYOUT_BATCH_EVENTS))


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(uninstall_sql(PAYOUT_BATCH_EVENTS))


class Migration(migrations.Migration):

    dependencies = [
        ('payouts', '0002_payouts_tick_schedule'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='PayoutBatchEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=40)),
                ('reason', models.TextField(blank=True, default='')),
                ('data', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField()),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('batch', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='events', to='payouts.payoutbatch')),
            ],
            options={
                'indexes': [models.Index(fields=['batch', 'id'], name='payout_batch_event_batch_idx')],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.RunPython(install, uninstall),
    ]
