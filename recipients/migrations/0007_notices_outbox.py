"""The notice outbox (``recipients.models_notices``) and its every-minute sweep."""

import django.db.models.deletion
from django.db import migrations, models

SWEEP = "recipients.notices_send_due"


def sweep_schedule_create(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=SWEEP,
        defaults={"func": "recipients.tasks.notices_send_due_task", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def sweep_schedule_remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SWEEP).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('campaigns', '0014_drop_ingest_requests'),
        ('payouts', '0005_claim_tasks_moved'),
        ('recipients', '0006_bank_accounts_beyond_iban'),
        ('django_q', '0018_task_success_index'),
    ]

    operations = [
        migrations.CreateModel(
            name='Notice',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=120, unique=True)),
                ('kind', models.CharField(choices=[('paid', 'Payout settled'), ('failed', 'Payout failed'), ('returned', 'Payout came back'), ('account_changed', 'Payout account changed'), ('iban_needed', 'IBAN needed'), ('claim_link', 'Claim link (reward earned elsewhere)'), ('reminder', 'Reminder: unclaimed money'), ('expired', 'Unclaimed money returned')], max_length=20)),
                ('data', models.JSONField(blank=True, default=dict, help_text='Amounts, codes and dates the text needs; no PII.')),
                ('status', models.CharField(choices=[('pending', 'Being delivered'), ('done', 'Done (every channel sent or failed)')], default='pending', max_length=8)),
                ('next_attempt_at', models.DateTimeField()),
                ('created_at', models.DateTimeField()),
                ('done_at', models.DateTimeField(blank=True, null=True)),
                ('payout', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='notices', to='payouts.payout')),
                ('person', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='notices', to='recipients.person')),
                ('reward', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='notices', to='campaigns.reward')),
            ],
        ),
        migrations.CreateModel(
            name='NoticeDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('channel', models.CharField(choices=[('email', 'E-mail'), ('whatsapp', 'WhatsApp')], max_length=10)),
                ('status', models.CharField(choices=[('queued', 'Queued (due at next_attempt_at)'), ('sending', 'Being sent (claimed)'), ('sent', 'Sent'), ('failed', 'Failed for good')], default='queued', max_length=8)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('claimed_at', models.DateTimeField(blank=True, null=True)),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('provider_message_id', models.CharField(blank=True, default='', max_length=200)),
                ('error_code', models.CharField(blank=True, default='', max_length=40)),
                ('error', models.CharField(blank=True, default='', max_length=200)),
                ('notice', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='deliveries', to='recipients.notice')),
            ],
            options={
                'verbose_name_plural': 'notice deliveries',
            },
        ),
        migrations.AddIndex(
            model_name='notice',
            index=models.Index(condition=models.Q(('status', 'pending')), fields=['next_attempt_at'], name='notice_pending_idx'),
        ),
        migrations.AddIndex(
            model_name='notice',
            index=models.Index(fields=['person', 'id'], name='notice_person_idx'),
        ),
        migrations.AddIndex(
            model_name='notice',
            index=models.Index(condition=models.Q(('reward__isnull', False)), fields=['reward', 'kind'], name='notice_reward_idx'),
        ),
        migrations.AddIndex(
            model_name='notice',
            index=models.Index(condition=models.Q(('payout__isnull', False)), fields=['payout'], name='notice_payout_idx'),
        ),
        migrations.AddConstraint(
            model_name='notice',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['paid', 'failed', 'returned', 'account_changed', 'iban_needed', 'claim_link', 'reminder', 'expired'])), name='notice_kind_valid'),
        ),
        migrations.AddConstraint(
            model_name='notice',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'done'])), name='notice_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='notice',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('done_at__isnull', True), ('status', 'pending')), models.Q(('done_at__isnull', False), ('status', 'done')), _connector='OR'), name='notice_done_has_time'),
        ),
        migrations.AddConstraint(
            model_name='noticedelivery',
            constraint=models.UniqueConstraint(fields=('notice', 'channel'), name='notice_delivery_once_per_channel'),
        ),
        migrations.AddConstraint(
            model_name='noticedelivery',
            constraint=models.CheckConstraint(condition=models.Q(('channel__in', ['email', 'whatsapp'])), name='notice_delivery_channel_valid'),
        ),
        migrations.AddConstraint(
            model_name='noticedelivery',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'sending', 'sent', 'failed'])), name='notice_delivery_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='noticedelivery',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status', 'sent'), _negated=True), ('sent_at__isnull', False), _connector='OR'), name='notice_delivery_sent_has_time'),
        ),
        migrations.AddConstraint(
            model_name='noticedelivery',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status', 'sending'), _negated=True), ('claimed_at__isnull', False), _connector='OR'), name='notice_delivery_sending_claimed'),
        ),
        migrations.AddConstraint(
            model_name='noticedelivery',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status', 'queued'), _negated=True), ('next_attempt_at__isnull', False), _connector='OR'), name='notice_delivery_queued_due'),
        ),
        migrations.RunPython(sweep_schedule_create, sweep_schedule_remove),
    ]
