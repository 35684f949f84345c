"""``campaigns.locks``: the IBAN advisory locks of a batch are taken in ascending key order, the
order every ingesting transaction uses (two batches sharing IBANs cannot deadlock)."""

import threading
import time

import pytest
from django.db import connection, transaction

from campaigns import locks
from core.locks import IBAN_CLASS

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TIMEOUT_S = 10


def _advisory(pid: int) -> dict[int, bool]:
    """The IBAN advisory locks of backend ``pid``: key → granted."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT objid::int4, granted FROM pg_locks WHERE locktype = 'advisory' AND "
            "database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = %s AND pid = %s",
            [IBAN_CLASS, pid],
        )
        return dict(cursor.fetchall())


def test_iban_locks_are_taken_in_ascending_order():
    fingerprints = [f"fp-{n}" for n in range(40)]
    keys = sorted({locks._key32(fp) for fp in fingerprints})
    middle = keys[len(keys) // 2]
    held, release, pid, done = threading.Event(), threading.Event(), [], threading.Event()

    def blocker():  # holds the middle key, so the batch stops there
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [IBAN_CLASS, middle])
                held.set()
                release.wait(TIMEOUT_S)
        finally:
            connection.close()

    def batch():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pid.append(cursor.fetchone()[0])
                cursor.execute(*locks.lock_ibans_statement(fingerprints=list(reversed(fingerprints))))
            done.set()
        finally:
            connection.close()

    threads = [threading.Thread(target=blocker)]
    threads[0].start()
    assert held.wait(TIMEOUT_S)
    threads.append(threading.Thread(target=batch))
    threads[1].start()
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and not (pid and _advisory(pid[0]).get(middle) is False):
        time.sleep(0.02)
    seen = _advisory(pid[0])
    release.set()
    for thread in threads:
        thread.join(TIMEOUT_S)
    # Waiting on the middle key, holding exactly the keys below it: ascending order.
    assert seen == {**{k: True for k in keys if k < middle}, middle: False}
    assert done.is_set()
