"""IBANs: encrypted at rest, found by fingerprint, masked, kept as history."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connection, transaction
from django.test import override_settings

from core.exceptions import InvalidInput
from recipients import crypto
from recipients.checks import field_keys_configured
from recipients.models import BankAccount, Person, PersonEvent, PersonEventKind
from recipients.normalise import iban_normalise
from recipients.selectors import (
    iban_fingerprint,
    iban_holder_ids,
    people_sharing_iban_count,
    person_current_bank_account,
    person_find,
)
from recipients.services import IdentityInput, person_resolve, person_set_iban
from tests.recipients.factories import PersonFactory, iban, people_brand

pytestmark = pytest.mark.django_db

IBAN_A = iban("NL", 1)
IBAN_B = iban("IT", 2)


def resolve(**identity) -> Person:
    return person_resolve(brand_id=people_brand().pk, identity=IdentityInput(**identity), source="test")


def test_the_iban_is_not_stored_in_clear_anywhere_in_the_row():
    person = resolve(email="anna@example.com", iban=IBAN_A)
    account = person_current_bank_account(person=person)

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {BankAccount._meta.db_table} WHERE id = %s", [account.id])  # noqa: S608
        raw_row = " ".join(str(value) for value in cursor.fetchone())

    assert IBAN_A not in raw_row
    assert IBAN_A[4:] not in raw_row  # not even the account part
    assert account.iban() == IBAN_A


def test_the_fingerprint_finds_the_account_from_any_spelling():
    person = resolve(email="anna@example.com", iban=IBAN_A)
    typed = " ".join(IBAN_A[i : i + 4] for i in range(0, len(IBAN_A), 4)).lower()

    fingerprint = iban_fingerprint(typed)

    assert BankAccount.objects.get(iban_fingerprint=fingerprint).person == person
    assert person_find(brand_id=people_brand().pk, kind="iban", value=typed) == person
    assert fingerprint != iban_fingerprint(IBAN_B)


def test_the_fingerprint_depends_on_its_own_key_not_the_encryption_key():
    before = iban_fingerprint(IBAN_A)
    with override_settings(FIELD_ENCRYPTION_KEY="a-new-encryption-key"):
        assert iban_fingerprint(IBAN_A) == before
    with override_settings(FIELD_FINGERPRINT_KEY="another-fingerprint-key"):
        assert iban_fingerprint(IBAN_A) != before


def test_encryption_is_randomised_and_old_keys_still_decrypt_after_rotation():
    with override_settings(FIELD_ENCRYPTION_KEY="old-key"):
        token = crypto.encrypt(IBAN_A)
        assert crypto.encrypt(IBAN_A) != token
    with override_settings(FIELD_ENCRYPTION_KEY="new-key,old-key"):
        assert crypto.decrypt(token) == IBAN_A
    with override_settings(FIELD_ENCRYPTION_KEY="new-key"), pytest.raises(crypto.InvalidToken):
        crypto.decrypt(token)


@pytest.mark.parametrize("name", ["FIELD_ENCRYPTION_KEY", "FIELD_FINGERPRINT_KEY"])
def test_production_refuses_to_derive_keys_from_the_secret_key(name, monkeypatch):
    monkeypatch.delenv(name, raising=False)
    with (
        override_settings(SETTINGS_MODULE=crypto.PRODUCTION_SETTINGS, **{name: ""}),
        pytest.raises(ImproperlyConfigured, match=name),
    ):
        crypto.encrypt(IBAN_A) if name == "FIELD_ENCRYPTION_KEY" else crypto.iban_fingerprint(IBAN_A)


def test_iban_validate_reports_bank_details_and_mask():
    info = iban_normalise("nl91 abna 0417 1643 00")

    assert info.normalised == "NL91ABNA0417164300"
    assert (info.country, info.bic, info.bank_name) == ("NL", "ABNANL2A", "ABN AMRO BANK N.V.")
    assert info.masked == "NL91 **** **** 4300"
    assert info.formatted == "NL91 ABNA 0417 1643 00"


def test_setting_a_new_iban_keeps_the_old_one_as_history():
    person = resolve(email="anna@example.com", iban=IBAN_A)
    old = person_current_bank_account(person=person)

    new = person_set_iban(person=person, iban=IBAN_B.lower(), source="claim_page")

    old.refresh_from_db()
    assert (old.is_current, new.is_current) == (False, True)
    assert new.masked == f"{IBAN_B[:4]} **** **** {IBAN_B[-4:]}"
    assert person_current_bank_account(person=person) == new
    event = PersonEvent.objects.filter(person=person, kind=PersonEventKind.IBAN_SET).latest("id")
    assert event.detail == {"bank_account": new.id, "previous_bank_account": old.id, "country": "IT", "reused": False}
    assert IBAN_B not in str(event.detail)


def test_setting_the_current_iban_again_is_a_no_op_and_an_old_one_is_reused():
    person = resolve(email="anna@example.com", iban=IBAN_A)
    first = person_current_bank_account(person=person)
    person_set_iban(person=person, iban=IBAN_A, source="test")
    assert PersonEvent.objects.filter(kind=PersonEventKind.IBAN_SET).count() == 1

    person_set_iban(person=person, iban=IBAN_B, source="test")
    back = person_set_iban(person=person, iban=IBAN_A, source="test")

    assert back == first and back.is_current
    assert BankAccount.objects.filter(person=person).count() == 2


def test_setting_an_iban_that_another_person_uses_merges_them():
    older = resolve(email="anna@example.com", iban=IBAN_A)
    younger = resolve(email="bruno@example.com", iban=IBAN_B)

    account = person_set_iban(person=younger, iban=IBAN_A, source="test")

    younger.refresh_from_db()
    assert younger.merged_into == older
    assert account.person == older and account.iban() == IBAN_A and account.is_current


def test_bad_iban_changes_nothing():
    person = resolve(email="anna@example.com", iban=IBAN_A)

    with pytest.raises(InvalidInput) as exc:
        person_set_iban(person=person, iban="NL91 ABNA 0417 1643 0", source="test")

    assert exc.value.code == "invalid_iban"
    assert exc.value.message == "NL IBANs have 18 characters; this one has 17."
    assert person_current_bank_account(person=person).iban() == IBAN_A
    assert BankAccount.objects.count() == 1


def test_the_database_allows_one_current_account_per_person():
    person = resolve(email="anna@example.com", iban=IBAN_A)
    current = person_current_bank_account(person=person)

    with pytest.raises(IntegrityError), transaction.atomic():
        BankAccount.objects.create(person=person, iban_fingerprint="f" * 64, masked="x", country="NL", is_current=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        BankAccount.objects.create(
            person=person, iban_fingerprint=current.iban_fingerprint, masked="x", country="NL", is_current=False
        )


def test_one_human_with_many_contact_kinds_counts_once_per_iban():
    resolve(email="anna@example.com", whatsapp="+393331234567", social_provider="tiktok", social_uid="a", iban=IBAN_A)

    assert people_sharing_iban_count(brand_id=people_brand().pk, fingerprint=iban_fingerprint(IBAN_A)) == 1
    assert people_sharing_iban_count(brand_id=people_brand().pk, fingerprint=iban_fingerprint(IBAN_B)) == 0


def test_many_social_accounts_funnelled_into_one_iban_count_as_many_people():
    for n in range(5):
        resolve(social_provider="tiktok", social_uid=f"farm-{n}", email=f"farm{n}@example.com", iban=IBAN_A)

    assert Person.objects.count() == 1  # linked for caps ...
    # ... and flagged for fraud
    assert people_sharing_iban_count(brand_id=people_brand().pk, fingerprint=iban_fingerprint(IBAN_A)) == 5


def test_iban_holders_are_every_person_row_that_reaches_the_iban():
    holder = resolve(email="anna@example.com", iban=IBAN_A)
    merged = resolve(email="bruno@example.com")
    resolve(email="bruno@example.com", iban=IBAN_A)
    PersonFactory()

    assert iban_holder_ids(fingerprint=iban_fingerprint(IBAN_A)) == [holder.id, merged.id]


def test_the_start_up_check_stops_production_without_field_keys(monkeypatch):
    monkeypatch.delenv("FIELD_ENCRYPTION_KEY", raising=False)
    monkeypatch.delenv("FIELD_FINGERPRINT_KEY", raising=False)
    with override_settings(SETTINGS_MODULE=crypto.PRODUCTION_SETTINGS, FIELD_FINGERPRINT_KEY="set"):
        assert [e.msg for e in field_keys_configured()] == ["FIELD_ENCRYPTION_KEY is not set."]
    assert field_keys_configured() == []


@pytest.mark.postgres
def test_the_one_statement_people_per_iban_count_agrees_with_the_portable_one():
    from recipients.selectors import _people_sharing_iban_counts_orm, people_sharing_iban_counts
    from recipients.services import person_erase

    # one human with every contact kind; a farm of social accounts; a merge; an erased holder
    resolve(email="anna@example.com", whatsapp="+393331234567", social_provider="tiktok", social_uid="a", iban=IBAN_A)
    for n in range(4):
        resolve(social_provider="tiktok", social_uid=f"farm-{n}", email=f"farm{n}@example.com", iban=IBAN_B)
    resolve(social_provider="instagram", social_uid="x", iban=IBAN_B)
    resolve(email="carla@example.com")
    resolve(email="carla@example.com", iban=iban("NL", 3))
    person_erase(person=resolve(email="gone@example.com", iban=iban("NL", 4)))
    fingerprints = [iban_fingerprint(i) for i in (IBAN_A, IBAN_B, iban("NL", 3), iban("NL", 4), iban("NL", 5))]

    counts = people_sharing_iban_counts(brand_id=people_brand().pk, fingerprints=fingerprints)
    assert counts == _people_sharing_iban_counts_orm(people_brand().pk, set(fingerprints))
    assert sorted(counts.values()) == [0, 0, 1, 1, 4]
