"""django-q2's queue table never runs out of ids (core migration 0015): its id sequence cycles,
so the enqueue after the 2,147,483,647th still works, and a task with the wrapped id is claimed
and acknowledged by the broker like any other — where a wider column would not be, as Django's
lookups on its 32-bit ``AutoField`` match nothing past that range."""

import pytest
from django.db import connection
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.models import OrmQ

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=False)]

LAST = 2_147_483_647


def test_the_queue_sequence_cycles_within_the_32_bit_range():
    with connection.cursor() as cursor:
        cursor.execute("SELECT max_value, cycle FROM pg_sequences WHERE sequencename = 'django_q_ormq_id_seq'")
        assert cursor.fetchone() == (LAST, True)


def test_the_enqueue_after_the_last_id_wraps_and_the_broker_claims_and_acknowledges_it():
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('django_q_ormq', 'id'), %s - 1)", [LAST])
    broker = ORM(list_key="retention-test")
    earlier = timezone.now() - timezone.timedelta(seconds=1)

    last, wrapped = broker.enqueue("a"), broker.enqueue("b")
    OrmQ.objects.filter(key="retention-test").update(lock=earlier)  # due now

    assert (last, wrapped) == (LAST, 1)
    claimed = broker.dequeue() + broker.dequeue()  # a task per poll (Q_CLUSTER bulk 1)
    assert sorted(claimed) == [(1, "b"), (LAST, "a")]
    broker.acknowledge(1)
    broker.acknowledge(LAST)
    assert not OrmQ.objects.filter(key="retention-test").exists()
    # why not a bigint column: the ORM's lookup on the AutoField matches nothing past 2^31 - 1
    assert OrmQ.objects.filter(pk=LAST + 1).update(lock=earlier) == 0
