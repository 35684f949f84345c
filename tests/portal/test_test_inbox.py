"""Test mode sends nothing to people: a test tenant's messages land in its test inbox (the portal's
test mode page), readable as the person would have read them, link included; a live brand's
people are still told by e-mail and WhatsApp; nobody else opens a test inbox."""

import pytest
from django.core import mail
from django.test import Client

from campaigns.services import event_ingest, rewards_mature
from campaigns.services.test_mode import trial_tenant_open
from payouts.services import payout_execute, payouts_create_for_payable
from recipients.models import Notice, NoticeDelivery
from recipients.services.notices import TEST_INBOX, notices_send_due
from tests.campaigns.conftest import event
from tests.campaigns.test_test_mode import trial_campaign
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import iban, payable_reward

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_a_test_persons_messages_go_to_the_test_inbox_only(sandbox, debtor, brand_a, owner_a, owner_b):
    tenant = trial_tenant_open(brand=brand_a)
    trial_campaign(tenant)
    event_ingest(
        brand=tenant,
        payload=event(campaign="try", email="colleague@real-company.example", iban=iban(), name="Tess Tester"),
    )
    rewards_mature()
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    mail.outbox.clear()

    notices_send_due()

    assert mail.outbox == []  # nothing left for the real address
    deliveries = NoticeDelivery.objects.filter(notice__person__brand=tenant)
    assert deliveries.exists()
    assert set(deliveries.values_list("status", "provider_message_id")) == {("sent", TEST_INBOX)}

    owner = Client()
    owner.force_login(owner_a)
    page = owner.get(f"/portal/{tenant.slug}/test-mode/").content.decode()
    assert 'data-testid="test-inbox"' in page
    notice = Notice.objects.filter(person__brand=tenant, kind="paid").get()
    message = owner.get(f"/portal/{tenant.slug}/test-mode/inbox/{notice.pk}/")
    assert message.status_code == 200
    assert "Not sent: test mode." in message.content.decode()
    assert "/c/" in message.content.decode()  # the person's link, to follow their side

    # the live brand's page has no inbox, and another brand's owner cannot open this one
    assert owner.get(f"/portal/{brand_a.slug}/test-mode/inbox/{notice.pk}/").status_code == 302
    stranger = Client()
    stranger.force_login(owner_b)
    assert stranger.get(f"/portal/{tenant.slug}/test-mode/inbox/{notice.pk}/").status_code in (403, 404)


def test_a_live_persons_messages_are_still_sent(sandbox, debtor, brand, campaign):
    reward = payable_reward(brand, account_iban=iban(), email="giulia@example.com")
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    mail.outbox.clear()
    notices_send_due()
    assert [m.to for m in mail.outbox] == [["giulia@example.com"]]
    assert not NoticeDelivery.objects.filter(notice__person=reward.person, provider_message_id=TEST_INBOX).exists()
