"""The claim pages moved from recipients to payouts (the app that may import all the others):
the schedules that name their tasks follow."""

from django.db import migrations

MOVED = {
    "recipients.claim.tasks.video_views_poll_task": "payouts.claim.tasks.video_views_poll_task",
    "recipients.claim.tasks.claim_links_send_due_task": "payouts.claim.tasks.claim_links_send_due_task",
}


def forward(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for old, new in MOVED.items():
        Schedule.objects.filter(func=old).update(func=new)


def backward(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for old, new in MOVED.items():
        Schedule.objects.filter(func=new).update(func=old)


class Migration(migrations.Migration):
    dependencies = [
        ("payouts", "0004_batch_expiry"),
        ("campaigns", "0006_claim_links_and_schedules"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [migrations.RunPython(forward, backward)]
