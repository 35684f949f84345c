"""Erasure and the payout engine take their locks in one order (``core.locks``):
a payout batch before its payouts, as pain.002, the batch matcher and the download do. Real
threads on PostgreSQL, made deterministic by watching ``pg_stat_activity``: a second connection
holds what the other path would hold, and the test checks what erasure locked before it waited.
A deadlock that happens anyway (against a writer that breaks the order) is retried, and the
erasure is done once and whole."""

import threading
import time

import pytest
from django.db import OperationalError, connection, transaction

from core.exceptions import TemporaryFailure
from payouts.models import Payout, PayoutBatch, RouteRule
from payouts.services import payout_batch_create, payout_batch_download, payouts_create_for_payable
from recipients.models import Person, PersonEvent, PersonEventKind
from recipients.services import person_erase
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import iban, payable_reward, staff

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def in_a_downloaded_file(sandbox, debtor, brand, campaign):
    """Two people, each with a payout in one downloaded pain.001 file."""
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    people = [payable_reward(brand, account_iban=iban()).person for _ in range(2)]
    assert len(payouts_create_for_payable(enqueue=False).created) == 2
    batch = payout_batch_create(actor=staff("olga"))
    payout_batch_download(batch=batch, actor=staff("dora", "download_payoutbatch"))
    return people[0], batch


class Eraser(threading.Thread):
    """``person_erase`` in its own connection, publishing its backend pid."""

    def __init__(self, person: Person):
        super().__init__()
        self.person, self.pid, self.error = person, None, None
        self.ready = threading.Event()

    def run(self):
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.pid = cursor.fetchone()[0]
            self.ready.set()
            person_erase(person=self.person, source="test")
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test
            self.error = exc
        finally:
            self.ready.set()
            connection.close()


def waiting_on_a_lock(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
            row = cursor.fetchone()
            if row and row[0] == "Lock":
                return
            time.sleep(0.02)
    raise AssertionError(f"backend {pid} never waited on a lock")


def test_erasure_locks_the_batch_before_its_payouts_as_pain002_does(in_a_downloaded_file):
    person, batch = in_a_downloaded_file
    eraser = Eraser(person)
    with transaction.atomic():
        # what pain.002 holds first: the batch row
        PayoutBatch.objects.select_for_update().get(pk=batch.pk)
        eraser.start()
        eraser.ready.wait(5)
        waiting_on_a_lock(eraser.pid)
        # what pain.002 takes next: the batch's payouts. Erasure, now waiting, must hold none.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM payouts_payout WHERE batch_id = %s ORDER BY id FOR UPDATE NOWAIT", [batch.pk]
            )
            assert len(cursor.fetchall()) == 2
    eraser.join(10)
    assert eraser.error is None, eraser.error
    assert Person.objects.get(pk=person.pk).erased_at is not None
    assert Payout.objects.get(person=person).creditor_name == "(erased)"


def test_a_deadlock_against_a_writer_out_of_order_is_retried_and_the_erasure_is_whole(in_a_downloaded_file):
    person, batch = in_a_downloaded_file
    payout = Payout.objects.get(person=person)
    eraser = Eraser(person)
    with transaction.atomic(), connection.cursor() as cursor:
        # The erasure, which starts waiting first, is the one PostgreSQL picks to break the cycle.
        cursor.execute("SET LOCAL deadlock_timeout = '30s'")
        cursor.execute("SELECT id FROM payouts_payout WHERE id = %s FOR UPDATE", [payout.pk])
        eraser.start()
        eraser.ready.wait(5)
        waiting_on_a_lock(eraser.pid)
        # the other half of the cycle: the person row erasure holds
        cursor.execute("SELECT id FROM recipients_person WHERE id = %s FOR UPDATE", [person.pk])
    eraser.join(15)
    assert eraser.error is None, eraser.error
    assert PersonEvent.objects.filter(person=person, kind=PersonEventKind.ERASED).count() == 1
    erased = Payout.objects.get(pk=payout.pk)
    assert erased.creditor_name == "(erased)" and Person.objects.get(pk=person.pk).display_name == ""


def test_an_erasure_that_keeps_losing_is_a_temporary_error_and_erases_nothing(in_a_downloaded_file):
    person, _ = in_a_downloaded_file

    class DeadlockDetected(Exception):
        sqlstate = "40P01"

    def database_breaks_a_cycle(execute, sql, params, many, context):
        # PostgreSQL picking this transaction to break a deadlock, on every attempt
        if sql.startswith('UPDATE "payouts_payout"'):
            raise OperationalError("deadlock detected") from DeadlockDetected()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(database_breaks_a_cycle), pytest.raises(TemporaryFailure) as raised:
        person_erase(person=person, source="test")

    assert raised.value.code == "erasure_contended"
    assert Person.objects.get(pk=person.pk).erased_at is None
    assert Payout.objects.get(person=person).creditor_name != "(erased)"
    assert not PersonEvent.objects.filter(person=person, kind=PersonEventKind.ERASED).exists()
