from django.db import migrations

NAME = "reconciliation: match new statement lines"


def create(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={
            "func": "reconciliation.tasks.statement_lines_match_sweep_task",
            "schedule_type": "I",
            "minutes": 5,
            "repeats": -1,
        },
    )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("reconciliation", "0004_bank_statements")]
    operations = [migrations.RunPython(create, remove)]
