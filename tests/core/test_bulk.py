"""``core.bulk``: inserts (``bulk_create`` for a few rows, COPY for more) store exactly what
``bulk_create`` stores (defaults, JSON, choices, auto timestamps, a parent saved after it was
set), a refused row is an IntegrityError that keeps nothing, and ``joined_models`` builds the
instances the ORM builds."""

import pytest
from django.db import IntegrityError, transaction

from campaigns.models import Brand
from core.bulk import COPY_FROM, joined_models, rows_insert
from recipients.models import Identifier, IdentifierKind, Person, PersonEvent, PersonEventKind
from tests.recipients.factories import people_brand

pytestmark = pytest.mark.django_db

# Both write paths on PostgreSQL: bulk_create below COPY_FROM rows, COPY from there.
SIZES = pytest.mark.parametrize("N", [COPY_FROM - 1, COPY_FROM + 4], ids=["bulk_create", "copy"])


def stored(model, ids, fields):
    return [tuple(row) for row in model.objects.filter(pk__in=ids).order_by("pk").values_list(*fields)]


@SIZES
def test_rows_insert_sets_ids_and_stores_what_bulk_create_stores(N):
    by_copy = rows_insert(Person, [Person(display_name=f"P{i}", created_source="api") for i in range(N)])
    by_orm = Person.objects.bulk_create([Person(display_name=f"P{i}", created_source="api") for i in range(N)])

    assert all(p.pk for p in by_copy) and len({p.pk for p in by_copy}) == N
    fields = ["display_name", "preferred_language", "created_source", "merged_into_id", "erased_at"]
    assert stored(Person, [p.pk for p in by_copy], fields) == stored(Person, [p.pk for p in by_orm], fields)
    assert Person.objects.filter(pk__in=[p.pk for p in by_copy], created_at__isnull=False).count() == N
    assert not by_copy[0]._state.adding


@SIZES
def test_rows_insert_without_keys_fills_model_defaults_json_and_choices(N):
    person = Person.objects.create(display_name="Ann")
    rows_insert(
        PersonEvent,
        [
            PersonEvent(person=person, kind=PersonEventKind.IBAN_SET, detail={"n": i, "nested": {"ok": True}})
            for i in range(N)
        ],
        keys=False,
    )

    events = list(PersonEvent.objects.filter(person=person).order_by("pk"))
    assert [e.detail["n"] for e in events] == list(range(N))
    assert {(e.kind, e.source, e.actor_id) for e in events} == {("iban_set", "", None)}  # the value, not the name
    assert all(e.created_at is not None for e in events)


@SIZES
def test_rows_insert_takes_a_parent_saved_after_it_was_set(N):
    people = [Person(display_name=f"P{i}") for i in range(N)]
    identifiers = [
        Identifier(person=p, kind=IdentifierKind.EMAIL, value=f"p{i}@example.com") for i, p in enumerate(people)
    ]
    rows_insert(Person, people)

    rows_insert(Identifier, identifiers, keys=False)

    stored_pairs = set(Identifier.objects.filter(person__in=people).values_list("person_id", "value"))
    assert stored_pairs == {(p.pk, f"p{i}@example.com") for i, p in enumerate(people)}


@SIZES
def test_a_refused_copy_is_an_integrity_error_and_keeps_nothing(N):
    brand = people_brand()
    person = Person.objects.create(brand=brand, display_name="Ann")
    Identifier.objects.create(person=person, brand=brand, kind=IdentifierKind.EMAIL, value="taken@example.com")
    values = [*(f"p{i}@example.com" for i in range(N)), "taken@example.com"]
    rows = [Identifier(person=person, brand=brand, kind=IdentifierKind.EMAIL, value=v) for v in values]

    with pytest.raises(IntegrityError), transaction.atomic():
        rows_insert(Identifier, rows, keys=False)

    assert list(Identifier.objects.filter(person=person).values_list("value", flat=True)) == ["taken@example.com"]


def test_joined_models_builds_what_the_orm_builds_and_none_where_a_left_join_found_nothing():
    brand = people_brand()
    ann = Person.objects.create(brand=brand, display_name="Ann", preferred_language="it")
    bob = Person.objects.create(brand=brand, display_name="Bob")
    Identifier.objects.create(person=ann, brand=brand, kind=IdentifierKind.EMAIL, value="ann@example.com")
    PersonEvent.objects.create(person=ann, kind=PersonEventKind.IBAN_SET, detail={"n": 1, "nested": [True]})

    rows = joined_models(
        ((Person, "p"), (Brand, "b"), (PersonEvent, "e")),
        f"FROM {Person._meta.db_table} p JOIN {Brand._meta.db_table} b ON b.id = p.brand_id "  # noqa: S608
        f"LEFT JOIN {PersonEvent._meta.db_table} e ON e.person_id = p.id WHERE p.brand_id = %s ORDER BY p.id",
        [brand.pk],
    )

    assert [(p.pk, b.pk) for p, b, _ in rows] == [(ann.pk, brand.pk), (bob.pk, brand.pk)]
    (got_ann, got_brand, event), (got_bob, _, no_event) = rows
    assert no_event is None
    orm_ann = Person.objects.get(pk=ann.pk)
    fields = [f.attname for f in Person._meta.concrete_fields]
    assert [getattr(got_ann, f) for f in fields] == [getattr(orm_ann, f) for f in fields]  # datetimes, choices
    assert event.detail == {"n": 1, "nested": [True]}  # JSON decoded by the field's converter
    assert got_brand.name == Brand.objects.get(pk=brand.pk).name
    assert not got_ann._state.adding and got_bob._state.db == "default"
