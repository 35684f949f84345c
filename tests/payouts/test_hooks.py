"""``payouts.hooks``: rewards that need paying out now are enqueued in the transaction that changed
them (``core.hooks``), a batch's people together (``PEOPLE_PER_TASK`` to a task), kept or lost with
that transaction; the batch tasks pay each person and isolate one's failure."""

import pytest
from django_q.conf import Conf
from django_q.models import OrmQ

from campaigns.models import Reward, TriggerEvent
from campaigns.services import event_ingest, event_ingest_bulk, ingest_batch, rewards_mature
from payouts import hooks, tasks
from payouts.models import Payout
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.conftest import event
from tests.payouts.payout_fixtures import *  # noqa: F403 - fixtures
from tests.payouts.payout_fixtures import iban

# Transactional: the hooks act on real commits and rollbacks, not a test-wide transaction.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def enqueued(settings, monkeypatch, sandbox, campaign):
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = True
    calls: list[tuple[str, list[int]]] = []
    monkeypatch.setattr(hooks, "enqueue", lambda func, ids: calls.append((func, list(ids))))
    return calls


def test_a_bulk_call_enqueues_its_people_in_one_task(brand, enqueued):
    results = event_ingest_bulk(brand=brand, payloads=[event(iban=iban()) for _ in range(3)])
    people = sorted(r.reward.person_id for r in results)
    assert enqueued == [(hooks.READY_TASK, people)]


def test_many_people_are_split_into_tasks_of_people_per_task(brand, enqueued, monkeypatch):
    monkeypatch.setattr(hooks, "PEOPLE_PER_TASK", 2)
    results = event_ingest_bulk(brand=brand, payloads=[event(iban=iban()) for _ in range(5)])
    people = sorted(r.reward.person_id for r in results)
    assert enqueued == [(hooks.READY_TASK, people[i : i + 2]) for i in (0, 2, 4)]


def test_a_failed_enqueue_stores_nothing_so_no_reward_is_left_without_its_task(brand, enqueued, monkeypatch):
    def broken(func, ids):
        raise ConnectionError("database gone")

    monkeypatch.setattr(hooks, "enqueue", broken)
    with pytest.raises(ConnectionError):
        event_ingest(brand=brand, payload=event(iban=iban()))
    assert not Reward.objects.exists()
    assert not TriggerEvent.objects.exists()


def test_the_task_row_commits_and_rolls_back_with_the_rewards(brand, settings, sandbox, campaign, monkeypatch):
    """The real queue, not a stand-in: the task is a row of the ingesting transaction."""
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = True
    monkeypatch.setattr(Conf, "SYNC", False)
    fire, seen = ingest_batch.hook_fire, []

    def fire_then_crash(name, *values):
        fire(name, *values)
        seen.append(OrmQ.objects.count())  # written in the transaction …
        raise RuntimeError("worker killed before the commit")

    monkeypatch.setattr(ingest_batch, "hook_fire", fire_then_crash)
    with pytest.raises(RuntimeError, match="worker killed"):
        event_ingest(brand=brand, payload=event(iban=iban()))
    assert seen[0] == 1
    assert not OrmQ.objects.exists()  # … and gone with it
    monkeypatch.setattr(ingest_batch, "hook_fire", fire)
    result = event_ingest(brand=brand, payload=event(iban=iban()))
    (task,) = OrmQ.objects.all()
    assert task.task["func"] == hooks.READY_TASK
    assert task.task["args"] == ([result.reward.person_id],)


def test_a_single_event_enqueues_its_person(brand, enqueued):
    result = event_ingest(brand=brand, payload=event(iban=iban()))
    assert enqueued == [(hooks.READY_TASK, [result.reward.person_id])]


def test_maturing_a_batch_enqueues_its_people_together_not_a_task_each(brand, enqueued):
    results = event_ingest_bulk(brand=brand, payloads=[event(iban=iban()) for _ in range(3)])
    people = sorted(r.reward.person_id for r in results)
    enqueued.clear()
    assert rewards_mature() == 3
    assert enqueued == [(hooks.CREATE_TASK, people)]


def test_the_batch_task_pays_everyone_else_when_one_person_fails(monkeypatch):
    paid = []

    def create(person_id, **kwargs):
        if person_id == 2:
            raise RuntimeError("rail down")
        paid.append(person_id)
        return 1

    monkeypatch.setattr(tasks, "payouts_create_task", create)
    with pytest.raises(RuntimeError, match="rail down"):
        tasks.people_payouts_create_task([1, 2, 3])
    assert paid == [1, 3]


def test_a_batch_task_run_twice_pays_each_person_once(brand, sandbox, debtor, campaign):
    """A batch's payouts are created here and executed through the queue (inline in the tests); a
    retried or duplicated task finds them created and pays nobody again."""
    results = event_ingest_bulk(brand=brand, payloads=[event(iban=iban()) for _ in range(3)])
    people = sorted(r.reward.person_id for r in results)
    rewards_mature()
    assert tasks.people_payouts_create_task(people) == 3
    assert tasks.people_payouts_create_task(people) == 0
    payouts = list(Payout.objects.filter(person_id__in=people))
    assert sorted(p.person_id for p in payouts) == people
    assert all(sandbox.transfer_count(p.end_to_end_id) == 1 for p in payouts)
    assert ledger_verify_report().ok


def test_the_ready_task_matures_and_pays_only_its_people(brand, enqueued, debtor):
    # given two people whose rewards are due
    mine, other = (event_ingest(brand=brand, payload=event(iban=iban())).reward for _ in range(2))
    enqueued.clear()
    # when the task runs for one of them
    assert tasks.people_rewards_ready_task([mine.person_id]) == 1
    # then only that person's reward matured (and no task was queued: the task pays them itself)
    mine.refresh_from_db()
    other.refresh_from_db()
    assert (mine.status, other.status) == ("paid", "held")
    assert enqueued == []
    assert ledger_verify_report().ok
