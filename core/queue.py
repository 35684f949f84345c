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

from django.conf import settings
from django.db import transaction
from django_q.conf import Conf
from django_q.tasks import async_task


def task_class(func: str) -> str | None:
    """The cluster whose queue runs ``func`` (``settings.Q_ROUTES``); None for the default one."""
    return next((name for prefix, name in settings.Q_ROUTES.items() if func.startswith(prefix)), None)


def enqueue(func: str, *args, **options) -> str | None:
    """``async_task(func, *args, **options)`` in the caller's transaction (or one of its own), on
    the queue of the task's class. Every enqueue of the project goes through here. When tasks run
    synchronously (the tests), one enqueued inside a transaction runs once it commits, as a worker
    would see it."""
    cluster = task_class(func)
    if cluster is not None:
        options.setdefault("cluster", cluster)
    if Conf.SYNC:  # run here and now: no queue row, and the task opens its own transactions
        if transaction.get_connection().in_atomic_block:
            transaction.on_commit(lambda: async_task(func, *args, **options))
            return None
        return async_task(func, *args, **options)
    with transaction.atomic(savepoint=False):
        return async_task(func, *args, **options)
