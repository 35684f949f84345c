from django.db import migrations

SCHEDULES = {
    "campaigns.webhooks_tick": "campaigns.webhook_tasks.webhook_tick_task",
    "core.tick": "core.tasks.core_tick_task",
}


def create(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for name, func in SCHEDULES.items():
        Schedule.objects.update_or_create(
            name=name, defaults={"func": func, "schedule_type": "I", "minutes": 1, "repeats": -1}
        )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name__in=list(SCHEDULES)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0001_initial"),
        ("django_q", "0018_task_success_index"),
    ]
    operations = [migrations.RunPython(create, remove)]
