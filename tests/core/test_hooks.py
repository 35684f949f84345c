"""``core.hooks``: receivers run once per commit with every value fired in the transaction, never
for a transaction or savepoint that rolled back, at once outside a transaction, and one failing
receiver does not stop the others."""

from collections import defaultdict

import pytest
from django.db import transaction

from core import hooks

# Transactional: the hooks act on real commits and rollbacks, not a test-wide transaction.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def heard(monkeypatch):
    calls: list[tuple[str, list]] = []
    monkeypatch.setattr(hooks, "_receivers", defaultdict(list))
    hooks.hook_register("a", lambda values: calls.append(("a", list(values))))
    hooks.hook_register("b", lambda values: calls.append(("b", list(values))))
    return calls


def test_a_transaction_delivers_each_name_once_after_its_commit(heard):
    with transaction.atomic():
        hooks.hook_fire("a", 1)
        hooks.hook_fire("b", 2)
        hooks.hook_fire("a", 3, 4)
        assert heard == []  # nothing before the commit
    assert heard == [("a", [1, 3, 4]), ("b", [2])]


def test_a_rolled_back_transaction_delivers_nothing_and_the_next_one_only_its_own(heard):
    with pytest.raises(RuntimeError), transaction.atomic():
        hooks.hook_fire("a", 1)
        raise RuntimeError("rolled back")
    assert heard == []
    with transaction.atomic():
        hooks.hook_fire("a", 2)
    assert heard == [("a", [2])]


def test_values_of_a_rolled_back_savepoint_are_dropped_and_the_rest_delivered(heard):
    with transaction.atomic():
        hooks.hook_fire("a", 1)
        with pytest.raises(RuntimeError), transaction.atomic():
            hooks.hook_fire("a", 2)
            raise RuntimeError("savepoint rolled back")
        hooks.hook_fire("a", 3)
    delivered = [v for _, values in heard for v in values]
    assert sorted(delivered) == [1, 3]


def test_outside_a_transaction_a_receiver_runs_at_once(heard):
    hooks.hook_fire("b", 42)
    assert heard == [("b", [42])]


def test_a_failing_receiver_does_not_stop_the_others_nor_reach_the_caller(heard):
    def broken(values):
        raise ConnectionError("broker down")

    hooks._receivers["a"].insert(0, broken)
    with transaction.atomic():
        hooks.hook_fire("a", 1)
    assert heard == [("a", [1])]


def test_registering_twice_runs_once(heard):
    receiver = hooks._receivers["a"][0]
    hooks.hook_register("a", receiver)
    hooks.hook_fire("a", 1)
    assert heard == [("a", [1])]


def test_an_in_transaction_receiver_runs_at_each_fire_and_its_failure_is_the_callers(heard, monkeypatch):
    inside = []
    monkeypatch.setattr(hooks, "_in_transaction", defaultdict(list))
    hooks.hook_register(
        "a", lambda values: inside.append((transaction.get_connection().in_atomic_block, values)), in_transaction=True
    )
    with transaction.atomic():
        hooks.hook_fire("a", 1)
        hooks.hook_fire("a", 2, 3)
        assert inside == [(True, [1]), (True, [2, 3])]
        assert heard == []  # the after-commit receivers still wait for the commit
    assert heard == [("a", [1, 2, 3])]

    def broken(values):
        raise ConnectionError("database gone")

    hooks.hook_register("b", broken, in_transaction=True)
    with pytest.raises(ConnectionError), transaction.atomic():
        hooks.hook_fire("b", 4)
    assert ("b", [4]) not in heard
