"""``GET /api/v1/contacts/`` and the consent webhooks (issue 29): a brand's key lists the people who
gave it marketing consent, with their contacts, paginated, each page audited; another brand's
key sees none of them; ``person.consent_given`` / ``person.consent_withdrawn`` carry ids only."""

import json

import pytest

from campaigns.api_keys import api_key_create
from campaigns.models import WebhookEvent
from campaigns.webhooks import webhook_endpoint_create, webhook_events_collect
from recipients.models_consent import ConsentEvent, ConsentEventKind
from recipients.services import person_erase
from recipients.services.consent import consent_withdraw
from tests.api.conftest import assert_problem, client_for
from tests.recipients.test_marketing_consent import contact, give

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def people(brand, rival):
    giulia = contact(brand)
    give(giulia)
    contact(brand, name="Marco Verdi", email="marco@example.com", whatsapp="+393470000001")  # said nothing
    rita = contact(rival, name="Rita Neri", email="rita@example.com", whatsapp="+393470000002")
    give(rita)
    return {"giulia": giulia, "rita": rita}


def exports():
    return ConsentEvent.objects.filter(kind=ConsentEventKind.EXPORTED)


def test_the_list_has_consenting_people_only_with_their_contacts(api, people, brand):
    response = api.get("/api/v1/contacts/")

    assert response.status_code == 200, response.content
    [row] = response.json()["results"]
    assert row["person"] == people["giulia"].pk
    assert (row["name"], row["email"], row["whatsapp"], row["social"]) == (
        "Giulia Rossi",
        "giulia@example.com",
        "+393471234567",
        "tiktok:giulia.tt",
    )
    assert row["consent_channel"] == "claim_page" and len(row["consent_version"]) == 64
    assert "Joy Shoes" in row["consent_text"]
    audit = exports().get()
    assert (audit.brand_id, audit.channel, audit.data["rows"]) == (brand.pk, "api", 1)
    assert audit.data["api_key"]
    by_person = api.get("/api/v1/contacts/", {"person": people["giulia"].pk}).json()["results"]
    assert [r["person"] for r in by_person] == [people["giulia"].pk]


def test_another_brands_key_sees_none_of_them(rival_api, people, rival):
    rows = rival_api.get("/api/v1/contacts/").json()["results"]
    asked_for_hers = rival_api.get("/api/v1/contacts/", {"person": people["giulia"].pk}).json()["results"]

    assert [r["name"] for r in rows] == ["Rita Neri"]
    assert asked_for_hers == []
    assert set(exports().values_list("brand_id", flat=True)) == {rival.pk}


def test_pages_follow_the_cursor_and_each_page_is_audited(api, people, brand):
    for n in range(3):
        give(contact(brand, name=f"Fan {n}", email=f"fan{n}@example.com", whatsapp=f"+39347000010{n}"))

    first = api.get("/api/v1/contacts/", {"limit": 3}).json()
    second = api.get(first["next"]).json()

    names = [r["name"] for r in first["results"] + second["results"]]
    assert len(names) == 4 and names[0] == "Fan 2" and names[-1] == "Giulia Rossi"
    assert list(exports().order_by("id").values_list("data__rows", flat=True)) == [3, 1]


def test_a_key_without_the_read_scope_is_refused_and_nothing_is_audited(brand, people):
    events_only = client_for(api_key_create(brand=brand, name="ingest", scopes=["events"]).token)

    assert_problem(events_only.get("/api/v1/contacts/"), 403, "insufficient_scope")
    assert not exports().exists()


def test_withdrawn_and_erased_people_leave_the_api(api, people, brand):
    marco = contact(brand, name="Marco Bis", email="marco2@example.com", whatsapp="+393470000009")
    give(marco)
    consent_withdraw(person=marco, channel="api")
    person_erase(person=people["giulia"])

    assert api.get("/api/v1/contacts/").json()["results"] == []


def test_bad_filters_are_400(api, people):
    assert_problem(api.get("/api/v1/contacts/", {"channel": "pigeon"}), 400, "validation_error")


def test_consent_webhooks_carry_ids_only(brand, people, receiver):
    webhook_endpoint_create(
        brand=brand, url=receiver.url, event_types=["person.consent_given", "person.consent_withdrawn"]
    )
    giulia = people["giulia"]
    consent_withdraw(person=giulia, channel="link")

    webhook_events_collect()

    events = list(WebhookEvent.objects.filter(brand=brand).order_by("id"))
    assert [e.type for e in events] == ["person.consent_given", "person.consent_withdrawn"]
    assert events[1].data["person"] == giulia.pk and events[1].data["consent"]["channel"] == "link"
    body = json.dumps([e.data for e in events])
    assert "giulia" not in body.lower() and "+39" not in body
    assert not WebhookEvent.objects.exclude(brand=brand).filter(type__startswith="person.").exists()
