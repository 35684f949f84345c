"""Enqueueing django-q2 tasks: in the caller's transaction, as one more row of it.

The broker is django-q2's ORM broker on the default database (``Q_CLUSTER["orm"]``), so a task
enqueued inside a transaction is a row of that transaction: a worker sees it exactly when the rows
it needs are committed, and it is lost or kept with them — nothing can fall between a commit and
an enqueue. Outside a transaction the enqueue is a short transaction of its own: django-q2 calls
``close_old_connections()`` whenever it enqueues outside one, which with ``CONN_MAX_AGE = 0``
would close this thread's connection (the next query then forks a new PostgreSQL backend).

Each task goes to the queue of its class (``settings.Q_ROUTES``; money when none is named), read
by that class's own cluster, so a backlog of webhooks never delays a payout.
"""

import functools
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django_q.conf import Conf
from django_q.models import Schedule
from django_q.tasks import async_task

# The keyword django-q2 passes every interval schedule's time it was due at (its
# ``intended_date_kwarg``, set by payouts migration 0013).
INTENDED = "intended"


def task_class(func: str) -> str:
    """The cluster whose queue runs ``func``: the one ``settings.Q_ROUTES`` names, else money
    (the default cluster). Always named: django-q2 puts a task enqueued without one on the queue
    of the process that enqueues it, so a payout enqueued by a tick would wait in the ticks queue."""
    return next(
        (name for prefix, name in settings.Q_ROUTES.items() if func.startswith(prefix)), settings.Q_CLUSTER["name"]
    )


def enqueue(func: str, *args, **options) -> str | None:
    """``async_task(func, *args, **options)`` in the caller's transaction (or one of its own), on
    the queue of the task's class. Every enqueue of the project goes through here. When tasks run
    synchronously (the tests), one enqueued inside a transaction runs once it commits, as a worker
    would see it."""
    options.setdefault("cluster", task_class(func))
    if Conf.SYNC:  # run here and now: no queue row, and the task opens its own transactions
        if transaction.get_connection().in_atomic_block:
            transaction.on_commit(lambda: async_task(func, *args, **options))
            return None
        return async_task(func, *args, **options)
    with transaction.atomic(savepoint=False):
        return async_task(func, *args, **options)


def tick(func):
    """For a task an interval schedule runs (every N minutes, on the ``ticks`` cluster): a copy
    whose schedule has enqueued a newer copy since returns at once instead of repeating that copy's
    work, so late copies never stack up work; the newest always runs. Each one bounds its own work
    in time, so the queue does not fall behind. Run by hand (no due time), it simply runs."""
    path = f"{func.__module__}.{func.__qualname__}"

    @functools.wraps(func)
    def run(*args, **kwargs):
        intended = kwargs.pop(INTENDED, None)
        if intended is not None and tick_superseded(path, datetime.fromisoformat(intended)):
            return "superseded by a newer copy"
        return func(*args, **kwargs)

    return run


def tick_superseded(path: str, intended: datetime) -> bool:
    """Whether schedule ``path`` has enqueued a newer copy than the one due at ``intended``: when it
    enqueues a copy, django-q2's scheduler moves ``next_run`` one interval on, so past the next
    slot means the next copy is in the queue."""
    row = Schedule.objects.filter(func=path, schedule_type=Schedule.MINUTES).values_list("next_run", "minutes").first()
    if row is None:
        return False
    next_run, minutes = row
    return next_run > intended + timedelta(minutes=minutes or 1)
