"""Background work under a hot campaign (issue 26): a payout's execute task is in the queue once
while it waits, however often the sweep runs; each task goes to its class's queue; the
every-minute tick is bounded in time, leaves the enqueued tasks their time, and a late copy of
it returns at once. Against the real queue table (django-q2's ORM broker), not a stand-in."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import OrmQ, Schedule
from django_q.signing import SignedPackage

from campaigns.models import RewardStatus
from core.queue import INTENDED, enqueue, tick, tick_superseded
from payouts import tasks
from payouts.models import Payout, PayoutStatus
from payouts.services import payout_execute, payouts_create_for_payable, payouts_enqueue_due
from tests.payouts.payout_fixtures import *  # noqa: F403 - fixtures
from tests.payouts.payout_fixtures import iban, payable_reward

pytestmark = pytest.mark.django_db(transaction=True)

EXECUTE = "payouts.tasks.payout_execute_task"


@pytest.fixture
def queue(monkeypatch):
    """Tasks go to the queue table instead of running here."""
    monkeypatch.setattr(Conf, "SYNC", False)


def queued() -> list[tuple[str, str, tuple]]:
    """(queue, task, args) of every waiting task."""
    out = []
    for row in OrmQ.objects.order_by("id"):
        task = SignedPackage.loads(row.payload)
        out.append((row.key, task["func"], tuple(task["args"])))
    return out


def execute_tasks() -> list[int]:
    return [args[0] for key, func, args in queued() if func == EXECUTE]


def test_the_sweep_enqueues_a_waiting_payout_once_however_often_it_runs(sandbox, debtor, brand, campaign, queue):
    payable_reward(brand, account_iban=iban())
    created = payouts_create_for_payable().created  # enqueues its execution in its transaction
    assert execute_tasks() == created
    for _ in range(3):
        assert payouts_enqueue_due() == 0
    assert execute_tasks() == created

    # The task runs: the claim clears the mark, and a settled payout is never enqueued again.
    OrmQ.objects.all().delete()
    assert payout_execute(payout_id=created[0]) == "settled"
    assert payouts_enqueue_due() == 0 and execute_tasks() == []
    assert Payout.objects.get(pk=created[0]).queued_at is None


def test_a_task_that_found_its_payout_not_due_lets_the_sweep_enqueue_it_when_due(
    sandbox, debtor, brand, campaign, queue
):
    payable_reward(brand, account_iban=iban())
    [payout_id] = payouts_create_for_payable().created
    OrmQ.objects.all().delete()
    later = timezone.now() + timedelta(minutes=5)
    Payout.objects.filter(pk=payout_id).update(next_attempt_at=later)
    assert payout_execute(payout_id=payout_id) == "not_claimed"
    assert payouts_enqueue_due() == 0  # not due yet
    assert payouts_enqueue_due(now=later) == 1 and execute_tasks() == [payout_id]
    assert payouts_enqueue_due(now=later) == 0 and execute_tasks() == [payout_id]


def test_a_task_lost_before_its_claim_is_enqueued_again_after_the_requeue_time(
    sandbox, debtor, brand, campaign, queue, settings
):
    settings.PAYOUT_REQUEUE_AFTER_SECONDS = 600
    payable_reward(brand, account_iban=iban())
    [payout_id] = payouts_create_for_payable().created
    OrmQ.objects.all().delete()  # the task failed before its claim: acked, gone
    assert payouts_enqueue_due() == 0
    assert payouts_enqueue_due(now=timezone.now() + timedelta(seconds=601)) == 1
    assert execute_tasks() == [payout_id]


def test_a_payout_its_creator_runs_itself_gets_no_second_executor_from_the_sweep(
    sandbox, debtor, brand, campaign, queue, settings
):
    # bench-viral: the tick's sweep enqueued a task for a payout that the ready task had just
    # created to run inline; the task then found it settled (1 execute run for a settled payout).
    settings.PAYOUT_REQUEUE_AFTER_SECONDS = 600
    payable_reward(brand, account_iban=iban())
    [payout_id] = payouts_create_for_payable(enqueue=False).created
    assert payouts_enqueue_due() == 0 and execute_tasks() == []
    assert payout_execute(payout_id=payout_id) == "settled"
    assert payouts_enqueue_due() == 0 and execute_tasks() == []


def test_a_creator_that_died_before_running_its_payout_leaves_it_to_the_sweep_after_the_requeue_time(
    sandbox, debtor, brand, campaign, queue, settings
):
    settings.PAYOUT_REQUEUE_AFTER_SECONDS = 600
    payable_reward(brand, account_iban=iban())
    [payout_id] = payouts_create_for_payable(enqueue=False).created
    assert payouts_enqueue_due(now=timezone.now() + timedelta(seconds=601)) == 1
    assert execute_tasks() == [payout_id]


def test_each_task_goes_to_the_queue_of_its_class_whichever_cluster_enqueues_it(queue, monkeypatch):
    monkeypatch.setattr(Conf, "CLUSTER_NAME", "ticks")  # as inside a tick
    enqueue("payouts.tasks.payout_execute_task", 1)
    enqueue("recipients.tasks.notices_send_task", ["k"])
    enqueue("campaigns.webhook_tasks.webhook_deliveries_send_task", [1])
    assert [(key, func) for key, func, _ in queued()] == [
        (Conf.PREFIX, "payouts.tasks.payout_execute_task"),
        ("notices", "recipients.tasks.notices_send_task"),
        ("webhooks", "campaigns.webhook_tasks.webhook_deliveries_send_task"),
    ]


@pytest.mark.django_db  # the migrations' schedules: a transactional test's flush would remove them
def test_every_interval_schedule_runs_on_the_ticks_cluster_and_skips_a_late_copy():
    schedules = list(Schedule.objects.filter(schedule_type=Schedule.MINUTES))
    assert schedules
    for schedule in schedules:
        assert (schedule.cluster, schedule.intended_date_kwarg) == ("ticks", INTENDED), schedule.name
        module, name = schedule.func.rsplit(".", 1)
        func = getattr(__import__(module, fromlist=[name]), name)
        assert getattr(func, "__wrapped__", None) is not None, f"{schedule.func} is not a @tick"


def test_a_copy_of_a_tick_whose_schedule_enqueued_a_newer_one_returns_at_once(db):
    runs = []

    @tick
    def sweep():
        runs.append(1)
        return "ran"

    path = f"{sweep.__module__}.{sweep.__qualname__}"  # what the schedule names
    due = timezone.now() - timedelta(minutes=3)  # late, however late: what counts is a newer copy
    schedule, _ = Schedule.objects.update_or_create(
        name="a sweep", defaults={"func": path, "schedule_type": Schedule.MINUTES, "minutes": 1}
    )
    Schedule.objects.filter(pk=schedule.pk).update(next_run=due + timedelta(minutes=1))  # this is the newest copy
    assert not tick_superseded(path, due)
    Schedule.objects.filter(pk=schedule.pk).update(next_run=due + timedelta(minutes=2))  # the next one is queued
    assert tick_superseded(path, due)
    assert sweep(**{INTENDED: due.isoformat()}) == "superseded by a newer copy"
    assert sweep(**{INTENDED: (due + timedelta(minutes=1)).isoformat()}) == "ran"
    assert sweep() == "ran"  # run by hand
    assert runs == [1, 1]


def test_the_tick_leaves_fresh_payable_rewards_to_their_task_and_takes_the_older_ones(
    sandbox, debtor, brand, campaign, queue
):
    old = payable_reward(brand, account_iban=iban())
    fresh = payable_reward(brand, account_iban=iban())
    type(old).objects.filter(pk=old.pk).update(updated_at=timezone.now() - tasks.SWEEP_GRACE - timedelta(seconds=1))
    result = tasks.payouts_tick()
    assert result["created"] == 1
    assert Payout.objects.filter(items__reward=old).exists()
    assert not Payout.objects.filter(items__reward=fresh).exists()


def test_the_tick_starts_nothing_once_its_budget_is_spent(sandbox, debtor, brand, campaign, queue, monkeypatch):
    reward = payable_reward(brand, account_iban=iban())
    type(reward).objects.filter(pk=reward.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    monkeypatch.setattr(tasks, "TICK_BUDGET_SECONDS", 0)
    assert tasks.payouts_tick()["created"] == 0
    assert reward.__class__.objects.get(pk=reward.pk).status == RewardStatus.PAYABLE
    assert not Payout.objects.exclude(status=PayoutStatus.CANCELLED).exists()


def test_the_execute_task_finishes_what_it_settles_without_a_follow_up_task(sandbox, debtor, brand, campaign, queue):
    reward = payable_reward(brand, account_iban=iban())
    [payout_id] = payouts_create_for_payable().created
    OrmQ.objects.all().delete()
    assert tasks.payout_execute_task(payout_id) == "settled"
    assert type(reward).objects.get(pk=reward.pk).status == RewardStatus.PAID
    assert [func for _, func, _ in queued()] == ["recipients.tasks.notices_send_task"]  # the paid notice only


def test_a_payout_settled_elsewhere_still_gets_its_follow_up_task(sandbox, debtor, brand, campaign, queue):
    from payouts.services import payout_execute

    payable_reward(brand, account_iban=iban())
    [payout_id] = payouts_create_for_payable().created
    OrmQ.objects.all().delete()
    assert payout_execute(payout_id=payout_id) == "settled"  # not the task: nobody finishes it here
    assert "payouts.tasks.payout_settled_followup_task" in [func for _, func, _ in queued()]


def test_a_worker_lost_between_settling_and_marking_paid_is_finished_by_the_tick(
    sandbox, debtor, brand, campaign, queue
):
    from payouts.services import payout_execute

    reward = payable_reward(brand, account_iban=iban())
    [payout_id] = payouts_create_for_payable().created
    assert payout_execute(payout_id=payout_id) == "settled"
    OrmQ.objects.all().delete()  # the follow-up task is lost with its worker
    assert tasks.payouts_tick()["finished"] == 0  # within the grace: its task's turn
    assert type(reward).objects.get(pk=reward.pk).status == RewardStatus.PAYABLE
    Payout.objects.filter(pk=payout_id).update(settled_at=timezone.now() - tasks.SWEEP_GRACE - timedelta(seconds=1))
    assert tasks.payouts_tick()["finished"] == 1
    assert type(reward).objects.get(pk=reward.pk).status == RewardStatus.PAID
    assert tasks.payouts_tick()["finished"] == 0  # once
