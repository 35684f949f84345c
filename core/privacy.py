"""Core's tables that hold personal data, declared to the personal-data registry
(``core.personal_data``): raw inbound webhook bodies, finished django-q task records and stored
API responses. Registered by ``CoreConfig.ready``."""

from django.db import connection
from django.db.models import Q
from django_q.models import Task

from core.chunks import rows_by_key
from core.models import IdempotencyRecord, InboundStatus, InboundWebhook
from core.personal_data import BLANK, DELETE, Erasure, PersonalData, Retention, mentions


def _inbound_webhooks_erase(erasure: Erasure) -> dict[str, int]:
    """Deliveries whose raw body contains a needle, body and headers blanked. The body is bytes,
    which no ORM lookup can search."""
    if not erasure.needles:
        return {"inbound_webhooks": 0}
    table = connection.ops.quote_name(InboundWebhook._meta.db_table)
    if connection.vendor == "postgresql":
        match = "position(convert_to(%s, 'UTF8') in coalesce(body, ''::bytea)) > 0"
    else:
        match = "instr(CAST(body AS BLOB), CAST(%s AS BLOB)) > 0"
    where = " OR ".join(f"({match})" for _ in erasure.needles)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET body = %s, headers = %s WHERE {where}", [b"", "{}", *erasure.needles])
        return {"inbound_webhooks": cursor.rowcount}


def _task_records_erase(erasure: Erasure) -> dict[str, int]:
    """Finished task records (django-q keeps the last ``save_limit``, 250 by default) whose
    arguments or result name the person: deleted. Their columns are pickles, so read in Python, a
    chunk at a time (no server-side cursor behind PgBouncer: ``core.chunks``)."""
    if not erasure.needles:
        return {"task_records": 0}
    naming = [
        task.pk
        for task in rows_by_key(Task.objects.only("args", "kwargs", "result"))
        if mentions(repr((task.args, task.kwargs, task.result)), erasure.needles)
    ]
    return {"task_records": Task.objects.filter(pk__in=naming).delete()[0]}


# Registered by the app's ``AppConfig.ready``, in this order.
PERSONAL_DATA = (
    PersonalData(
        kind="inbound_webhooks",
        model=InboundWebhook,
        blank={"body": b"", "headers": {}},
        erase=_inbound_webhooks_erase,
        retention=Retention(
            kind="inbound_webhooks",
            setting="RETENTION_INBOUND_WEBHOOK_DAYS",
            default_days=30,
            date_field="received_at",
            purge=BLANK,
            keep=Q(status__in=(InboundStatus.RECEIVED, InboundStatus.PROCESSING, InboundStatus.FAILED)),
        ),
    ),
    PersonalData(
        kind="task_records",
        model=Task,
        erase=_task_records_erase,
        retention=Retention(
            kind="task_records",
            setting="RETENTION_TASK_RESULT_DAYS",
            default_days=30,
            date_field="stopped",
            purge=DELETE,
        ),
    ),
    PersonalData(
        kind="idempotency_records",
        model=IdempotencyRecord,
        retention=Retention(
            kind="idempotency_records",
            setting="RETENTION_IDEMPOTENCY_DAYS",
            default_days=7,
            date_field="created_at",
            purge=DELETE,
        ),
    ),
)
