"""The daily sweep of platform tokens no longer needed (``campaigns.tasks.platform_credentials_prune_task``)."""

from django.db import migrations

NAME = "campaigns.platform_credentials_prune"


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME,
        defaults={"func": "campaigns.tasks.platform_credentials_prune_task", "schedule_type": "D", "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0034_platform_credentials"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
