"""django-q2 tasks of the shared API machinery (thin: one service each)."""

from django.utils import timezone

from core.api.idempotency import idempotency_records_purge
from core.retention import retention_purge
from core.webhooks_in import inbound_webhook_process, inbound_webhooks_retry


def inbound_webhook_process_task(webhook_id: int) -> str:
    return inbound_webhook_process(webhook_id=webhook_id)


def core_tick_task() -> str:
    """Every minute: retry inbound webhooks that failed, purge expired idempotency records."""
    retried = inbound_webhooks_retry()
    purged = idempotency_records_purge()
    return f"{retried} inbound retried, {purged} idempotency records purged"


def retention_purge_task() -> str:
    """Daily: pseudonymise or delete personal data past its retention period (core.retention)."""
    report = retention_purge(now=timezone.now(), dry_run=False)
    return ", ".join(f"{count} {kind}" for kind, count in report.counts.items())
