from django.db import migrations

NAME = "core.retention_purge"


def create(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME, defaults={"func": "core.tasks.retention_purge_task", "schedule_type": "D", "repeats": -1}
    )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0005_roles_export_person"),
        ("django_q", "0018_task_success_index"),
    ]
    operations = [migrations.RunPython(create, remove)]
