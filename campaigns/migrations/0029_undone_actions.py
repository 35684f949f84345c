"""Undone actions (issue 29): a campaign's undo settings, a reward's undone reason and re-check
state, the withdrawals platforms report, and the every-minute re-check before maturing (on the
``ticks`` cluster, told the time it was due, as every interval schedule is since payouts 0013)."""

from django.conf import settings
from django.db import migrations, models

RECHECK_SCHEDULE = "campaigns.rewards_recheck"


def schedule_create(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=RECHECK_SCHEDULE,
        defaults={
            "func": "campaigns.tasks.rewards_recheck_task",
            "schedule_type": "I",
            "minutes": 1,
            "repeats": -1,
            "cluster": "ticks",
            "intended_date_kwarg": "intended",
        },
    )


def schedule_remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=RECHECK_SCHEDULE).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('campaigns', '0028_trigger_event_order_index'),
        ('recipients', '0013_paypal_destinations'),
        ('reconciliation', '0017_platform_account_statement_format'),
        ("django_q", "0018_task_success_index"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ActionWithdrawal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('platform', models.CharField(max_length=20)),
                ('kind', models.CharField(choices=[('content_removed', 'The video was deleted or made private'), ('views_dropped', "The video's views fell below the threshold"), ('authorization_revoked', 'The TikTok authorization was revoked'), ('optin_withdrawn', 'The WhatsApp opt-in was withdrawn')], max_length=24)),
                ('account', models.CharField(help_text='Keyed fingerprint of the platform account.', max_length=64)),
                ('occurred_at', models.DateTimeField()),
                ('ref', models.CharField(help_text="The platform's reference of the notice (no personal data).", max_length=200)),
                ('data', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name='campaign',
            name='undo_void_authorization_revoked',
            field=models.BooleanField(default=True, help_text='TikTok tells us at once; the pending rewards of that account are voided.', verbose_name='Void when the person removes our access to their TikTok account'),
        ),
        migrations.AddField(
            model_name='campaign',
            name='undo_void_content_removed',
            field=models.BooleanField(default=True, help_text='Checked with the platform before the reward matures.', verbose_name='Void when the video is deleted or made private'),
        ),
        migrations.AddField(
            model_name='campaign',
            name='undo_void_optin_withdrawn',
            field=models.BooleanField(default=True, help_text="A STOP sent before the reward matures voids the opt-in's reward.", verbose_name='Void when the person withdraws their WhatsApp opt-in (STOP)'),
        ),
        migrations.AddField(
            model_name='campaign',
            name='undo_void_views_dropped',
            field=models.BooleanField(default=True, help_text='Checked with the platform before the reward matures.', verbose_name="Void when the views fall below the rule's threshold"),
        ),
        migrations.AddField(
            model_name='reward',
            name='recheck_after',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='reward',
            name='recheck_failures',
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='reward',
            name='rechecked_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='reward',
            name='undone_reason',
            field=models.CharField(blank=True, choices=[('content_removed', 'The video was deleted or made private'), ('views_dropped', "The video's views fell below the threshold"), ('authorization_revoked', 'The TikTok authorization was revoked'), ('optin_withdrawn', 'The WhatsApp opt-in was withdrawn')], default='', max_length=24),
        ),
        migrations.AddConstraint(
            model_name='reward',
            constraint=models.CheckConstraint(condition=models.Q(('undone_reason', ''), models.Q(('status', 'voided'), ('undone_reason__in', ['content_removed', 'views_dropped', 'authorization_revoked', 'optin_withdrawn'])), _connector='OR'), name='reward_undone_only_voided'),
        ),
        migrations.AddIndex(
            model_name='actionwithdrawal',
            index=models.Index(fields=['platform', 'account', 'occurred_at'], name='action_withdrawal_account_idx'),
        ),
        migrations.AddConstraint(
            model_name='actionwithdrawal',
            constraint=models.UniqueConstraint(fields=('platform', 'kind', 'ref'), name='action_withdrawal_once'),
        ),
        migrations.AddConstraint(
            model_name='actionwithdrawal',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['content_removed', 'views_dropped', 'authorization_revoked', 'optin_withdrawn'])), name='action_withdrawal_kind_valid'),
        ),
        migrations.RunPython(schedule_create, schedule_remove),
    ]
