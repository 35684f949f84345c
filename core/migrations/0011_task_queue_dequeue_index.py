"""The index django-q2's ORM broker needs to dequeue: it reads ``key = <cluster> AND lock < now``
on every poll of every cluster. Without it each poll is a sequential scan of the whole queue
(thousands of rows under a hot campaign), and the rows come back in no order; with it they come
in lock order, the oldest waiting task first."""

from django.db import migrations, models

INDEX = models.Index(fields=["key", "lock"], name="ormq_key_lock_idx")


def create(apps, schema_editor):
    schema_editor.add_index(apps.get_model("django_q", "OrmQ"), INDEX)


def remove(apps, schema_editor):
    schema_editor.remove_index(apps.get_model("django_q", "OrmQ"), INDEX)


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0010_roles_audit_trail_and_notices"),
        ("django_q", "0018_task_success_index"),
    ]
    operations = [migrations.RunPython(create, remove)]
