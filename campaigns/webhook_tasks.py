"""django-q2 tasks for outgoing webhooks (thin: each calls one service of ``campaigns.webhooks``)."""

from campaigns.webhooks import (
    webhook_deliveries_enqueue_due,
    webhook_delivery_attempt,
    webhook_endpoint_disabled_notify,
    webhook_events_collect,
)


def webhook_delivery_task(delivery_id: int) -> str:
    return webhook_delivery_attempt(delivery_id=delivery_id)


def webhook_collect_task() -> int:
    """Enqueued right after a commit that wrote audit rows (``campaigns.webhook_kick``)."""
    return webhook_events_collect()


def webhook_tick_task() -> str:
    """Every few seconds: collect new events, then enqueue due and retried deliveries."""
    emitted = webhook_events_collect()
    enqueued = webhook_deliveries_enqueue_due()
    return f"{emitted} events, {enqueued} deliveries enqueued"


def webhook_deliveries_enqueue_due_task() -> int:
    return webhook_deliveries_enqueue_due()


def webhook_endpoint_disabled_notify_task(endpoint_id: int) -> int:
    return webhook_endpoint_disabled_notify(endpoint_id=endpoint_id)
