from django.db import migrations

NAME = "core.audit_verify"


def create(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME, defaults={"func": "core.tasks.audit_verify_task", "schedule_type": "D", "repeats": -1}
    )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0006_retention_schedule"),
        ("django_q", "0018_task_success_index"),
    ]
    operations = [migrations.RunPython(create, remove)]
