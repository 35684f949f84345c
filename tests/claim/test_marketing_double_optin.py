"""Double opt-in for marketing consent: a "yes" given with an e-mail address typed on a public
claim page proves nothing about that address, so it waits — invisible to the brand (Contacts page,
CSV, API), with no webhook — until the person follows the link e-mailed there. A "yes" on a
channel already proven (the e-mail our link went to, a WhatsApp number verified by the opt-in)
counts at once. Played also as the stranger who typed someone else's address."""

import csv
import io
import re
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from campaigns.api_keys import api_key_create
from campaigns.marketing import marketing_consent_text
from campaigns.models import WebhookEvent
from campaigns.platforms.whatsapp import whatsapp_optin_code_issue, whatsapp_optin_redeem
from campaigns.services.test_mode import trial_tenant_open
from campaigns.webhooks import webhook_endpoint_create, webhook_events_collect
from core.retention import retention_purge
from payouts.links import PAYOUT_SALT, link_make
from recipients.models import Identifier, Notice, NoticeDelivery, NoticeKind
from recipients.models_consent import ConsentEvent, ConsentEventKind, MarketingConsent
from recipients.selectors import brand_contacts
from recipients.services import person_erase
from recipients.services.consent import consents_withdraw_by_whatsapp
from recipients.services.consent_links import consent_token, consent_withdraw_token
from recipients.services.notices import notices_send_due
from tests.api.conftest import ALL_SCOPES, client_for
from tests.campaigns.factories import funded_campaign
from tests.claim.test_claim_flow import GOOD_IBAN
from tests.claim.test_claim_links import OWNER_EMAIL, purchase
from tests.portal.conftest import member
from web.claim.services import PayoutDetails, claim_tiktok_login_submit

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

TYPED = "giulia@example.com"


@pytest.fixture
def shop(brand_a):
    return funded_campaign(
        brand=brand_a,
        amount_minor=10_000,
        slug="shop",
        mode="cashback",
        rules=[{"trigger": "purchase", "fixed_minor": 1000, "verification": "partner_attested"}],
    )


@pytest.fixture
def hooks(brand_a, settings):
    settings.WEBHOOK_ALLOW_HTTP = True
    webhook_endpoint_create(
        brand=brand_a, url="http://127.0.0.1:9/hooks", event_types=["person.consent_given", "person.consent_withdrawn"]
    )


def tiktok_claim(campaign, *, uid="tt-giulia", email=TYPED, whatsapp="", language="en"):
    """Someone logs in with TikTok on the public page, types ``email`` and ticks the box."""
    words = marketing_consent_text(brand=campaign.brand, language=language)
    details = PayoutDetails(
        name="Giulia Rossi", email=email, whatsapp=whatsapp, iban=GOOD_IBAN, language=language, marketing=words
    )
    return claim_tiktok_login_submit(campaign=campaign, social_uid=uid, details=details, ip="203.0.113.5")


def confirmation_link(to: str) -> str:
    """The path of the confirmation link in the e-mail sent to ``to``."""
    [message] = [m for m in mail.outbox if m.to == [to]]
    return re.search(r"http://[^\s]+(/c/m/[^\s]+/)", message.body).group(1)


def visible(brand, owner) -> dict:
    """Everything through which the brand could see or hear of a contact."""
    webhook_events_collect()
    client = Client()
    client.force_login(owner)
    body = b"".join(client.get(f"/portal/{brand.slug}/contacts/", {"format": "csv"}).streaming_content).decode()
    page = client.get(f"/portal/{brand.slug}/contacts/").content.decode()
    api = client_for(api_key_create(brand=brand, name="crm", scopes=ALL_SCOPES).token)
    return {
        "contacts": list(brand_contacts(brand_id=brand.pk)),
        "csv": list(csv.DictReader(io.StringIO(body))),
        "page": TYPED in page,
        "api": api.get("/api/v1/contacts/").json()["results"],
        "webhooks": list(WebhookEvent.objects.filter(brand=brand).values_list("type", flat=True)),
    }


# --- a typed e-mail waits ---------------------------------------------------------------------


def test_a_typed_email_makes_the_consent_pending_and_invisible_to_the_brand(
    brand_a, campaign_a, sandbox, debtor, hooks, django_capture_on_commit_callbacks
):
    owner = member(brand_a)
    with django_capture_on_commit_callbacks(execute=True):
        tiktok_claim(campaign_a)

    consent = MarketingConsent.objects.get()
    assert consent.confirmed_at is None and consent.withdrawn_at is None
    assert consent.confirm_by == consent.given_at + timedelta(days=7)
    assert consent.confirm_email.value == TYPED
    assert list(ConsentEvent.objects.values_list("kind", flat=True)) == ["consent.pending"]
    assert visible(brand_a, owner) == {"contacts": [], "csv": [], "page": False, "api": [], "webhooks": []}
    # the confirmation goes by e-mail to the address typed, and nowhere else
    notices_send_due()
    notice = Notice.objects.get(kind=NoticeKind.CONSENT_CONFIRM)
    assert notice.data["channels"] == ["email"]
    assert confirmation_link(TYPED).startswith("/c/m/")
    assert "Alpha Shoes" in mail.outbox[0].subject and consent.text in mail.outbox[0].body
    assert list(NoticeDelivery.objects.values_list("channel", flat=True)) == ["email"]


