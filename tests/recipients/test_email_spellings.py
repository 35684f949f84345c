"""One e-mail is one person (issue 25): every spelling of an address — full-width letters, a
Unicode or punycode domain, invisible characters — resolves to the brand's one person; a domain
that mixes scripts like a look-alike is another address, its own person, and its events wait
for a review."""

import importlib

import pytest
from django.apps import apps

from campaigns.models import EventOutcome
from campaigns.services import event_ingest
from recipients.models import Identifier, IdentifierKind, Person
from recipients.services import IdentityInput, person_resolve
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.recipients.factories import people_brand

pytestmark = pytest.mark.django_db

SPELLINGS = [
    "vera@müller.de",
    "vera@xn--mller-kva.de",
    "VERA@MÜLLER.DE",
    "ｖｅｒａ＠ｍüｌｌｅｒ．ｄｅ",  # full-width letters, at sign and dot
    "ve\u00adra@müller.de",  # soft hyphen
    "v\u200bera@mu\u0308ller.de",  # zero-width space; ü as u + combining diaeresis
    "vera@müller\u3002de",  # ideographic full stop
]


def resolve(email: str) -> Person:
    return person_resolve(brand_id=people_brand().pk, identity=IdentityInput(email=email), source="test")


def test_every_spelling_of_one_address_is_one_person():
    people = {resolve(spelling).pk for spelling in SPELLINGS}

    assert len(people) == 1
    assert list(Identifier.objects.filter(kind=IdentifierKind.EMAIL).values_list("value", flat=True)) == [
        "vera@xn--mller-kva.de"
    ]


def test_a_cyrillic_look_alike_is_its_own_person_and_its_event_waits_for_review():
    campaign = funded_campaign(
        brand=people_brand(), amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )
    latin = event_ingest(brand=campaign.brand, payload=event(email="vera@example.com"))
    look_alike = event_ingest(brand=campaign.brand, payload=event(email="vera@ex\u0430mple.com"))  # Cyrillic а

    assert latin.outcome == EventOutcome.REWARDED and latin.reward.review_reasons == []
    assert look_alike.outcome == EventOutcome.REVIEW
    assert look_alike.reward.review_reasons == ["email_mixed_script"]
    assert look_alike.reward.person_id != latin.reward.person_id
    assert look_alike.event.email == "vera@xn--exmple-4nf.com"


def test_the_migration_respells_stored_addresses_and_leaves_a_taken_spelling_alone():
    brand = people_brand()
    old = [
        ("anna@ｅｘａｍｐｌｅ.com", "anna@example.com"),
        ("bea@müller.de", "bea@xn--mller-kva.de"),
        ("carla@example.com", "carla@example.com"),
        ("dora@bücher.de", "dora@bücher.de"),  # dora@xn--bcher-kva.de is someone else's already
        ("dora@xn--bcher-kva.de", "dora@xn--bcher-kva.de"),
    ]
    for value, _ in old:  # stored as the resolver of before spelled them
        person = Person.objects.create(brand=brand)
        Identifier.objects.create(person=person, brand=brand, kind=IdentifierKind.EMAIL, value=value)
    migration = importlib.import_module("recipients.migrations.0012_renormalise_emails")

    migration.forward(apps, None)

    assert list(Identifier.objects.order_by("id").values_list("value", flat=True)) == [new for _, new in old]
    assert resolve("ANNA@example.com").pk == Identifier.objects.get(value="anna@example.com").person_id
