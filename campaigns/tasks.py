"""django-q2 tasks. Thin: each calls one service; all are idempotent (at-least-once delivery)."""

from campaigns.services import rewards_mature
from core.queue import tick

MATURE_SCHEDULE_NAME = "campaigns.rewards_mature"


@tick
def rewards_mature_task() -> int:
    """Scheduled every minute (migration 0002): held rewards whose hold period is over become
    payable. Bounded by ``MATURE_BUDGET_SECONDS``; the next run takes what is left."""
    return rewards_mature()