def test_the_confirmation_email_is_in_the_persons_language(brand_a, campaign_a, sandbox, debtor):
    tiktok_claim(campaign_a, language="it")

    notices_send_due()

    [message] = mail.outbox
    assert message.subject.startswith("Conferma")
    assert "Alpha Shoes" in message.body and "/c/m/" in message.body


def test_the_link_asks_first_then_confirms_once_and_the_brand_hears_once(
    brand_a, campaign_a, sandbox, debtor, hooks, django_capture_on_commit_callbacks
):
    owner = member(brand_a)
    with django_capture_on_commit_callbacks(execute=True):
        tiktok_claim(campaign_a)
    notices_send_due()
    path = confirmation_link(TYPED)
    browser = Client()

    asked = browser.get(path)  # a mail scanner opening the link confirms nothing
    assert asked.status_code == 200 and 'data-testid="consent-ask"' in asked.content.decode()
    assert MarketingConsent.objects.get().confirmed_at is None

    done = browser.post(path)
    again = browser.post(path)

    consent = MarketingConsent.objects.get()
    assert done.status_code == again.status_code == 200
    assert 'data-testid="consent-confirmed"' in done.content.decode()
    assert "already confirmed" in again.content.decode()
    assert consent.confirmed_at is not None and consent.withdrawn_at is None
    [confirmed] = ConsentEvent.objects.filter(kind=ConsentEventKind.CONFIRMED)
    assert (confirmed.channel, confirmed.consent_id) == ("email_link", consent.pk)
    assert confirmed.created_at == consent.confirmed_at
    seen = visible(brand_a, owner)
    assert [row.email for row in seen["contacts"]] == [TYPED] and seen["page"]
    assert [row["email"] for row in seen["csv"]] == [TYPED]
    assert [row["email"] for row in seen["api"]] == [TYPED]
    assert seen["webhooks"] == ["person.consent_given"]
    event = WebhookEvent.objects.get()
    assert event.data["consent"] == {"id": consent.pk, "version": consent.text_version, "channel": "email_link"}
    webhook_events_collect()
    assert WebhookEvent.objects.count() == 1  # once, however often the collector runs


def test_an_expired_consent_cannot_be_confirmed_and_never_counts(brand_a, campaign_a, sandbox, debtor, hooks):
    tiktok_claim(campaign_a)
    notices_send_due()
    path = confirmation_link(TYPED)
    past = timezone.now() - timedelta(days=8)
    MarketingConsent.objects.update(given_at=past, confirm_by=past + timedelta(days=7))

    page = Client().post(path)

    assert page.status_code == 410 and 'data-testid="consent-link-expired"' in page.content.decode()
    assert MarketingConsent.objects.get().confirmed_at is None
    assert not ConsentEvent.objects.filter(kind=ConsentEventKind.CONFIRMED).exists()
    webhook_events_collect()
    assert not brand_contacts(brand_id=brand_a.pk).exists() and not WebhookEvent.objects.exists()


def test_an_expired_tampered_or_other_link_gets_a_clear_page_and_changes_nothing(
    brand_a, campaign_a, sandbox, debtor, settings
):
    tiktok_claim(campaign_a)
    consent = MarketingConsent.objects.get()
    token = consent_token(salt="consent.confirm", consent_id=consent.pk)

    tampered = Client().post(f"/c/m/{token[:-2]}xx/")
    withdrawal = Client().post(f"/c/m/{consent_withdraw_token(consent_id=consent.pk)}/")
    wrong_door = Client().post(f"/c/w/{token}/")  # a confirmation link cannot withdraw
    settings.CONSENT_CONFIRM_LINK_DAYS = -1  # every link is past its age
    expired = Client().post(f"/c/m/{token}/")

    for page in (tampered, withdrawal, expired):
        assert page.status_code == 404 and 'data-testid="consent-link-invalid"' in page.content.decode()
    assert wrong_door.status_code == 404
    consent.refresh_from_db()
    assert consent.confirmed_at is None and consent.withdrawn_at is None
    assert list(ConsentEvent.objects.values_list("kind", flat=True)) == ["consent.pending"]


