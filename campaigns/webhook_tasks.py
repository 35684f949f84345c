"""django-q2 tasks for outgoing webhooks (thin: each calls one service of ``campaigns.webhooks``)."""

import time

from campaigns.webhooks import (
    webhook_deliveries_enqueue_due,
    webhook_deliveries_send,
    webhook_endpoint_disabled_notify,
    webhook_events_collect,
)
from core.queue import tick


def webhook_deliveries_send_task(delivery_ids: list[int]) -> str:
    """Up to ``SEND_BATCH`` deliveries of one endpoint, queued by the emit, the tick or a
    redelivery; bounded in time (``SEND_BUDGET_SECONDS``), the rest goes to a follow-up task.
    The result says how long it ran: django-q2's ``started`` is the enqueue time, not the start."""
    start = time.monotonic()
    sent = webhook_deliveries_send(delivery_ids=delivery_ids)
    return (
        f"{len(sent.statuses)} sent, {sent.continued} continued, {sent.released} released "
        f"in {time.monotonic() - start:.3f} s"
    )


def webhook_collect_task() -> str:
    """Enqueued right after a commit that wrote audit rows (``campaigns.webhook_kick``), and by a
    collection whose time was up (``COLLECT_BUDGET_SECONDS``) to go on where it stopped."""
    start = time.monotonic()
    emitted = webhook_events_collect()
    return f"{emitted} events in {time.monotonic() - start:.3f} s"


@tick
def webhook_tick_task() -> str:
    """Every minute: collect new events, then enqueue due and retried deliveries (each at most
    once while queued: ``webhook_deliveries_enqueue_due``)."""
    start = time.monotonic()
    emitted = webhook_events_collect()
    enqueued = webhook_deliveries_enqueue_due()
    return f"{emitted} events, {enqueued} deliveries enqueued in {time.monotonic() - start:.3f} s"


def webhook_deliveries_enqueue_due_task() -> int:
    return webhook_deliveries_enqueue_due()


def webhook_endpoint_disabled_notify_task(endpoint_id: int) -> int:
    return webhook_endpoint_disabled_notify(endpoint_id=endpoint_id)
