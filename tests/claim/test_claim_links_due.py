"""Who is told where to give a bank account (``claim_links_send_due``): the people of a partner's
event whose cluster has no current account, batch after batch past the rewards passed over, within
a time budget, and with work that grows with the rewards, not with rewards × accounts."""

import json

import pytest
from django.db import connection
from django.utils import timezone

from campaigns.entitlements import claim_page_available, claim_page_available_q
from campaigns.models import Campaign, Reward
from campaigns.selectors import brand_plan_current
from campaigns.services import event_ingest, event_ingest_bulk
from campaigns.services.claim_links import claim_links_due, claim_links_send_due
from recipients.models import BankAccount, Notice, NoticeKind, Person
from recipients.selectors import person_current_bank_account
from recipients.services import person_set_iban
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign, package
from tests.recipients.factories import iban

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def shop(brand, **settings):
    funded_campaign(
        brand=brand,
        amount_minor=1_000_000,
        slug="shop",
        mode="cashback",
        rules=[{"trigger": "purchase", "fixed_minor": 100, "verification": "partner_attested"}],
        **settings,
    )
    return brand


def buy(brand, email: str, **fields) -> Reward:
    payload = event(campaign="shop", type="purchase", source="api", email=email, purchase_amount_minor=5000, **fields)
    return event_ingest(brand=brand, payload=payload).reward


def merge(person: Person, *, into: Person) -> None:
    Person.objects.filter(pk=person.pk).update(merged_into=into, merged_at=timezone.now())


def told() -> set[int]:
    return set(Notice.objects.filter(kind=NoticeKind.CLAIM_LINK).values_list("reward_id", flat=True))


def test_a_person_is_told_unless_someone_of_their_cluster_has_a_current_account():
    # given five buyers with no bank account of their own
    brand = shop(BrandFactory(name="Sole", slug="sole"))
    names = ("alone", "child", "root", "orphan", "old")
    alone, child, root, orphan, old = (buy(brand, f"{n}@example.com") for n in names)
    # child is merged into a root that has an account; root has a merged-in person with one; orphan's
    # root has none but a sibling has; old's only account is no longer current
    holder, giver, empty_root, sibling = (buy(brand, f"{n}@example.com").person for n in ("h", "g", "e", "s"))
    for n, person in enumerate((holder, giver, sibling, old.person)):
        person_set_iban(person=person, iban=iban("NL", n + 1), source="test")
    person_set_iban(person=old.person, iban=iban("NL", 9), source="test")
    old_account = person_current_bank_account(person=old.person)
    old_account.is_current = False
    old_account.save(update_fields=["is_current"])
    merge(child.person, into=holder)
    merge(giver, into=root.person)
    merge(orphan.person, into=empty_root)
    merge(sibling, into=empty_root)

    # when the links are sent
    claim_links_send_due()

    # then only those whose cluster has no current account are told, as the payout would see it
    assert told() == {alone.pk, old.pk}
    for reward in (alone, child, root, orphan, old):
        reward.person.refresh_from_db()
        assert (reward.pk in told()) == (person_current_bank_account(person=reward.person) is None)


def test_rewards_of_a_shop_with_no_claim_page_never_fill_a_batch():
    # given three rewards of a shop with no claim page (API-only plan), then one of a shop with one
    api_only = shop(BrandFactory(name="Api", slug="api", plan=package("cashback-api")))
    for n in range(3):
        buy(api_only, f"api{n}@example.com")
    reward = buy(shop(BrandFactory(name="Sole", slug="sole")), "anna@example.com")

    # when a run out of time reads one batch of one
    recorded = claim_links_send_due(limit=1, budget_seconds=0)

    # then that batch held the one who can be told: the others are left out by the query itself
    assert recorded == 1 and told() == {reward.pk}


def test_the_claim_page_filter_says_what_the_claim_page_rule_says():
    api_only, full = package("cashback-api"), None  # None: the brand's own plan, every channel
    campaigns = [
        Campaign.objects.get(brand=shop(BrandFactory(name=f"B{n}", slug=f"b{n}", plan=plan), buyer_claim_links=links))
        for n, (plan, links) in enumerate([(api_only, False), (api_only, True), (full, False), (full, True)])
    ]
    with_page = set(Campaign.objects.filter(claim_page_available_q()).values_list("pk", flat=True))

    for campaign in campaigns:
        rule = claim_page_available(campaign=campaign, plan=brand_plan_current(brand=campaign.brand))
        assert (campaign.pk in with_page) == rule
    assert [c.pk in with_page for c in campaigns] == [False, True, True, True]


def test_a_run_out_of_time_stops_between_batches_and_the_next_goes_on():
    brand = shop(BrandFactory(name="Sole", slug="sole"))
    rewards = [buy(brand, f"p{n}@example.com") for n in range(3)]

    assert [claim_links_send_due(limit=2, budget_seconds=0) for _ in range(3)] == [2, 1, 0]
    assert told() == {r.pk for r in rewards}


def test_each_reward_reads_the_accounts_by_index_even_on_stale_statistics():
    # given 300 buyers who gave their IBAN, their rewards all voided at the last ANALYZE and held now
    # (a burst after a campaign that was settled: the planner expects no reward to look at). Before,
    # it then compared every reward with every account: 45,000 rows read here, 57 s for 20,000.
    brand = shop(BrandFactory(name="Sole", slug="sole"))
    payloads = [
        event(campaign="shop", type="purchase", source="api", email=f"p{n}@example.com", iban=iban("NL", n + 1),
              purchase_amount_minor=5000)
        for n in range(300)
    ]  # fmt: skip
    event_ingest_bulk(brand=brand, payloads=payloads)
    held = list(Reward.objects.values_list("pk", "status"))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Reward._meta.db_table} SET status = 'voided'")
        # fresh statistics for the people and their accounts, stale ones for the rewards
        for model in (Reward, Person, BankAccount):
            cursor.execute(f"ANALYZE {model._meta.db_table}")
        for pk, status in held:
            cursor.execute(f"UPDATE {Reward._meta.db_table} SET status = %s WHERE id = %s", [status, pk])

    # when the due rewards are looked up
    query = claim_links_due()
    plan = json.loads(query.explain(format="json", analyze=True))[0]["Plan"]

    # then none is due, and each of the two account tests read at most one account per reward (an
    # index lookup) or the accounts once (a hash join): never every account for every reward
    assert not query.exists()
    assert _rows_read(plan, table=BankAccount._meta.db_table) <= 2 * len(held)


def _rows_read(node: dict, *, table: str) -> int:
    """Rows the plan node and its children read from ``table``, over all their loops."""
    read = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
    own = read * node["Actual Loops"] if node.get("Relation Name") == table else 0
    return own + sum(_rows_read(child, table=table) for child in node.get("Plans", []))
