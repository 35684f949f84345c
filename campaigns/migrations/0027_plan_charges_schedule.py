"""The daily charge of plans' monthly fees (``campaigns.tasks.plan_charges_task``)."""

from django.db import migrations

NAME = "campaigns.plan_charges"


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME,
        defaults={"func": "campaigns.tasks.plan_charges_task", "schedule_type": "D", "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0026_plan_charge"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
