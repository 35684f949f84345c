"""Kept database connections (``DB_CONN_MAX_AGE``, issue 26): a worker cluster's broker polls and
tasks reuse one connection instead of forking a PostgreSQL backend each, and a connection the
database dropped is replaced by the next poll or task instead of failing it."""

import psycopg
import pytest
from django.conf import settings
from django.db import close_old_connections, connection
from django_q.brokers.orm import ORM

from config.settings.base import database_from_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_kept_connection_is_checked_before_reuse_and_a_closing_one_is_not():
    kept = database_from_url("postgres://app@db:5432/joyback", conn_max_age=60)
    assert kept["CONN_MAX_AGE"] == 60 and kept["CONN_HEALTH_CHECKS"] is True
    assert kept["OPTIONS"]["keepalives"] == 1 and kept["OPTIONS"]["keepalives_idle"] == 30
    per_use = database_from_url("postgres://app@db:5432/joyback", conn_max_age=0)
    assert per_use["CONN_MAX_AGE"] == 0 and per_use["CONN_HEALTH_CHECKS"] is False


@pytest.fixture
def as_configured():
    """The test database with the project's own connection settings (the test run's DATABASE_URL
    is parsed by the same ``database_from_url``)."""
    assert settings.DB_CONN_MAX_AGE > 0 and connection.settings_dict["CONN_MAX_AGE"] == settings.DB_CONN_MAX_AGE
    connection.close()
    yield
    connection.close()


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_the_brokers_polls_keep_one_backend(as_configured):
    """django-q2's ORM broker calls ``close_old_connections`` before every dequeue: each poll
    reconnected while connections were not kept."""
    broker = ORM(list_key="default")
    broker.dequeue()
    first = _backend_pid()
    for _ in range(5):
        broker.dequeue()
        close_old_connections()  # what the worker does around each task
    assert _backend_pid() == first


def test_a_connection_the_database_dropped_is_replaced_before_the_next_task(as_configured):
    dropped = _backend_pid()
    params = connection.get_connection_params()
    with psycopg.connect(
        **{k: v for k, v in params.items() if k not in ("cursor_factory", "context", "prepare_threshold")},
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s, 5000)", [dropped])  # returns once it is gone
    close_old_connections()  # a task's start: the health check finds it gone
    assert _backend_pid() != dropped
