"""django-q2 tasks. Thin: each calls one service; all are idempotent (at-least-once delivery)."""

from campaigns.services import rewards_mature

MATURE_SCHEDULE_NAME = "campaigns.rewards_mature"


def rewards_mature_task() -> int:
    """Scheduled every minute (migration 0002): held rewards whose hold period is over become payable."""
    return rewards_mature()


INGEST_SWEEP_SCHEDULE_NAME = "campaigns.ingest_requests_sweep"


def ingest_requests_sweep_task() -> int:
    """Scheduled every minute (migration 0008): events whose caller died between queueing them
    and their combined ingestion are ingested (``ingest_combine``)."""
    from campaigns.services.ingest_combine import ingest_requests_sweep

    return ingest_requests_sweep()
