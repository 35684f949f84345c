"""django-q2 tasks of recipients. Thin and idempotent (at-least-once delivery)."""

from core.queue import enqueue, tick
from recipients.services.notices import SEND_TASK, notices_send, notices_send_due

SWEEP_SCHEDULE_NAME = "recipients.notices_send_due"


def notices_send_task(keys: list[str]) -> int:
    """Send these notices (enqueued when they were recorded); the ones the budget did not reach
    go to a follow-up task. Returns how many messages were sent."""
    result = notices_send(keys=keys)
    if result.left:
        enqueue(SEND_TASK, result.left)
    return result.sent


@tick
def notices_send_due_task() -> int:
    """Every minute (migration 0006): the notices a lost task or a retry left pending."""
    return notices_send_due().sent
