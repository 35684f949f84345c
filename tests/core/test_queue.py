"""``core.queue.enqueue``: a task enqueued after a commit (outside any transaction) does not cost
the thread its database connection, as django-q2's ORM broker's own ``async_task`` does there."""

import pytest
from django.db import connection
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.tasks import async_task

from core.queue import enqueue

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker(settings, monkeypatch):
    """The ORM broker as in production, tasks queued and not run inline, with connections not
    kept (``DB_CONN_MAX_AGE=0``), where closing one costs most."""
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setitem(settings.DATABASES["default"], "CONN_MAX_AGE", 0)
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    connection.close()  # a connection's age limit is set when it connects
    connection.ensure_connection()
    yield
    connection.close()


def test_enqueue_keeps_the_connection_and_queues_the_task(broker):
    before = connection.connection
    enqueue("math.floor", 1.5)
    assert connection.connection is before
    assert OrmQ.objects.count() == 1


@pytest.mark.postgres  # the in-memory SQLite test database is never closed
def test_the_brokers_own_async_task_drops_it_there(broker):
    """Why ``enqueue`` exists: if this ever stops holding, it can go."""
    before = connection.connection
    async_task("math.floor", 1.5)
    assert connection.connection is not before
