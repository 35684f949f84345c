"""The portal's Contacts page (issue 29): the brand sees the name and contacts of the people who
gave it marketing consent, and only theirs; the CSV export streams them and is audited before the
first byte; another brand sees nothing; an erased or withdrawn person is gone at once."""

import csv
import io

import pytest
from django.test import Client

from campaigns.models import BrandRole
from recipients.models_consent import ConsentEvent, ConsentEventKind
from recipients.services import person_erase
from recipients.services.consent import consent_withdraw
from tests.portal.conftest import member
from tests.recipients.test_marketing_consent import contact, give

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def people(brand_a, brand_b):
    """At Alpha: Giulia said yes, Marco did not. At Beta: Rita said yes."""
    giulia = contact(brand_a)
    give(giulia)
    contact(brand_a, name="Marco Verdi", email="marco@example.com", whatsapp="+393470000001")
    rita = contact(brand_b, name="Rita Neri", email="rita@example.com", whatsapp="+393470000002")
    give(rita)
    return {"giulia": giulia, "rita": rita}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def csv_rows(response) -> list[dict]:
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


def test_the_page_shows_consenting_people_only(owner_a, people):
    page = signed_in(owner_a).get("/portal/alpha/contacts/")

    html = page.content.decode()
    assert page.status_code == 200 and 'data-testid="contacts-table"' in html
    assert "Giulia Rossi" in html and "giulia@example.com" in html and "+393471234567" in html
    assert "tiktok:giulia.tt" in html
    assert "Marco" not in html and "marco@example.com" not in html
    assert "Rita" not in html


def test_the_filter_narrows_the_list(owner_a, people, brand_a):
    marco = contact(brand_a, name="Marco Verdi", email="marco2@example.com", whatsapp="+393470000009")
    give(marco)

    page = signed_in(owner_a).get("/portal/alpha/contacts/", {"q": "marco"})

    html = page.content.decode()
    assert "Marco Verdi" in html and "Giulia" not in html


def test_the_csv_export_streams_the_contacts_and_is_audited(owner_a, people):
    response = signed_in(owner_a).get("/portal/alpha/contacts/", {"format": "csv", "q": "giulia"})

    rows = csv_rows(response)
    assert [(r["name"], r["email"], r["whatsapp"], r["social"]) for r in rows] == [
        ("Giulia Rossi", "giulia@example.com", "+393471234567", "tiktok:giulia.tt")
    ]
    audit = ConsentEvent.objects.get(kind=ConsentEventKind.EXPORTED)
    assert (audit.brand.slug, audit.channel, audit.actor_id) == ("alpha", "portal", owner_a.pk)
    assert audit.data == {"filters": {"search": "(given)"}, "rows": 1}  # not the text: it may name someone


def test_an_analyst_sees_the_page_but_cannot_export(brand_a, people):
    analyst = signed_in(member(brand_a, BrandRole.ANALYST))

    assert analyst.get("/portal/alpha/contacts/").status_code == 200
    assert analyst.get("/portal/alpha/contacts/", {"format": "csv"}).status_code == 404
    assert not ConsentEvent.objects.filter(kind=ConsentEventKind.EXPORTED).exists()


def test_another_brand_cannot_see_the_contacts(owner_b, people):
    client = signed_in(owner_b)

    assert client.get("/portal/alpha/contacts/").status_code == 404
    assert client.get("/portal/alpha/contacts/", {"format": "csv"}).status_code == 404
    own = csv_rows(client.get("/portal/beta/contacts/", {"format": "csv"}))
    assert [r["name"] for r in own] == ["Rita Neri"]
    assert ConsentEvent.objects.filter(kind=ConsentEventKind.EXPORTED).get().brand.slug == "beta"


def test_withdrawn_and_erased_people_leave_the_page_and_the_export(owner_a, people, brand_a):
    marco = contact(brand_a, name="Marco Verdi", email="marco2@example.com", whatsapp="+393470000009")
    give(marco)
    consent_withdraw(person=marco, channel="whatsapp")
    person_erase(person=people["giulia"])
    client = signed_in(owner_a)

    html = client.get("/portal/alpha/contacts/").content.decode()
    rows = csv_rows(client.get("/portal/alpha/contacts/", {"format": "csv"}))

    assert "Giulia" not in html and "giulia@example.com" not in html and "Marco" not in html
    assert rows == []


def test_the_wording_is_the_brands_and_only_an_admin_changes_it(owner_a, brand_a, people):
    analyst = signed_in(member(brand_a, BrandRole.ANALYST))
    refused = analyst.post("/portal/alpha/contacts/wording/", {"purpose_en": "spam", "purpose_it": ""})
    assert refused.status_code == 404

    saved = signed_in(owner_a).post(
        "/portal/alpha/contacts/wording/", {"purpose_en": "our sneaker drops", "purpose_it": "le nostre novità"}
    )

    assert saved.status_code == 302
    brand_a.refresh_from_db()
    assert (brand_a.marketing_purpose_en, brand_a.marketing_purpose_it) == ("our sneaker drops", "le nostre novità")
    html = signed_in(owner_a).get("/portal/alpha/contacts/").content.decode()
    assert "our sneaker drops" in html and "le nostre novità" in html