def test_a_link_confirms_its_own_consent_only(brand_a, brand_b, campaign_a, campaign_b, sandbox, debtor):
    tiktok_claim(campaign_a, uid="tt-giulia")
    tiktok_claim(campaign_b, uid="tt-giulia")  # the same human at another brand: another person
    tiktok_claim(campaign_a, uid="tt-marco", email="marco@example.com")
    notices_send_due()
    at_a = MarketingConsent.objects.get(brand=brand_a, confirm_email__value=TYPED)

    Client().post(f"/c/m/{consent_token(salt='consent.confirm', consent_id=at_a.pk)}/")

    confirmed = MarketingConsent.objects.filter(confirmed_at__isnull=False)
    assert list(confirmed.values_list("pk", flat=True)) == [at_a.pk]
    assert not brand_contacts(brand_id=brand_b.pk).exists()
    assert [row.email for row in brand_contacts(brand_id=brand_a.pk)] == [TYPED]


def test_a_withdrawn_consent_cannot_be_confirmed(brand_a, campaign_a, sandbox, debtor, hooks):
    outcome = tiktok_claim(campaign_a)
    notices_send_due()
    path = confirmation_link(TYPED)
    person_erase(person=outcome.reward.person, actor=None)

    page = Client().post(path)

    assert page.status_code == 410 and 'data-testid="consent-link-ended"' in page.content.decode()
    consent = MarketingConsent.objects.get()
    assert consent.confirmed_at is None and consent.withdrawal_channel == "erasure"
    assert consent.ip_hash == "" and consent.user_agent == ""
    # the brand never knew of it: its end is no withdrawal to announce
    assert ConsentEvent.objects.filter(kind=ConsentEventKind.CANCELLED).count() == 1
    webhook_events_collect()
    assert not WebhookEvent.objects.exists()


def test_a_stop_ends_a_pending_consent_silently(brand_a, campaign_a, sandbox, debtor, hooks):
    tiktok_claim(campaign_a, whatsapp="+393471234567")
    notices_send_due()
    path = confirmation_link(TYPED)

    assert [c.pk for c in consents_withdraw_by_whatsapp(number="+393471234567")]

    consent = MarketingConsent.objects.get()
    assert consent.withdrawal_channel == "whatsapp" and consent.confirmed_at is None
    assert Client().post(path).status_code == 410  # the e-mailed link no longer confirms it
    assert ConsentEvent.objects.filter(kind=ConsentEventKind.CANCELLED).count() == 1
    webhook_events_collect()
    assert not WebhookEvent.objects.exists()


def test_retention_blanks_the_proof_of_a_consent_never_confirmed(brand_a, campaign_a, sandbox, debtor, settings):
    tiktok_claim(campaign_a)
    waiting = tiktok_claim(campaign_a, uid="tt-marco", email="marco@example.com")
    past = timezone.now() - timedelta(days=30)
    MarketingConsent.objects.exclude(person=waiting.reward.person).update(
        given_at=past, confirm_by=past + timedelta(days=7)
    )
    settings.RETENTION_CONSENT_PROOF_DAYS = 10

    retention_purge(now=timezone.now(), dry_run=False)

    old, fresh = MarketingConsent.objects.order_by("id")
    assert (old.ip_hash, old.user_agent) == ("", "")
    assert fresh.ip_hash != ""


def test_a_test_tenants_confirmation_goes_to_its_test_inbox(brand_a, sandbox, debtor):
    tenant = trial_tenant_open(brand=brand_a)
    campaign = funded_campaign(
        brand=tenant, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )

    tiktok_claim(campaign)
    notices_send_due()

    assert mail.outbox == []
    delivery = NoticeDelivery.objects.get(notice__kind=NoticeKind.CONSENT_CONFIRM)
    assert (delivery.status, delivery.provider_message_id) == ("sent", "test-inbox")
    # the tester reads it in the test inbox as the person would, link included, and it works
    client = Client()
    client.force_login(member(brand_a))
    page = client.get(f"/portal/{tenant.slug}/test-mode/inbox/{delivery.notice_id}/").content.decode()
    path = re.search(r"http://[^\s<\"]+(/c/m/[^\s<\"/]+/)", page).group(1)
    assert Client().post(path).status_code == 200
    assert MarketingConsent.objects.get().confirmed_at is not None


# --- a proven channel counts at once ----------------------------------------------------------


def payout_form_consent(reward, **fields):
    words = marketing_consent_text(brand=reward.campaign.brand, language="en")
    done = Client().post(
        link_make(PAYOUT_SALT, reward.pk).path,
        {"name": "Anna Bianchi", "iban": GOOD_IBAN, "consent": "on", "marketing": "on",
         "marketing_version": words.version, **fields},
    )  # fmt: skip
    assert done.status_code == 302, done.content[:2000]
    return MarketingConsent.objects.get()


