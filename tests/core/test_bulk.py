"""``core.bulk``: COPY-based inserts store exactly what ``bulk_create`` stores (defaults, JSON,
choices, auto timestamps), and a refused row is an IntegrityError that keeps nothing."""

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.bulk import COPY_FROM, insert_statement, model_new, rows_copy, rows_insert
from recipients.models import Identifier, IdentifierKind, Person, PersonEvent, PersonEventKind
from tests.recipients.factories import people_brand

pytestmark = pytest.mark.django_db

N = COPY_FROM + 4  # enough to take the COPY path on PostgreSQL


def stored(model, ids, fields):
    return [tuple(row) for row in model.objects.filter(pk__in=ids).order_by("pk").values_list(*fields)]


def test_rows_insert_sets_ids_and_stores_what_bulk_create_stores():
    by_copy = rows_insert(Person, [Person(display_name=f"P{i}", created_source="api") for i in range(N)])
    by_orm = Person.objects.bulk_create([Person(display_name=f"P{i}", created_source="api") for i in range(N)])

    assert all(p.pk for p in by_copy) and len({p.pk for p in by_copy}) == N
    fields = ["display_name", "preferred_language", "created_source", "merged_into_id", "erased_at"]
    assert stored(Person, [p.pk for p in by_copy], fields) == stored(Person, [p.pk for p in by_orm], fields)
    assert Person.objects.filter(pk__in=[p.pk for p in by_copy], created_at__isnull=False).count() == N
    assert not by_copy[0]._state.adding


def test_rows_copy_fills_model_defaults_json_and_choices():
    person = Person.objects.create(display_name="Ann")
    rows_copy(
        PersonEvent,
        ["person_id", "kind", "detail"],
        [(person.pk, PersonEventKind.IBAN_SET, {"n": i, "nested": {"ok": True}}) for i in range(N)],
    )

    events = list(PersonEvent.objects.filter(person=person).order_by("pk"))
    assert [e.detail["n"] for e in events] == list(range(N))
    assert {(e.kind, e.source, e.actor_id) for e in events} == {("iban_set", "", None)}  # the value, not the name
    assert all(e.created_at is not None for e in events)


def test_a_refused_copy_is_an_integrity_error_and_keeps_nothing():
    brand = people_brand()
    person = Person.objects.create(brand=brand, display_name="Ann")
    Identifier.objects.create(person=person, brand=brand, kind=IdentifierKind.EMAIL, value="taken@example.com")
    rows = [(person.pk, brand.pk, IdentifierKind.EMAIL, f"p{i}@example.com") for i in range(N)]
    rows.append((person.pk, brand.pk, IdentifierKind.EMAIL, "taken@example.com"))

    with pytest.raises(IntegrityError), transaction.atomic():
        rows_copy(Identifier, ["person_id", "brand_id", "kind", "value"], rows)

    assert list(Identifier.objects.filter(person=person).values_list("value", flat=True)) == ["taken@example.com"]


def _state(obj) -> dict:
    """Everything an instance holds: field values, cached relations, adding/db."""
    data = {k: v for k, v in vars(obj).items() if k != "_state"}
    return {**data, "_cache": dict(obj._state.fields_cache), "_adding": obj._state.adding, "_db": obj._state.db}


@pytest.mark.parametrize(
    "model, values",
    [
        # plain fields, defaults for the rest (a callable default, a JSON default, choices)
        (Person, {"display_name": "Ann", "created_source": "api"}),
        (PersonEvent, {"person_id": 7, "kind": PersonEventKind.IBAN_SET, "detail": {"n": 1}}),
        # a related object by name, and None for a nullable one
        ("person", {"kind": IdentifierKind.EMAIL, "value": "a@example.com", "source": "api"}),
    ],
)
def test_model_new_builds_what_the_constructor_builds(model, values):
    if model == "person":
        person = Person.objects.create(display_name="Ann")
        model, values = Identifier, {**values, "person": person}
    assert _state(model_new(model, **values)) == _state(model(**values))


def test_model_new_sets_both_sides_of_a_one_to_one_and_refuses_unknown_names():
    from campaigns.models import Reward, TriggerEvent

    event = TriggerEvent(id=5, external_id="e")
    reward = model_new(Reward, event=event, decided_by=None, amount_minor=1)
    assert (reward.event_id, reward.event, reward.decided_by_id, reward.decided_by) == (5, event, None, None)
    assert event.reward is reward  # as Reward(event=event) leaves it: no query to find it
    with pytest.raises(TypeError, match="nonsense"):
        model_new(Reward, nonsense=1)


def test_model_new_takes_the_constructor_when_something_listens_for_init():
    from django.db.models.signals import post_init

    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=Person)
    try:
        person = model_new(Person, display_name="Ann")
    finally:
        post_init.disconnect(receiver, sender=Person)
    assert seen == [person]


def _prepared_the_orm_way(model, objs, *, keys=True):
    """``insert_statement``'s parameters as the field-by-field preparation gives them."""
    from django.db import connections

    conn = connections["default"]
    fields = [f for f in model._meta.concrete_fields if keys or f is not model._meta.pk]
    return [f.get_db_prep_save(f.pre_save(obj, add=True), conn) for obj in objs for f in fields]


def test_insert_statement_prepares_values_as_the_orm_does(monkeypatch):
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    monkeypatch.setattr(timezone, "now", lambda: now)  # auto_now_add: the same time both ways
    from campaigns.models import Reward, RewardStatus, TriggerEvent

    person = Person.objects.create(display_name="Ann")
    people = [Person(id=10, display_name="Bo", created_source="api"), Person(display_name="", merged_into=person)]
    identifiers = [Identifier(person=person, kind=IdentifierKind.EMAIL, value="a@example.com", is_active=True)]
    event = TriggerEvent(id=3, brand_id=1, campaign_id=2, external_id="e-1", evidence={"a": [1, 2]}, ip="10.0.0.1")
    rewards = [
        Reward(id=4, event=event, campaign_id=2, rule_id=5, person=person, amount_minor=500, fee_minor=0,
               status=RewardStatus.HELD, hold_id=9, review_reasons=["x"]),
    ]  # fmt: skip
    for model, objs, keys in [
        (Person, people, True),
        (Identifier, identifiers, False),
        (TriggerEvent, [event], True),
        (Reward, rewards, True),
    ]:
        _, params = insert_statement(model, objs, keys=keys)
        assert [_comparable(p) for p in params] == [
            _comparable(p) for p in _prepared_the_orm_way(model, objs, keys=keys)
        ]


def _comparable(value):
    """Type and value (JSON by what it wraps)."""
    return type(value), getattr(value, "obj", value)
