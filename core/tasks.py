"""django-q2 tasks of the shared API machinery (thin: one service each)."""

import logging

from django.utils import timezone

from core.api.idempotency import idempotency_records_purge
from core.audit import audit_seal, audit_verify
from core.exceptions import InvalidTransition
from core.queue import enqueue, tick
from core.retention import retention_purge
from core.webhooks_in import inbound_webhook_process, inbound_webhooks_retry


def inbound_webhook_process_task(webhook_id: int) -> str:
    return inbound_webhook_process(webhook_id=webhook_id)


@tick
def core_tick_task() -> str:
    """Every minute: retry inbound webhooks that failed, purge expired idempotency records."""
    retried = inbound_webhooks_retry()
    purged = idempotency_records_purge()
    return f"{retried} inbound retried, {purged} idempotency records purged"


RETENTION_TASK = "core.tasks.retention_purge_task"


def retention_purge_task() -> str:
    """Daily: pseudonymise or delete data past its retention period (core.retention). A run that its
    time budget cut short hands the rest to a follow-up run, as the unclaimed-money sweep does: each
    run made progress (a batch at least), so the follow-ups end."""
    report = retention_purge(now=timezone.now(), dry_run=False)
    if not report.done:
        enqueue(RETENTION_TASK)
    summary = ", ".join(f"{count} {kind}" for kind, count in report.counts.items())
    if report.done:
        return summary
    return f"{summary}; unfinished, continued by a follow-up run: {', '.join(report.unfinished)}"


# How a failed run's result starts (core.metrics reads it for joyback_verification_ok).
AUDIT_BROKEN = "audit trail BROKEN"


def audit_verify_task() -> str:
    """Daily: prove every audit chain, then seal the trail as it is (a later loss of its last rows
    shows). A broken chain is logged as an error for ops, and nothing is sealed over it."""
    try:
        seal = audit_seal()
    except InvalidTransition:
        problems = audit_verify().problems
        logging.getLogger(__name__).error("audit trail does not verify: %s", "; ".join(problems[:20]))
        return f"{AUDIT_BROKEN}: {len(problems)} problem(s)"
    return f"audit trail verified and sealed (seal #{seal.pk})"
