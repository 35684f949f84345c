"""Who is who: find-or-create, linking by any shared identifier, merging into the oldest."""

import pytest

from core.exceptions import InvalidInput
from recipients.models import BankAccount, Identifier, IdentifierKind, Person, PersonEvent, PersonEventKind
from recipients.selectors import (
    iban_fingerprint,
    person_cluster_ids,
    person_current_bank_account,
    person_find,
    person_root,
)
from recipients.services import IdentityInput, person_resolve
from tests.recipients.factories import iban, people_brand

pytestmark = pytest.mark.django_db

IBAN_A = iban("NL", 1)
IBAN_B = iban("DE", 2)


def resolve(**identity) -> Person:
    return person_resolve(brand_id=people_brand().pk, identity=IdentityInput(**identity), source="test")


def identifier_values(person: Person) -> set[tuple[str, str]]:
    return set(Identifier.objects.filter(person_id__in=person_cluster_ids(person=person)).values_list("kind", "value"))


def test_first_sight_creates_a_person_with_every_identifier():
    person = resolve(
        name="Anna Rossi",
        email=" Anna@Example.com",
        whatsapp="333 123 4567",
        phone_region="IT",
        iban=IBAN_A.lower(),
        social_provider="TikTok",
        social_uid="open-1",
        language="it",
    )

    assert (person.display_name, person.preferred_language, person.created_source) == ("Anna Rossi", "it", "test")
    assert identifier_values(person) == {
        ("email", "anna@example.com"),
        ("whatsapp", "+393331234567"),
        ("social", "tiktok:open-1"),
        ("iban", iban_fingerprint(IBAN_A)),
    }
    account = person_current_bank_account(person=person)
    assert account.iban() == IBAN_A
    assert account.country == "NL" and account.bic == "ABNANL2A"


def test_resolving_again_in_another_spelling_changes_nothing():
    first = resolve(email="anna@example.com", whatsapp="+39 333 123 4567", iban=IBAN_A)
    counts = (Person.objects.count(), Identifier.objects.count(), BankAccount.objects.count())

    again = resolve(email="ANNA@example.com ", whatsapp="0039 3331234567", phone_region="IT", iban=IBAN_A.lower())

    assert again == first
    assert (Person.objects.count(), Identifier.objects.count(), BankAccount.objects.count()) == counts
    assert PersonEvent.objects.filter(kind=PersonEventKind.IBAN_SET).count() == 1


def test_two_emails_and_one_iban_are_one_person():
    first = resolve(email="anna@example.com", iban=IBAN_A)

    second = resolve(email="anna.rossi@work.example", iban=IBAN_A)

    assert second == first
    assert Person.objects.count() == 1
    assert person_cluster_ids(person=second) == [first.id]
    assert {v for k, v in identifier_values(first) if k == "email"} == {"anna@example.com", "anna.rossi@work.example"}


def test_a_shared_iban_merges_two_people_into_the_oldest():
    oldest = resolve(email="anna@example.com", iban=IBAN_A)
    younger = resolve(whatsapp="+393331234567", name="Anna R.")

    survivor = resolve(whatsapp="+393331234567", iban=IBAN_A)

    younger.refresh_from_db()
    assert survivor == oldest
    assert younger.merged_into_id == oldest.id and younger.merged_at is not None
    assert Person.objects.count() == 2  # nothing deleted
    assert person_root(person=younger) == oldest
    assert person_cluster_ids(person=younger) == [oldest.id, younger.id]
    # Identifiers stay where they were first seen; the root reaches them through the cluster.
    assert Identifier.objects.get(kind="whatsapp").person_id == younger.id
    assert person_find(brand_id=people_brand().pk, kind="whatsapp", value="+39 333 1234567") == oldest
    survivor_event = PersonEvent.objects.get(person=oldest, kind=PersonEventKind.MERGED)
    assert survivor_event.detail == {"merged": [younger.id], "members_moved": []}
    assert PersonEvent.objects.get(person=younger, kind=PersonEventKind.MERGED).detail == {"into": oldest.id}