def test_the_email_the_claim_link_was_sent_to_counts_at_once(brand_a, shop, hooks):
    consent = payout_form_consent(purchase(brand_a), email=OWNER_EMAIL)

    assert consent.confirmed_at == consent.given_at and consent.confirm_by is None
    assert ConsentEvent.objects.get().data["proof"] == "claim_link_email"
    assert not Notice.objects.filter(kind=NoticeKind.CONSENT_CONFIRM).exists()
    webhook_events_collect()
    assert list(WebhookEvent.objects.values_list("type", flat=True)) == ["person.consent_given"]


def test_a_new_email_typed_behind_a_claim_link_still_waits(brand_a, shop):
    consent = payout_form_consent(purchase(brand_a), email="other@example.com")

    assert consent.confirmed_at is None and consent.confirm_email.value == "other@example.com"
    assert not brand_contacts(brand_id=brand_a.pk).exists()


def test_a_whatsapp_number_verified_by_the_optin_counts_at_once(brand_a, sandbox, debtor):
    campaign = funded_campaign(
        brand=brand_a, amount_minor=10_000, slug="wa", rules=[{"trigger": "whatsapp_optin", "fixed_minor": 300}]
    )
    code = whatsapp_optin_code_issue(campaign=campaign)
    reward = whatsapp_optin_redeem(code=code.code, wa_number="393471234567", message_id="wamid.1").reward

    consent = payout_form_consent(reward, email=TYPED)

    assert consent.confirmed_at is not None
    assert ConsentEvent.objects.get().data["proof"] == "whatsapp_verified"
    # The number is proven; the address typed beside it is not, so the brand gets the number only.
    assert [(row.whatsapp, row.email) for row in brand_contacts(brand_id=brand_a.pk)] == [("+393471234567", None)]


def test_a_number_typed_next_to_a_tiktok_login_is_never_handed_to_the_brand(brand_a, campaign_a, sandbox, debtor):
    """Nothing can confirm a number typed on the public page (no address to write to): the login
    proves the TikTok account, so the consent counts for it, but not for a number anyone could
    have typed — the brand sees the name and the account, never a stranger's number."""
    tiktok_claim(campaign_a, email="", whatsapp="+39 347 765 4321")

    assert Identifier.objects.filter(value="+393477654321").exists()
    [row] = brand_contacts(brand_id=brand_a.pk)
    assert (row.person.display_name, row.whatsapp, row.email) == ("Giulia Rossi", None, None)
    assert row.social and row.social.startswith("tiktok:")


def test_an_address_confirmed_once_is_proven_for_the_next_words(brand_a, campaign_a, sandbox, debtor):
    tiktok_claim(campaign_a)
    notices_send_due()
    Client().post(confirmation_link(TYPED))
    brand_a.marketing_purpose_en = "our new loyalty club"
    brand_a.save(update_fields=["marketing_purpose_en"])
    other = funded_campaign(
        brand=brand_a, amount_minor=10_000, slug="second", rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )

    tiktok_claim(other)

    old, new = MarketingConsent.objects.order_by("id")
    assert old.withdrawal_channel == "superseded" and new.confirmed_at == new.given_at
    assert Identifier.objects.filter(value=TYPED).count() == 1


def test_a_typed_address_confirmed_another_way_is_not_handed_over(brand_a, campaign_a, sandbox, debtor, hooks):
    """The attacker types a stranger's address (pending, the stranger ignores the e-mail), then
    says the same "yes" again from the same TikTok account with no address: the consent becomes
    active on the login, but the typed address was never proven and stays the stranger's."""
    tiktok_claim(campaign_a, email="victim@example.com")
    other = funded_campaign(
        brand=brand_a, amount_minor=10_000, slug="again", rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )

    tiktok_claim(other, email="")

    consent = MarketingConsent.objects.get()
    assert consent.confirmed_at is not None and consent.confirm_email_id is None
    assert [row.email for row in brand_contacts(brand_id=brand_a.pk)] == [None]
    seen = visible(brand_a, member(brand_a, "owner", "owner-x@example.com"))
    assert "victim@example.com" not in str(seen["csv"]) + str(seen["api"])


def test_an_unproven_yes_to_new_words_leaves_the_proven_one_standing(brand_a, campaign_a, sandbox, debtor, hooks):
    tiktok_claim(campaign_a)
    notices_send_due()
    Client().post(confirmation_link(TYPED))
    brand_a.marketing_purpose_en = "our new loyalty club"
    brand_a.save(update_fields=["marketing_purpose_en"])
    other = funded_campaign(
        brand=brand_a, amount_minor=10_000, slug="second", rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )

    tiktok_claim(other, email="new@example.com")  # unproven: would only be pending

    [consent] = MarketingConsent.objects.all()
    assert consent.confirmed_at is not None and consent.withdrawn_at is None
    assert [row.email for row in brand_contacts(brand_id=brand_a.pk)] == [TYPED]
