"""Migrations recipients 0007 and payouts 0006: what the old tables recorded as sent (payouts'
Notification, campaigns' ClaimLinkNotice) becomes done notices with their channels sent, so an
access request still shows them and the claim-link sweep tells nobody twice."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from campaigns.services.claim_links import claim_links_send_due
from payouts.services import payouts_create_for_payable
from recipients.models import Notice, NoticeDelivery
from tests.campaigns.factories import funded_campaign
from tests.payouts.payout_fixtures import *  # noqa: F403 - fixtures
from tests.payouts.payout_fixtures import iban, payable_reward

PURCHASE = {"trigger": "purchase", "fixed_minor": 1000, "verification": "partner_attested"}
BEFORE = [
    ("recipients", "0006_bank_accounts_beyond_iban"),
    ("payouts", "0005_claim_tasks_moved"),
    ("campaigns", "0014_drop_ingest_requests"),
]


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def _latest() -> list[tuple[str, str]]:
    executor = MigrationExecutor(connection)
    # Every app's latest: going back took with it what other apps built on these.
    return executor.loader.graph.leaf_nodes()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_sent_notifications_and_claim_links_become_done_notices(sandbox, debtor, brand, campaign):
    paid = payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    funded_campaign(brand=brand, amount_minor=10_000, slug="shop", mode="cashback", rules=[PURCHASE])
    waiting = payable_reward(brand, campaign="shop", type="purchase", source="api", purchase_amount_minor=5000)
    NoticeDelivery.objects.all().delete()  # the old system's rows stand in for these
    Notice.objects.all().delete()
    sent = timezone.now()
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO payouts_notification (key, person_id, payout_id, kind, channels, created_at, sent_at) "
                "VALUES (%s, %s, %s, 'paid', '[\"email\", \"whatsapp\"]', %s, %s)",
                [f"payout:{payout_id}:paid", paid.person_id, payout_id, sent, sent],
            )
            cursor.execute(
                "INSERT INTO campaigns_claimlinknotice (reward_id, channels, created_at, sent_at) "
                "VALUES (%s, '[\"email\"]', %s, %s)",
                [waiting.pk, sent, sent],
            )
    finally:
        _migrate(_latest())

    old = Notice.objects.get(key=f"payout:{payout_id}:paid")
    assert (old.kind, old.status, old.payout_id, old.person_id) == ("paid", "done", payout_id, paid.person_id)
    assert sorted(NoticeDelivery.objects.filter(notice=old).values_list("channel", "status")) == [
        ("email", "sent"),
        ("whatsapp", "sent"),
    ]
    link = Notice.objects.get(key=f"reward:{waiting.pk}:claim_link")
    assert (link.kind, link.status, link.reward_id) == ("claim_link", "done", waiting.pk)
    assert claim_links_send_due() == 0  # told before the migration: not again
