from django.db import migrations, models

# The collector's cursor rows exist from the start: enqueueing a collection is a conditional
# UPDATE of their queued_at (campaigns.webhooks.webhook_collect_enqueue), which needs a row.
SOURCES = ("reward_event", "campaign_event", "payout_event", "topup")


def cursors_create(apps, schema_editor):
    WebhookCursor = apps.get_model("campaigns", "WebhookCursor")
    for source in SOURCES:
        WebhookCursor.objects.get_or_create(source=source)


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0012_partial_entry_uniques"),
    ]

    operations = [
        migrations.AddField(
            model_name="webhookdelivery",
            name="queued_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="webhookcursor",
            name="queued_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(cursors_create, migrations.RunPython.noop),
    ]
