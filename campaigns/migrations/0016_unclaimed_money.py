"""Unclaimed money: a campaign's claim window, the reward's ``expired`` status with its entry (the
CHECKs that tie them), and the ``reward.expired`` webhook type."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('campaigns', '0015_drop_claim_link_notice'),
        ('recipients', '0008_claim_link_notices_into_outbox'),
        ('reconciliation', '0015_actions_append_only'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='reward',
            name='reward_status_valid',
        ),
        migrations.RemoveConstraint(
            model_name='reward',
            name='reward_status_entries_coherent',
        ),
        migrations.RemoveConstraint(
            model_name='reward',
            name='reward_paid_has_payout_ref',
        ),
        migrations.RemoveConstraint(
            model_name='webhookevent',
            name='webhook_event_type_valid',
        ),
        migrations.AddField(
            model_name='campaign',
            name='claim_window_days',
            field=models.PositiveIntegerField(blank=True, help_text="Days a person has to give a bank account once a reward is owed to them (3 to 3650); reminded after a third and two thirds, then the money goes back to the campaign (the brand's funds once closed). Empty: it waits for ever.", null=True),
        ),
        migrations.AddField(
            model_name='reward',
            name='expiry_entry',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='reconciliation.journalentry'),
        ),
        migrations.AlterField(
            model_name='reward',
            name='status',
            field=models.CharField(choices=[('review', 'In review (reserved)'), ('held', 'Held (reserved, maturing)'), ('payable', 'Payable'), ('paid', 'Paid'), ('voided', 'Voided'), ('clawed_back', 'Clawed back'), ('expired', 'Expired (unclaimed, money returned)')], max_length=12),
        ),
        migrations.AddConstraint(
            model_name='campaign',
            constraint=models.CheckConstraint(condition=models.Q(('claim_window_days__isnull', True), models.Q(('claim_window_days__gte', 3), ('claim_window_days__lte', 3650)), _connector='OR'), name='campaign_claim_window_range'),
        ),
        migrations.AddConstraint(
            model_name='reward',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['review', 'held', 'payable', 'paid', 'voided', 'clawed_back', 'expired'])), name='reward_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='reward',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(models.Q(('clawback_entry__isnull', True), ('commit_entry__isnull', True), ('status__in', ['review', 'held', 'voided'])), models.Q(('clawback_entry__isnull', True), ('commit_entry__isnull', False), ('status__in', ['payable', 'paid'])), models.Q(('clawback_entry__isnull', False), ('commit_entry__isnull', False), ('status', 'clawed_back')), models.Q(('clawback_entry__isnull', True), ('commit_entry__isnull', False), ('status', 'expired')), _connector='OR'), models.Q(models.Q(('expiry_entry__isnull', False), ('status', 'expired')), models.Q(models.Q(('status', 'expired'), _negated=True), ('expiry_entry__isnull', True)), _connector='OR')), name='reward_status_entries_coherent'),
        ),
        migrations.AddConstraint(
            model_name='reward',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('payout_ref__gt', ''), ('status', 'paid')), ('status', 'expired'), models.Q(models.Q(('status__in', ['paid', 'expired']), _negated=True), ('payout_ref', '')), _connector='OR'), name='reward_paid_has_payout_ref'),
        ),
        migrations.AddConstraint(
            model_name='reward',
            constraint=models.UniqueConstraint(condition=models.Q(('expiry_entry__isnull', False)), fields=('expiry_entry',), name='reward_expiry_entry_unique'),
        ),
        migrations.AddConstraint(
            model_name='webhookevent',
            constraint=models.CheckConstraint(condition=models.Q(('type__in', ('reward.held', 'reward.payable', 'reward.voided', 'reward.expired', 'payout.submitted', 'payout.settled', 'payout.failed', 'payout.returned', 'campaign.paused', 'campaign.budget_threshold', 'topup.received'))), name='webhook_event_type_valid'),
        ),
    ]
