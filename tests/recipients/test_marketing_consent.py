"""Marketing consent (issue 29): a person's optional yes to one brand, tied to the exact words
they saw, withdrawn at once through any channel, gone with an erasure. Only consenting people's
contacts reach the brand (``brand_contacts``); the database keeps one active consent per person
and brand."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from campaigns.marketing import brand_marketing_purpose_set, marketing_consent_text, text_version
from core.audit import audit_verify
from core.audit_models import AuditTrail
from core.exceptions import InvalidInput, InvalidTransition
from core.retention import retention_purge
from recipients.models import Identifier, IdentifierKind
from recipients.models_consent import ConsentEvent, ConsentEventKind, MarketingConsent
from recipients.selectors import brand_contacts
from recipients.services import person_erase, person_export
from recipients.services.consent import consent_give, consent_withdraw, contacts_export_record
from tests.campaigns.factories import BrandFactory
from tests.recipients.factories import PersonFactory

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def give(person, brand=None, *, language="en", channel="claim_page", ip="203.0.113.9", **extra):
    """``person`` ticks the box of ``brand`` (their own by default) in ``language``."""
    brand = brand or person.brand
    words = marketing_consent_text(brand=brand, language=language)
    return consent_give(
        person=person,
        brand=brand,
        text=words.text,
        version=words.version,
        language=words.language,
        channel=channel,
        ip=ip,
        user_agent="Mozilla/5.0 (test)",
        **extra,
    )


def contact(brand, name="Giulia Rossi", email="giulia@example.com", whatsapp="+393471234567"):
    person = PersonFactory(brand=brand, display_name=name)
    Identifier.objects.create(person=person, brand=brand, kind=IdentifierKind.EMAIL, value=email)
    Identifier.objects.create(person=person, brand=brand, kind=IdentifierKind.WHATSAPP, value=whatsapp)
    handle = email.split("@")[0]
    Identifier.objects.create(person=person, brand=brand, kind=IdentifierKind.SOCIAL, value=f"tiktok:{handle}.tt")
    return person


@pytest.fixture
def brand(db):
    brand = BrandFactory(name="Alpha Shoes", slug="alpha-shoes")
    brand.company_legal_name = "Alpha Shoes S.r.l."
    brand.save(update_fields=["company_legal_name"])
    return brand


def test_the_words_say_who_what_and_how_to_withdraw_in_both_languages(brand):
    en = marketing_consent_text(brand=brand, language="en")
    it = marketing_consent_text(brand=brand, language="it")

    assert "Alpha Shoes S.r.l." in en.text and "news and offers from Alpha Shoes" in en.text
    assert "withdraw" in en.text and "STOP" in en.text
    assert "Alpha Shoes S.r.l." in it.text and "revocare" in it.text
    assert en.version == text_version(en.text) != it.version

    brand_marketing_purpose_set(brand=brand, purpose_en="our sneaker drops by e-mail", purpose_it="")
    changed = marketing_consent_text(brand=brand, language="en")
    assert "our sneaker drops by e-mail" in changed.text and changed.version != en.version
    assert marketing_consent_text(brand=brand, language="it").version == it.version


def test_a_purpose_with_control_characters_is_refused_and_nothing_saved(brand):
    with pytest.raises(InvalidInput) as refused:
        brand_marketing_purpose_set(brand=brand, purpose_en="offers\nand more", purpose_it="")
    assert refused.value.code == "invalid_marketing_purpose"
    brand.refresh_from_db()
    assert brand.marketing_purpose_en == ""


def test_consent_given_records_the_words_the_proof_and_an_event(brand):
    person = contact(brand)

    consent = give(person, language="it")

    assert consent.text == marketing_consent_text(brand=brand, language="it").text
    assert consent.language == "it" and consent.channel == "claim_page"
    assert len(consent.ip_hash) == 64 and "203.0.113.9" not in consent.ip_hash
    assert consent.user_agent == "Mozilla/5.0 (test)"
    event = ConsentEvent.objects.get()
    assert (event.kind, event.person_id, event.consent_id, event.brand_id) == (
        ConsentEventKind.GIVEN,
        person.pk,
        consent.pk,
        brand.pk,
    )
    assert "giulia" not in str(event.data).lower()


def test_giving_again_the_same_words_is_a_no_op_and_new_words_replace_the_old(brand):
    person = contact(brand)
    first = give(person)

    assert give(person).pk == first.pk
    assert ConsentEvent.objects.count() == 1

    brand_marketing_purpose_set(brand=brand, purpose_en="our newsletter", purpose_it="")
    second = give(person)

    first.refresh_from_db()
    assert first.withdrawn_at is not None and first.withdrawal_channel == "superseded"
    assert second.withdrawn_at is None and "our newsletter" in second.text
    assert MarketingConsent.objects.filter(withdrawn_at__isnull=True).count() == 1


def test_the_database_keeps_one_active_consent_per_person_and_brand(brand):
    person = contact(brand)
    consent = give(person)

    with pytest.raises(IntegrityError), transaction.atomic():
        MarketingConsent.objects.create(
            person=person,
            brand=brand,
            text=consent.text,
            text_version=consent.text_version,
            language="en",
            channel="api",
            given_at=timezone.now(),
            confirmed_at=timezone.now(),
        )


def test_the_database_keeps_a_pending_consent_pending_until_confirmed_in_time(brand):
    """A consent is confirmed, or pending with a deadline; never confirmed after the deadline;
    and a pending one counts as the person's one open consent to the brand."""
    person = contact(brand)
    words = marketing_consent_text(brand=brand, language="en")
    now = timezone.now()
    row = {"person": person, "brand": brand, "text": words.text, "text_version": words.version, "language": "en"}

    with pytest.raises(IntegrityError), transaction.atomic():
        MarketingConsent.objects.create(**row, channel="claim_page", given_at=now)  # neither
    with pytest.raises(IntegrityError), transaction.atomic():
        MarketingConsent.objects.create(
            **row, channel="claim_page", given_at=now, confirm_by=now + timedelta(days=7),
            confirmed_at=now + timedelta(days=8),
        )  # fmt: skip
    pending = MarketingConsent.objects.create(
        **row, channel="claim_page", given_at=now, confirm_by=now + timedelta(days=7)
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        MarketingConsent.objects.create(**row, channel="api", given_at=now, confirmed_at=now)
    assert list(MarketingConsent.objects.values_list("pk", flat=True)) == [pending.pk]


def test_the_database_refuses_a_consent_to_another_brand_for_its_person(brand):
    person = contact(brand)
    other = BrandFactory(name="Beta", slug="beta-x")
    words = marketing_consent_text(brand=other, language="en")

    with pytest.raises(IntegrityError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS marketing_consent_person_brand_fk IMMEDIATE")
        MarketingConsent.objects.create(
            person=person,
            brand=other,
            text=words.text,
            text_version=words.version,
            language="en",
            channel="api",
            given_at=timezone.now(),
            confirmed_at=timezone.now(),
        )


@pytest.mark.parametrize(
    "change, code",
    [
        ({"version": "0" * 64}, "invalid_consent"),  # the hash is not the words'
        ({"text": " "}, "invalid_consent"),
        ({"channel": "carrier_pigeon"}, "invalid_consent"),
        ({"language": "de"}, "invalid_consent"),
        ({"ip": "not-an-ip"}, "invalid_ip"),
    ],
)
def test_bad_consent_writes_nothing(brand, change, code):
    person = contact(brand)
    words = marketing_consent_text(brand=brand, language="en")
    given = {"text": words.text, "version": words.version, "language": "en", "channel": "claim_page", "ip": ""}
    if "text" in change:
        given["version"] = text_version(change["text"])
    given |= change

    with pytest.raises(InvalidInput) as refused:
        consent_give(person=person, brand=brand, **given)

    assert refused.value.code == code
    assert not MarketingConsent.objects.exists() and not ConsentEvent.objects.exists()


def test_a_person_of_another_brand_cannot_be_consented_for_this_one(brand):
    stranger = contact(BrandFactory(name="Beta", slug="beta-y"))

    with pytest.raises(InvalidInput):
        give(stranger, brand)

    assert not MarketingConsent.objects.exists()


def test_withdrawing_ends_it_at_once_and_a_replay_changes_nothing(brand):
    person = contact(brand)
    give(person)

    withdrawn = consent_withdraw(person=person, brand=brand, channel="whatsapp")
    replay = consent_withdraw(person=person, brand=brand, channel="whatsapp")

    assert [c.withdrawal_channel for c in withdrawn] == ["whatsapp"] and replay == []
    assert not brand_contacts(brand_id=brand.pk).exists()
    assert list(ConsentEvent.objects.order_by("id").values_list("kind", flat=True)) == [
        ConsentEventKind.GIVEN,
        ConsentEventKind.WITHDRAWN,
    ]


def test_withdrawal_takes_a_known_channel_only(brand):
    person = contact(brand)
    give(person)

    for channel in ("erasure", "superseded", "fax"):
        with pytest.raises(InvalidInput):
            consent_withdraw(person=person, channel=channel)

    assert MarketingConsent.objects.get().withdrawn_at is None


def test_only_consenting_people_of_the_brand_are_contacts(brand):
    yes = contact(brand)
    contact(brand, name="Marco", email="marco@example.com", whatsapp="+393470000001")  # never ticked
    other_brand = BrandFactory(name="Beta", slug="beta-z")
    elsewhere = contact(other_brand, name="Rita", email="rita@example.com", whatsapp="+393470000002")
    give(yes)
    give(elsewhere)

    rows = list(brand_contacts(brand_id=brand.pk))

    assert [(r.person.display_name, r.email, r.whatsapp, r.social) for r in rows] == [
        ("Giulia Rossi", "giulia@example.com", "+393471234567", "tiktok:giulia.tt")
    ]
    assert [r.person_id for r in brand_contacts(brand_id=other_brand.pk)] == [elsewhere.pk]
    assert [r.pk for r in brand_contacts(brand_id=brand.pk, search="GIULIA@")] == [rows[0].pk]
    assert not brand_contacts(brand_id=brand.pk, search="marco").exists()
    assert not brand_contacts(brand_id=brand.pk, channel="whatsapp").exists()


def test_erasure_ends_the_consent_blanks_its_proof_and_removes_the_contact(brand):
    person = contact(brand)
    consent = give(person)

    person_erase(person=person)

    consent.refresh_from_db()
    assert consent.withdrawn_at is not None and consent.withdrawal_channel == "erasure"
    assert (consent.ip_hash, consent.user_agent) == ("", "")
    assert not brand_contacts(brand_id=brand.pk).exists()
    assert ConsentEvent.objects.filter(kind=ConsentEventKind.WITHDRAWN, channel="erasure").count() == 1
    with pytest.raises(InvalidTransition):
        give(person)


def test_an_access_request_lists_the_marketing_consents(brand):
    person = contact(brand)
    give(person, language="it")

    export = person_export(person=person)

    [row] = export["marketing_consents"]
    assert row["language"] == "it" and row["withdrawn_at"] is None and row["brand_id"] == brand.pk


def test_retention_blanks_the_proof_of_old_withdrawals_and_keeps_active_ones(brand, settings):
    settings.RETENTION_CONSENT_PROOF_DAYS = 0
    gone = contact(brand)
    kept = contact(brand, name="Marco", email="marco@example.com", whatsapp="+393470000001")
    give(gone)
    give(kept)
    consent_withdraw(person=gone, channel="link")

    report = retention_purge(now=timezone.now() + timezone.timedelta(seconds=1), dry_run=False)

    assert report.counts["marketing_consent_proofs"] == 1
    assert MarketingConsent.objects.get(person=gone).ip_hash == ""
    assert MarketingConsent.objects.get(person=kept).ip_hash != ""


def test_the_audit_trail_lists_consents_on_the_person_and_exports_on_the_brand(brand):
    person = contact(brand)
    give(person)
    consent_withdraw(person=person, channel="link")
    contacts_export_record(brand=brand, channel="api", filters={"search": "giulia"}, rows=0)

    rows = AuditTrail.objects.filter(uid__startswith="consent:").order_by("created_at", "uid")

    assert [(r.object_type, r.object_id, r.kind) for r in rows] == [
        ("person", person.pk, "consent.given"),
        ("person", person.pk, "consent.withdrawn"),
        ("brand", brand.pk, "contacts.exported"),
    ]
    assert rows[2].data["filters"] == {"search": "(given)"} and rows[2].data["brand"] == brand.pk
    assert audit_verify().ok


def test_a_contact_merged_since_shows_the_contacts_of_the_whole_human(brand):
    giulia = contact(brand)
    give(giulia)
    older = PersonFactory(brand=brand, display_name="Giulia R.")
    Identifier.objects.create(person=older, brand=brand, kind=IdentifierKind.EMAIL, value="g.rossi@work.example")
    type(giulia).objects.filter(pk=giulia.pk).update(merged_into=older, merged_at=timezone.now())

    [row] = brand_contacts(brand_id=brand.pk)

    assert row.root_id == older.pk
    assert row.email in {"giulia@example.com", "g.rossi@work.example"} and row.whatsapp == "+393471234567"
