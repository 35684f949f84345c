"""Marketing consent on the claim pages (issue 29): an optional box, never ticked for the person,
in the brand's words; ticking it records exactly those words; every e-mail then carries a link
that withdraws it at once — played also as the stranger who was forwarded that link: it only
withdraws, and shows nothing about the person."""

import re

import pytest
from django.core import mail
from django.test import Client

from campaigns.marketing import marketing_consent_text
from payouts.links import PAYOUT_SALT, link_make
from recipients.models import BankAccount, Identifier, NoticeKind
from recipients.models_claims import ClaimLink
from recipients.models_consent import ConsentEvent, MarketingConsent
from recipients.selectors import brand_contacts
from recipients.services.consent_links import consent_withdraw_token
from recipients.services.notices import NoticeNew, notices_record, notices_send_due
from tests.campaigns.factories import funded_campaign
from tests.claim.test_claim_flow import GOOD_IBAN
from tests.claim.test_claim_links import owner_with_account, purchase

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

OWNER = {"name": "Anna Bianchi", "iban": GOOD_IBAN, "consent": "on"}


@pytest.fixture
def shop(brand_a):
    return funded_campaign(
        brand=brand_a,
        amount_minor=10_000,
        slug="shop",
        mode="cashback",
        rules=[{"trigger": "purchase", "fixed_minor": 1000, "verification": "partner_attested"}],
    )


def box(html: str) -> str:
    match = re.search(r'<input type="checkbox" name="marketing"[^>]*>', html)
    assert match, "no marketing box on the page"
    return match.group(0)


def consented(brand_a, *, language="en"):
    """Anna claims her purchase reward behind her own link and ticks the box."""
    reward = purchase(brand_a)
    client = Client(headers={"accept-language": language, "user-agent": "Phone/1.0"})
    words = marketing_consent_text(brand=brand_a, language=language)
    done = client.post(
        link_make(PAYOUT_SALT, reward.pk).path, {**OWNER, "marketing": "on", "marketing_version": words.version}
    )
    assert done.status_code == 302, done.content[:2000]
    return reward, MarketingConsent.objects.get()


def test_the_box_is_optional_unticked_and_in_the_brands_words(brand_a, shop):
    reward = purchase(brand_a)
    link = link_make(PAYOUT_SALT, reward.pk).path

    page = Client(headers={"accept-language": "it"}).get(link)

    html = page.content.decode()
    assert "checked" not in box(html)
    assert marketing_consent_text(brand=brand_a, language="it").text in html
    assert "facoltativo" in html
    done = Client().post(link, OWNER)  # left unticked: the claim goes through
    assert done.status_code == 302
    assert not MarketingConsent.objects.exists() and not ConsentEvent.objects.exists()
    assert not brand_contacts(brand_id=brand_a.pk).exists()


def test_ticking_the_box_records_the_words_shown_with_their_proof(brand_a, shop):
    reward, consent = consented(brand_a, language="it")

    assert consent.text == marketing_consent_text(brand=brand_a, language="it").text
    assert (consent.language, consent.channel, consent.user_agent) == ("it", "claim_page", "Phone/1.0")
    assert consent.claim_link_id == ClaimLink.objects.get().pk
    assert consent.person_id == reward.person_id and consent.brand_id == brand_a.pk
    [row] = brand_contacts(brand_id=brand_a.pk)
    assert (row.person.display_name, row.email) == ("Anna Bianchi", "buyer@example.com")


def test_a_yes_to_words_changed_since_the_page_was_shown_is_asked_again(brand_a, shop):
    reward = purchase(brand_a)
    link = link_make(PAYOUT_SALT, reward.pk).path
    stale = marketing_consent_text(brand=brand_a, language="en").version
    brand_a.marketing_purpose_en = "our new loyalty club"
    brand_a.save(update_fields=["marketing_purpose_en"])

    page = Client().post(link, {**OWNER, "marketing": "on", "marketing_version": stale})

    assert page.status_code == 200 and "read it again" in page.content.decode()
    assert not MarketingConsent.objects.exists()
    assert ClaimLink.objects.get().used_at is None and not BankAccount.objects.exists()


def test_every_email_carries_the_link_that_withdraws_it(brand_a, shop):
    reward, consent = consented(brand_a)
    mail.outbox.clear()
    notices_record(
        notices=[NoticeNew(person_id=reward.person_id, kind=NoticeKind.CLAIM_LINK, key="t:1", reward_id=reward.pk)]
    )

    notices_send_due()

    [message] = mail.outbox
    assert "Alpha Shoes" in message.body
    link = re.search(r"http://[^\s]+/c/w/[^\s]+/", message.body).group(0)
    assert "/c/w/" in link


def test_the_link_asks_first_then_withdraws_at_once_and_a_replay_is_a_no_op(brand_a, shop):
    reward, consent = consented(brand_a)
    path = f"/c/w/{consent_withdraw_token(consent_id=consent.pk)}/"
    stranger = Client()  # someone the e-mail was forwarded to

    asked = stranger.get(path)
    html = asked.content.decode()
    assert asked.status_code == 200 and 'data-testid="consent-confirm"' in html
    for personal in ("Anna", "Bianchi", "buyer@example.com", "IT60"):
        assert personal not in html
    consent.refresh_from_db()
    assert consent.withdrawn_at is None  # a GET (a mail scanner opening links) changes nothing

    done = stranger.post(path)
    again = stranger.post(path)

    consent.refresh_from_db()
    assert done.status_code == again.status_code == 200
    assert consent.withdrawal_channel == "link" and consent.withdrawn_at is not None
    assert "already been withdrawn" in again.content.decode()
    assert ConsentEvent.objects.filter(kind="consent.withdrawn").count() == 1
    for personal in ("Anna", "buyer@example.com"):
        assert personal not in done.content.decode()
    assert not brand_contacts(brand_id=brand_a.pk).exists()
    # the link did one thing only: the person, their contacts and their account are as they were
    assert Identifier.objects.filter(person=reward.person, is_active=True).count() >= 1
    assert BankAccount.objects.filter(person=reward.person, is_current=True).count() == 1


def test_a_tampered_expired_or_foreign_link_does_nothing(brand_a, shop, settings):
    _, consent = consented(brand_a)
    token = consent_withdraw_token(consent_id=consent.pk)

    tampered = Client().post(f"/c/w/{token[:-2]}xx/")
    status_link = Client().post(f"/c/w/{token.replace(':', ':0', 1)}/")
    settings.CONSENT_WITHDRAW_LINK_DAYS = -1  # every link is past its age
    expired = Client().post(f"/c/w/{token}/")

    assert tampered.status_code == status_link.status_code == expired.status_code == 404
    consent.refresh_from_db()
    assert consent.withdrawn_at is None


def test_a_yes_given_with_an_account_change_counts_at_once(brand_a, shop, django_capture_on_commit_callbacks):
    reward = owner_with_account(brand_a, django_capture_on_commit_callbacks)
    words = marketing_consent_text(brand=brand_a, language="en")
    again = purchase(brand_a)

    page = Client().post(
        link_make(PAYOUT_SALT, again.pk).path,
        {"name": "Anna", "iban": "DE89370400440532013000", "consent": "on", "marketing": "on",
         "marketing_version": words.version},
    )  # fmt: skip

    assert page.status_code == 302 and "/c/r/change/" in page["Location"]
    consent = MarketingConsent.objects.get()
    assert consent.person_id == reward.person_id and consent.claim_link_id is not None
