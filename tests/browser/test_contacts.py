"""The portal's Contacts page in a real browser (issue 29), in English and Italian: the consenting
person's contacts in the table, the other person nowhere, the consent box's words in both
languages; screenshots for review."""

import pytest
from django.test import Client

from tests.portal.conftest import member
from tests.recipients.test_marketing_consent import contact, give

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def signed_in(page, user, live_server) -> None:
    """The browser carries the session of ``user`` (signed in through Django's test client)."""
    client = Client()
    client.force_login(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )


@pytest.mark.parametrize(
    "locale, heading, box_words", [("en-GB", "Contacts", "withdraw"), ("it-IT", "Contatti", "revocare")]
)
def test_the_contacts_page_shows_consenting_people_only(new_page, shots, live_server, locale, heading, box_words):
    from tests.campaigns.factories import BrandFactory

    brand = BrandFactory(name="Alpha Shoes", slug="alpha")
    owner = member(brand, email=f"owner-{locale}@alpha.example")
    give(contact(brand))
    contact(brand, name="Marco Verdi", email="marco@example.com", whatsapp="+393470000001")
    page = new_page(locale=locale)
    signed_in(page, owner, live_server)

    page.goto("/portal/alpha/contacts/")

    assert page.inner_text("main h1") == heading
    table = page.inner_text("[data-testid=contacts-table]")
    assert "Giulia Rossi" in table and "giulia@example.com" in table and "+393471234567" in table
    assert "Marco" not in page.inner_text("main")
    assert box_words in page.inner_text(f"[data-testid=consent-text-{locale[:2]}]")
    shots(page, f"contacts-{locale[:2]}")
