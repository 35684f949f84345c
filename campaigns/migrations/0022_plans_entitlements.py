"""Entitlements (issue 28): fees come from the plan, a brand's month of usage, upgrade requests,
claim links for buyers of API-only plans, purchases never first-party, refund by order id.

Before the fee fields leave ``Brand``, every brand whose own fees differ from its current plan's
gets a private copy of that plan with its fees (``<plan>-<brand>``, not for sale), and its current
period points at it: the fees it paid until now were its own, so that is the truthful history,
and no brand's fee changes silently. Ops move it to a public plan in the admin when its terms
change. Purchase rules that were first-party (which refused every purchase a shop sent) become
partner-attested, which accepts everything first-party did and the shop's API calls too.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


PLAN_FIELDS = [
    "name", "name_it", "tagline", "tagline_it", "highlights", "highlights_it", "triggers", "channels",
    "monthly_actions", "monthly_payouts_minor", "monthly_fee_minor", "currency", "position",
]


def forward(apps, schema_editor):
    RewardRule = apps.get_model("campaigns", "RewardRule")
    RewardRule.objects.filter(trigger="purchase", verification="first_party").update(verification="partner_attested")
    Brand = apps.get_model("campaigns", "Brand")
    Plan = apps.get_model("campaigns", "Plan")
    BrandPlan = apps.get_model("campaigns", "BrandPlan")
    for brand in Brand.objects.order_by("id"):
        period = BrandPlan.objects.filter(brand=brand, ended_at__isnull=True).select_related("plan").first()
        if period is None:
            continue
        base = period.plan
        if (base.fee_fixed_minor, base.fee_bps) == (brand.fee_fixed_minor, brand.fee_bps):
            continue
        # One private plan per brand, named by its id: a slug made from names could collide with
        # another brand's private plan or a public one and hand this brand someone else's fees.
        own = Plan.objects.create(
            slug=f"{base.slug[:25]}-b{brand.pk}",
            **{name: getattr(base, name) for name in PLAN_FIELDS if name != "name"},
            name=f"{base.name} ({brand.name})"[:80],
            fee_fixed_minor=brand.fee_fixed_minor,
            fee_bps=brand.fee_bps,
            is_public=False,
        )
        BrandPlan.objects.filter(pk=period.pk).update(plan=own)


class Migration(migrations.Migration):

    dependencies = [
        ('campaigns', '0021_campaign_allow_paypal'),
        ('recipients', '0012_renormalise_emails'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(forward, migrations.RunPython.noop),
        migrations.CreateModel(
            name='BrandUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateField(help_text='The first day of the month.')),
                ('actions', models.PositiveIntegerField(default=0)),
                ('rewards_minor', models.BigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='UpgradeRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('message', models.TextField(blank=True, max_length=2000)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('handled_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='brand',
            name='brand_fee_fixed_not_negative',
        ),
        migrations.RemoveConstraint(
            model_name='brand',
            name='brand_fee_bps_at_most_100pct',
        ),
        migrations.RemoveField(
            model_name='brand',
            name='fee_bps',
        ),
        migrations.RemoveField(
            model_name='brand',
            name='fee_fixed_minor',
        ),
        migrations.AddField(
            model_name='campaign',
            name='buyer_claim_links',
            field=models.BooleanField(default=False, help_text='API-only plans: e-mail buyers a link to give their bank account when your shop sent none.', verbose_name='Claim links for buyers without a bank account'),
        ),
        migrations.AddConstraint(
            model_name='rewardrule',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('trigger', 'purchase'), _negated=True), models.Q(('verification', 'first_party'), _negated=True), _connector='OR'), name='rule_purchase_not_first_party'),
        ),
        migrations.AddField(
            model_name='brandusage',
            name='brand',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='usage_months', to='campaigns.brand'),
        ),
        migrations.AddField(
            model_name='upgraderequest',
            name='brand',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='upgrade_requests', to='campaigns.brand'),
        ),
        migrations.AddField(
            model_name='upgraderequest',
            name='current_plan',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='campaigns.plan'),
        ),
        migrations.AddField(
            model_name='upgraderequest',
            name='handled_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='upgraderequest',
            name='requested_by',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='upgraderequest',
            name='wanted_plan',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='campaigns.plan'),
        ),
        migrations.AddConstraint(
            model_name='brandusage',
            constraint=models.UniqueConstraint(fields=('brand', 'month'), name='brandusage_one_per_month'),
        ),
        migrations.AddConstraint(
            model_name='brandusage',
            constraint=models.CheckConstraint(condition=models.Q(('rewards_minor__gte', 0)), name='brandusage_rewards_not_negative'),
        ),
    ]
