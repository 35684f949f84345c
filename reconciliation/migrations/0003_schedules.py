"""Register the books' recurring tasks with django-q2 (idempotent: keyed by name)."""

from django.db import migrations

SCHEDULES = [
    # name, func, schedule type, minutes
    ("ledger: expire due holds", "reconciliation.tasks.holds_expire_task", "I", 5),
    ("ledger: verify the books", "reconciliation.tasks.ledger_verify_task", "D", None),
]


def create(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for name, func, kind, minutes in SCHEDULES:
        Schedule.objects.update_or_create(
            name=name, defaults={"func": func, "schedule_type": kind, "minutes": minutes, "repeats": -1}
        )


def remove(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.filter(name__in=[s[0] for s in SCHEDULES]).delete()


class Migration(migrations.Migration):
    dependencies = [("reconciliation", "0002_ledger_invariants"), ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more")]
    operations = [migrations.RunPython(create, remove)]
