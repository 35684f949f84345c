"""Migration recipients 0004 gives every person row the brand that knew it and splits clusters
that merged people of two brands — without re-pointing any event or reward."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from campaigns.models import Reward, TriggerEvent
from core.exceptions import NotFound
from payouts.links import payout_link_find, payout_link_issue
from recipients.brand_people import brand_person_get
from recipients.models import Identifier, Person
from recipients.selectors import person_current_bank_account
from tests.api.conftest import LOGIN_500, ingest
from tests.campaigns.factories import BrandFactory, funded_campaign
from web.claim.services import PayoutDetails, claim_details_submit

IBAN = "DE89370400440532013000"
BEFORE = [("recipients", "0003_lean_indexes")]
AFTER = None  # through 0004 to recipients' latest migration: the code after it needs today's tables
# Going back to 0003 also unapplies the payouts and campaigns migrations that need a later
# recipients one (they drop tables that point at people): back to their latest too.
LATEST = ("recipients", "payouts", "campaigns")


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    latest = [node for node in executor.loader.graph.leaf_nodes() if node[0] in LATEST]
    executor.migrate(targets if targets is not None else latest)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_cluster_merged_across_brands_is_split_along_brands():
    joy = funded_campaign(brand=BrandFactory(name="Joy", slug="joy"), amount_minor=10_000, rules=[LOGIN_500])
    rival = funded_campaign(brand=BrandFactory(name="Rival", slug="rival"), amount_minor=10_000, rules=[LOGIN_500])
    older = ingest(joy, email="older@example.com").event
    younger = ingest(rival, email="younger@example.com").event
    rewards_before = dict(Reward.objects.values_list("id", "person_id"))
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:  # what the old resolver did when one event named both
            cursor.execute(
                "UPDATE recipients_person SET merged_into_id = %s, merged_at = now() WHERE id = %s",
                [older.person_id, younger.person_id],
            )
    finally:
        _migrate(AFTER)

    first, second = Person.objects.get(pk=older.person_id), Person.objects.get(pk=younger.person_id)
    assert (first.brand_id, first.merged_into_id) == (joy.brand_id, None)
    assert (second.brand_id, second.merged_into_id) == (rival.brand_id, None)
    assert set(Identifier.objects.filter(person=second).values_list("brand_id", flat=True)) == {rival.brand_id}
    assert dict(Reward.objects.values_list("id", "person_id")) == rewards_before
    assert TriggerEvent.objects.get(pk=younger.pk).person_id == younger.person_id


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_row_two_brands_knew_is_frozen_for_both_brands_and_open_to_its_own_claim_link():
    """The old resolver gave one row to a human two brands rewarded. Splitting it would move
    money, so it keeps no brand: neither brand's API finds or repoints it, and the person's own
    claim link still gives it an account."""
    joy = funded_campaign(brand=BrandFactory(name="Joy", slug="joy"), amount_minor=10_000, rules=[LOGIN_500])
    rival = funded_campaign(brand=BrandFactory(name="Rival", slug="rival"), amount_minor=10_000, rules=[LOGIN_500])
    shared = ingest(joy, email="both@example.com").event
    theirs = ingest(rival, email="rival-only@example.com")
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:  # the rival's event and reward on the same row, as before
            cursor.execute(
                "UPDATE campaigns_triggerevent SET person_id = %s WHERE id = %s", [shared.person_id, theirs.event.pk]
            )
            cursor.execute(
                "UPDATE campaigns_reward SET person_id = %s WHERE id = %s", [shared.person_id, theirs.reward.pk]
            )
    finally:
        _migrate(AFTER)

    person = Person.objects.get(pk=shared.person_id)
    assert person.brand_id is None
    for brand in (joy.brand, rival.brand):
        with pytest.raises(NotFound):
            brand_person_get(brand=brand, person_id=person.pk)
    reward = Reward.objects.get(pk=theirs.reward.pk)
    link = payout_link_find(token=payout_link_issue(reward_id=reward.pk))
    claim_details_submit(link=link, details=PayoutDetails("Both", "", "", IBAN), ip="")
    assert person_current_bank_account(person=person).iban() == IBAN