def test_merges_flatten_so_everyone_points_straight_at_the_root():
    anna, bruno, carla = (resolve(email=f"{n}@example.com") for n in ("anna", "bruno", "carla"))
    resolve(email="bruno@example.com", whatsapp="+393330000003")
    resolve(email="carla@example.com", whatsapp="+393330000003")  # carla into bruno
    carla.refresh_from_db()
    carla_merged_at = carla.merged_at

    root = resolve(email="anna@example.com", iban=IBAN_A, social_provider="tiktok", social_uid="x")
    resolve(email="bruno@example.com", iban=IBAN_A)  # bruno (with carla) into anna

    bruno.refresh_from_db()
    carla.refresh_from_db()
    assert root == anna
    assert bruno.merged_into_id == anna.id and carla.merged_into_id == anna.id
    assert carla.merged_at == carla_merged_at  # history of the first merge is kept
    assert person_cluster_ids(person=carla) == [anna.id, bruno.id, carla.id]
    assert PersonEvent.objects.get(person=anna, kind="merged").detail == {
        "merged": [bruno.id],
        "members_moved": [carla.id],
    }


def test_name_and_language_fill_blanks_but_never_overwrite():
    person = resolve(email="anna@example.com")
    resolve(email="anna@example.com", name="Anna Rossi", language="en")
    resolve(email="anna@example.com", name="Someone Else", language="it")

    person.refresh_from_db()
    assert (person.display_name, person.preferred_language) == ("Anna Rossi", "en")


def test_a_new_iban_becomes_current_but_an_old_one_does_not_switch_back():
    person = resolve(email="anna@example.com", iban=IBAN_A)
    resolve(email="anna@example.com", iban=IBAN_B)
    assert person_current_bank_account(person=person).iban() == IBAN_B

    resolve(email="anna@example.com", iban=IBAN_A)

    assert person_current_bank_account(person=person).iban() == IBAN_B
    assert BankAccount.objects.filter(person=person).count() == 2


def test_the_survivor_without_an_account_is_paid_to_a_merged_persons_account():
    older = resolve(email="anna@example.com")
    resolve(whatsapp="+393331234567", iban=IBAN_A)

    resolve(email="anna@example.com", whatsapp="+393331234567")

    assert person_current_bank_account(person=older).iban() == IBAN_A


@pytest.mark.parametrize(
    ("identity", "code"),
    [
        ({"email": "anna@", "iban": IBAN_A}, "invalid_email"),
        ({"email": "anna@example.com", "whatsapp": "333 123 4567"}, "invalid_phone"),
        ({"email": "anna@example.com", "iban": "NL91ABNA0417164301"}, "invalid_iban"),
        ({"email": "anna@example.com", "social_provider": "tiktok"}, "invalid_social"),
        ({"email": "anna@example.com", "language": "klingon"}, "invalid_language"),
        ({"name": "Anna Rossi"}, "no_identifier"),
        ({"email": "   "}, "no_identifier"),
    ],
)
def test_bad_input_creates_nothing(identity, code):
    with pytest.raises(InvalidInput) as exc:
        resolve(**identity)

    assert exc.value.code == code
    assert not Person.objects.exists()
    assert not Identifier.objects.exists()
    assert not BankAccount.objects.exists()
    assert not PersonEvent.objects.exists()


def test_bad_input_for_a_known_person_changes_nothing():
    person = resolve(email="anna@example.com")

    with pytest.raises(InvalidInput):
        resolve(email="anna@example.com", whatsapp="+39 12", iban=IBAN_A)

    assert identifier_values(person) == {("email", "anna@example.com")}
    assert not BankAccount.objects.exists()


def test_the_same_value_in_two_kinds_does_not_link():
    email_person = resolve(social_provider="x", social_uid="anna@example.com")
    other = resolve(email="anna@example.com")

    assert email_person != other
    assert Identifier.objects.filter(kind=IdentifierKind.SOCIAL).get().value == "x:anna@example.com"


def test_a_known_person_is_resolved_without_writing(django_assert_max_num_queries):
    resolve(name="Anna", email="anna@example.com", whatsapp="+393331234567", iban=IBAN_A)

    with django_assert_max_num_queries(7) as captured:
        resolve(name="Anna", email="anna@example.com", whatsapp="+393331234567", iban=IBAN_A)

    statements = " ".join(q["sql"].upper() for q in captured.captured_queries if "SAVEPOINT" not in q["sql"].upper())
    assert "INSERT" not in statements and "UPDATE " not in statements.replace("FOR UPDATE", "")
