"""Real threads on PostgreSQL: the unique constraint on identifiers decides every race."""

import threading
from collections.abc import Callable

import pytest
from django.db import connection

from recipients.models import BankAccount, Identifier, Person, PersonEvent, PersonEventKind
from recipients.selectors import person_cluster_ids, person_root
from recipients.services import IdentityInput, person_resolve
from tests.recipients.factories import iban, people_brand

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 8
IBAN_A = iban("NL", 1)


@pytest.fixture(autouse=True)
def _people_brand_first():
    """Created before the threads start: they only read it."""
    people_brand()


def run_in_threads(work: Callable[[int], Person]) -> list[Person]:
    """Start every thread at once (a barrier) so they really race, and collect their results."""
    barrier = threading.Barrier(THREADS)
    results: list[Person | None] = [None] * THREADS
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return results


def test_eight_threads_resolving_the_same_identifiers_make_one_person():
    identity = IdentityInput(name="Anna", email="anna@example.com", whatsapp="+393331234567", iban=IBAN_A)

    people = run_in_threads(
        lambda i: person_resolve(brand_id=people_brand().pk, identity=identity, source=f"thread-{i}")
    )

    assert Person.objects.count() == 1
    assert {p.id for p in people} == {Person.objects.get().id}
    assert Identifier.objects.count() == 3
    assert BankAccount.objects.count() == 1


def test_eight_registrations_sharing_one_iban_end_as_one_root():
    people = run_in_threads(
        lambda i: person_resolve(
            brand_id=people_brand().pk, identity=IdentityInput(email=f"anna{i}@example.com", iban=IBAN_A), source="t"
        )
    )

    roots = {person_root(person=p).id for p in people}
    assert len(roots) == 1
    assert Identifier.objects.filter(kind="email").count() == THREADS
    assert BankAccount.objects.filter(is_current=True).count() == 1


def test_concurrent_chained_merges_flatten_into_the_oldest():
    # Nine people, then eight threads each linking person i with person i+1 through a shared
    # social account: all nine are one human in the end, whatever order the threads win in.
    people = [
        person_resolve(brand_id=people_brand().pk, identity=IdentityInput(email=f"p{i}@example.com"), source="t")
        for i in range(THREADS + 1)
    ]

    def link(i: int) -> Person:
        link_identity = {"social_provider": "link", "social_uid": f"{i}-{i + 1}"}
        person_resolve(
            brand_id=people_brand().pk, identity=IdentityInput(email=f"p{i}@example.com", **link_identity), source="t"
        )
        return person_resolve(
            brand_id=people_brand().pk,
            identity=IdentityInput(email=f"p{i + 1}@example.com", **link_identity),
            source="t",
        )

    run_in_threads(link)

    oldest = people[0]
    assert Person.objects.filter(merged_into__isnull=True).get() == oldest
    # Flattened: nobody points at anyone but the root.
    assert set(Person.objects.exclude(id=oldest.id).values_list("merged_into_id", flat=True)) == {oldest.id}
    assert person_cluster_ids(person=people[-1]) == sorted(p.id for p in people)
    # Each of the eight younger people was merged away exactly once, with an audit row.
    merged_away = [
        pk for event in PersonEvent.objects.filter(kind=PersonEventKind.MERGED) for pk in event.detail.get("merged", [])
    ]
    assert sorted(merged_away) == sorted(p.id for p in people[1:])
