"""Every interval schedule (the every-minute and every-five-minute sweeps) runs on the ``ticks``
cluster (settings.Q_CLUSTER ALT_CLUSTERS), whose queue holds nothing else, so stale-claim
recovery and the other sweeps run on time whatever the money, notice and webhook queues hold.
Each is told the time it was due (``core.queue.tick``), so a late copy returns at once. Here, in
the app migrated last, because the schedules are created by the migrations of every app."""

from django.db import migrations

CLUSTER = "ticks"
INTENDED = "intended"


def forward(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.filter(schedule_type="I").update(cluster=CLUSTER, intended_date_kwarg=INTENDED)


def backward(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.filter(schedule_type="I", cluster=CLUSTER).update(cluster=None, intended_date_kwarg=None)


class Migration(migrations.Migration):
    dependencies = [
        ("payouts", "0012_payout_queued_at"),
        ("django_q", "0018_task_success_index"),
        ("core", "0002_schedules"),  # the webhook and retention ticks are core's
        ("campaigns", "0017_campaign_vop_policy"),
        ("recipients", "0012_renormalise_emails"),
        ("reconciliation", "0016_bank_reports_confirmations"),
    ]
    operations = [migrations.RunPython(forward, backward)]
