from django.db import migrations

NAME = "payouts.tick"


def create(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={"func": "payouts.tasks.payouts_tick", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("payouts", "0001_initial"),
        ("django_q", "0018_task_success_index"),
    ]
    operations = [migrations.RunPython(create, remove)]
