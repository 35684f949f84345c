"""Migration campaigns 0022 takes the fee fields off Brand without changing any brand's fee: a
brand whose own fees differed from its plan's is put on a private copy of that plan with its
fees; purchase rules that were first-party become partner-attested."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from campaigns.models import Plan, RewardRule
from campaigns.selectors import brand_plan_current
from campaigns.services import campaign_create, rule_create
from tests.campaigns.factories import CAMPAIGN_START, BrandFactory, package

BEFORE = [("campaigns", "0021_campaign_allow_paypal")]


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    # Back to every app's latest: going back took with it what other apps built on these.
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_own_fees_become_a_private_plan_and_first_party_purchases_partner_attested():
    all_in_one = package("all-in-one")
    own = BrandFactory(name="Own Fees", slug="own-fees", plan=all_in_one)
    same = BrandFactory(name="Same Fees", slug="same-fees", plan=all_in_one)
    campaign = campaign_create(brand=own, name="Cash", slug="cash", mode="cashback", starts_at=CAMPAIGN_START)
    rule = rule_create(campaign=campaign, trigger="purchase", fixed_minor=500)
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE campaigns_brand SET fee_fixed_minor = 10, fee_bps = 100 WHERE id = %s", [own.pk])
            cursor.execute("UPDATE campaigns_brand SET fee_bps = 1000 WHERE id = %s", [same.pk])
            cursor.execute("UPDATE campaigns_rewardrule SET verification = 'first_party' WHERE id = %s", [rule.pk])
    finally:
        _migrate(None)

    private = brand_plan_current(brand=own)
    assert (private.slug, private.fee_fixed_minor, private.fee_bps, private.is_public) == (
        f"all-in-one-b{own.pk}",
        10,
        100,
        False,
    )
    assert private.triggers == all_in_one.triggers and private.name == "All-in-One (Own Fees)"
    assert brand_plan_current(brand=same) == all_in_one
    assert Plan.objects.filter(is_public=False, slug__startswith="all-in-one-").count() == 1
    assert RewardRule.objects.get(pk=rule.pk).verification == "partner_attested"
