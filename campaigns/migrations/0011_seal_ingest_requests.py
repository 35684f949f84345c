from django.db import migrations, models


def seal_queued(apps, schema_editor):
    """Rows queued in clear before this: the waiting ones sealed, the failed / replayed ones
    emptied (their event is not read again). Normally there are none or a handful."""
    from recipients.crypto import encrypt

    IngestRequest = apps.get_model("campaigns", "IngestRequest")
    IngestRequest.objects.exclude(state="pending").update(prepared="")
    for pk, prepared in IngestRequest.objects.filter(state="pending", prepared__startswith="{").values_list(
        "pk", "prepared"
    ):
        IngestRequest.objects.filter(pk=pk).update(prepared=encrypt(prepared))


def unseal_queued(apps, schema_editor):
    """Back to clear JSON, so the column can become jsonb again."""
    from recipients.crypto import decrypt

    IngestRequest = apps.get_model("campaigns", "IngestRequest")
    IngestRequest.objects.exclude(state="pending").update(prepared="{}")
    for pk, prepared in IngestRequest.objects.filter(state="pending").exclude(prepared__startswith="{").values_list(
        "pk", "prepared"
    ):
        IngestRequest.objects.filter(pk=pk).update(prepared=decrypt(prepared))


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0010_webhook_cursor_snapshot"),
    ]

    operations = [
        migrations.AlterField(
            model_name="ingestrequest",
            name="prepared",
            field=models.TextField(help_text="The validated, normalised event (PreparedEvent), encrypted."),
        ),
        migrations.RunPython(seal_queued, unseal_queued),
    ]
