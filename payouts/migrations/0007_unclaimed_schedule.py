"""The daily sweep of unclaimed money (``payouts.tasks.rewards_unclaimed_task``)."""

from django.db import migrations

NAME = "payouts.unclaimed"


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME,
        defaults={"func": "payouts.tasks.rewards_unclaimed_task", "schedule_type": "D", "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("payouts", "0006_notifications_into_outbox"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
