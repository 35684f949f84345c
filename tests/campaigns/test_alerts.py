"""Budget alerts and automatic pauses e-mailed to the brand's team: once per crossing, in the
brand's language, never for a threshold under BRAND_BUDGET_ALERT_MIN_PCT; a test tenant's too,
marked test mode."""

import pytest
from django.core import mail

from campaigns.models import Brand, BrandAlertMail, CampaignStatus
from campaigns.services import event_ingest
from campaigns.services.alerts import brand_alert_send, brand_alerts_record, brand_alerts_send_due
from campaigns.services.test_mode import trial_tenant_open
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.portal.conftest import member

pytestmark = pytest.mark.django_db

RULES = [{"trigger": "tiktok_login", "fixed_minor": 500}]


def test_crossing_80_percent_mails_owners_and_admins_once(free_brand, settings):
    settings.BRAND_BUDGET_ALERT_MIN_PCT = 80
    owner = member(free_brand, "owner", "owner@free.example")
    member(free_brand, "admin", "admin@free.example")
    member(free_brand, "analyst", "analyst@free.example")
    campaign = funded_campaign(brand=free_brand, amount_minor=5_000, rules=RULES)

    # 5 rewards of 5.00 out of 50.00: 50 % (not mailed)
    for _ in range(5):
        event_ingest(brand=free_brand, payload=event())
    assert brand_alerts_send_due() == 0 and mail.outbox == []

    # 3 more: 80 % crossed
    for _ in range(3):
        event_ingest(brand=free_brand, payload=event())
    assert brand_alerts_send_due() == 1
    assert brand_alerts_send_due() == 0  # the sweep again: nothing more
    (message,) = mail.outbox
    assert sorted(message.to) == ["admin@free.example", owner.email]
    assert "80%" in message.subject and campaign.name in message.subject
    assert "€40.00" in message.body or "40.00" in message.body


def test_a_campaign_that_paused_itself_is_mailed_once_in_italian(free_brand, settings):
    settings.BRAND_BUDGET_ALERT_MIN_PCT = 100
    Brand.objects.filter(pk=free_brand.pk).update(language="it")
    member(free_brand, "owner", "owner@free.example")
    campaign = funded_campaign(brand=free_brand, amount_minor=1_000, rules=RULES)

    event_ingest(brand=free_brand, payload=event())
    event_ingest(brand=free_brand, payload=event())
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED

    # 100 % spent and the pause: two alerts, each mailed once
    assert brand_alerts_send_due() == 2
    assert brand_alerts_send_due() == 0
    subjects = sorted(m.subject for m in mail.outbox)
    assert len(subjects) == 2
    assert any("messa in pausa" in s for s in subjects), subjects
    assert any("100%" in s for s in subjects), subjects


def test_a_mail_claimed_by_another_worker_is_not_sent_twice(free_brand, settings):
    settings.BRAND_BUDGET_ALERT_MIN_PCT = 100
    member(free_brand, "owner", "owner@free.example")
    funded_campaign(brand=free_brand, amount_minor=500, rules=RULES)
    event_ingest(brand=free_brand, payload=event())
    brand_alerts_record()
    mail_ids = list(BrandAlertMail.objects.values_list("id", flat=True))
    assert mail_ids
    for mail_id in mail_ids:
        assert brand_alert_send(mail_id=mail_id) is True
        assert brand_alert_send(mail_id=mail_id) is False
    assert len(mail.outbox) == len(mail_ids)


@pytest.mark.parametrize(
    ("language", "marker", "words"),
    [("en", "[TEST MODE]", "nobody is paid real money"), ("it", "[MODALITÀ TEST]", "nessuno riceve denaro vero")],
)
def test_a_test_tenants_alert_goes_to_the_live_brands_team_marked_test_mode(
    free_brand, settings, language, marker, words
):
    """Test mode is for trying the whole product: its alerts reach the brand's own team (never
    people), in the brand's language, and say they are about test money."""
    settings.BRAND_BUDGET_ALERT_MIN_PCT = 100
    Brand.objects.filter(pk=free_brand.pk).update(language=language)
    free_brand.refresh_from_db()
    owner = member(free_brand, "owner", "owner@free.example")
    member(free_brand, "analyst", "analyst@free.example")
    tenant = trial_tenant_open(brand=free_brand)
    campaign = funded_campaign(brand=tenant, amount_minor=1_000, rules=RULES)

    event_ingest(brand=tenant, payload=event())
    event_ingest(brand=tenant, payload=event())

    assert brand_alerts_send_due() == 2  # 100 % spent and the automatic pause
    assert brand_alerts_send_due() == 0
    assert len(mail.outbox) == 2
    for message in mail.outbox:
        assert message.to == [owner.email]
        assert message.subject.startswith(marker) and campaign.name in message.subject
        assert words in message.body


def test_a_live_brands_alert_is_not_marked_test_mode(free_brand, settings):
    settings.BRAND_BUDGET_ALERT_MIN_PCT = 100
    member(free_brand, "owner", "owner@free.example")
    funded_campaign(brand=free_brand, amount_minor=500, rules=RULES)
    event_ingest(brand=free_brand, payload=event())

    brand_alerts_send_due()

    assert mail.outbox and not any("TEST" in m.subject or "test money" in m.body for m in mail.outbox)
