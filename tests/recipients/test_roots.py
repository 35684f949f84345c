"""Person roots: the one lock helper, and the one resolver every write about a person goes through."""

import re
from pathlib import Path

import pytest
from django.db import transaction

from recipients.models import BankAccount, Person, PersonEvent, PersonEventKind
from recipients.services import IdentityInput, people_resolve, person_resolve, person_root_lock
from recipients.services.roots import person_roots_lock
from tests.recipients.factories import PersonFactory, iban, people_brand

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
APPS = ("campaigns", "core", "payouts", "recipients", "reconciliation", "web")


def _sources():
    for app in APPS:
        yield from (path for path in (ROOT / app).rglob("*.py") if "migrations" not in path.parts)


def test_person_rows_are_locked_only_by_the_lock_helper():
    lockers = [
        path.relative_to(ROOT).as_posix()
        for path in _sources()
        if re.search(r"Person\.objects[^\n]*select_for_update", path.read_text())
    ]

    assert lockers == ["recipients/services/roots.py"]


def test_nothing_outside_the_services_imports_their_private_helpers():
    imports = re.compile(r"from recipients\.services[\w.]* import (?:\(([^)]*)\)|([^\n]*))")
    reaching = [
        f"{path.relative_to(ROOT).as_posix()}: {name}"
        for path in _sources()
        if "recipients/services" not in path.as_posix()
        for group in imports.findall(path.read_text())
        for name in re.findall(r"\w+", "".join(group))
        if name.startswith("_")
    ]

    assert reaching == []


def test_the_lock_helper_returns_only_the_rows_still_roots():
    root = PersonFactory()
    merged = PersonFactory(merged_into=root, merged_at=root.created_at)
    erased = PersonFactory(erased_at=root.created_at)

    with transaction.atomic():
        locked = person_roots_lock(root_ids={root.id, merged.id, erased.id})
        with_erased = person_roots_lock(root_ids={root.id, merged.id, erased.id}, erased_ok=True)

    assert set(locked) == {root.id}
    assert set(with_erased) == {root.id, erased.id}


def test_the_root_lock_of_a_merged_person_is_its_roots():
    root = PersonFactory()
    merged = PersonFactory(merged_into=root, merged_at=root.created_at)

    with transaction.atomic():
        assert person_root_lock(person=merged) == root


def test_an_anchor_takes_the_identifiers_and_its_account_becomes_current():
    brand = people_brand()
    anna = person_resolve(
        brand_id=brand.pk, identity=IdentityInput(email="anna@example.com", iban=iban("NL", 1)), source="t"
    )

    person = person_resolve(
        brand_id=brand.pk,
        identity=IdentityInput(whatsapp="+393331234567", iban=iban("NL", 2), proven=frozenset()),
        source="claim_page",
        anchor=anna,
    )

    assert person == anna
    current = BankAccount.objects.get(person=anna, is_current=True)
    assert current.iban() == iban("NL", 2) and current.source == "claim_page"
    assert PersonEvent.objects.filter(person=anna, kind=PersonEventKind.IBAN_SET).count() == 2


def test_a_new_person_gets_the_same_account_and_event_written_in_a_batch_or_alone():
    """New people are inserted set-wise; one that shares an identifier with another identity of
    its batch is written alone. Both go through the one account writer: same rows."""
    brand = people_brand()
    batch = people_resolve(
        brand_id=brand.pk,
        identities=[IdentityInput(email="bulk@example.com", iban=iban("NL", 3))],
        sources=["t"],
    )
    alone = people_resolve(
        brand_id=brand.pk,
        identities=[
            IdentityInput(email="one@example.com", iban=iban("NL", 4)),
            IdentityInput(email="one@example.com", whatsapp="+393337654321"),
        ],
        sources=["t", "t"],
    )

    def written(person: Person) -> tuple:
        account = BankAccount.objects.get(person=person)
        event = PersonEvent.objects.get(person=person, kind=PersonEventKind.IBAN_SET)
        return (
            account.is_current,
            account.kind,
            account.country,
            account.source,
            {k: v for k, v in event.detail.items() if k != "bank_account"},
            event.detail["bank_account"] == account.id,
        )

    assert written(batch[0].person) == written(alone[0].person)
    assert alone[0].person == alone[1].person
