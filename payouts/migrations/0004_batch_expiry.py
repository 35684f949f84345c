"""A pain.001 batch nobody downloaded within PAYOUT_BATCH_EXPIRE_DAYS expires (status ``expired``):
its payouts fail back to payable and are paid again in a new file, and the stale file can no longer
be approved, downloaded or answered. The CHECKs accept the status (an expired file needing approval
may have none: it never left), and a daily schedule runs the sweep (payouts.tasks)."""

from django.conf import settings
from django.db import migrations, models

NAME = "payouts.batches_expire"


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME,
        defaults={"func": "payouts.tasks.payout_batches_expire_task", "schedule_type": "D", "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('payouts', '0003_batch_events_audited'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='payoutbatch',
            name='payout_batch_status_valid',
        ),
        migrations.RemoveConstraint(
            model_name='payoutbatch',
            name='payout_batch_approved_before_download',
        ),
        migrations.AlterField(
            model_name='payoutbatch',
            name='status',
            field=models.CharField(choices=[('built', 'Built'), ('downloaded', 'Downloaded'), ('accepted', 'Accepted by the bank'), ('rejected', 'Rejected by the bank'), ('expired', 'Expired (never downloaded)')], default='built', max_length=12),
        ),
        migrations.AddConstraint(
            model_name='payoutbatch',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['built', 'downloaded', 'accepted', 'rejected', 'expired'])), name='payout_batch_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='payoutbatch',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['built', 'expired']), ('requires_approval', False), ('approved_at__isnull', False), _connector='OR'), name='payout_batch_approved_before_download'),
        ),
        migrations.RunPython(schedule, unschedule),
    ]
