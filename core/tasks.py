"""django-q2 tasks of the shared API machinery (thin: one service each)."""

from core.api.idempotency import idempotency_records_purge
from core.webhooks_in import inbound_webhook_process, inbound_webhooks_retry


def inbound_webhook_process_task(webhook_id: int) -> str:
    return inbound_webhook_process(webhook_id=webhook_id)


def core_tick_task() -> str:
    """Every minute: retry inbound webhooks that failed, purge expired idempotency records."""
    retried = inbound_webhooks_retry()
    purged = idempotency_records_purge()
    return f"{retried} inbound retried, {purged} idempotency records purged"
