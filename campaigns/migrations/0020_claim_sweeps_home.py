"""The claim flow's sweeps are campaigns' work (the claim pages moved to ``web``): the schedules
that name their tasks follow. Schedules only: a queued copy of one of them fails to import and the
next run, a minute or five later, does its work."""

from django.db import migrations

MOVED = {
    "payouts.claim.tasks.video_views_poll_task": "campaigns.tasks.video_views_poll_task",
    "payouts.claim.tasks.claim_links_send_due_task": "campaigns.tasks.claim_links_send_due_task",
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
        ("campaigns", "0019_plans_seed"),
        ("payouts", "0005_claim_tasks_moved"),
    ]

    operations = [migrations.RunPython(forward, backward)]
