"""django-q2 tasks. Thin: each calls one service; all are idempotent (at-least-once delivery)."""

from campaigns.services import rewards_mature
from campaigns.services.alerts import brand_alerts_send_due
from campaigns.services.analytics import campaign_stats_rollup
from campaigns.services.claim_links import claim_links_send_due
from campaigns.services.credentials import platform_credentials_prune
from campaigns.services.plan_charges import plan_charges_run
from campaigns.services.undone import rewards_recheck
from campaigns.services.videos import video_submission_verify, video_views_poll
from core.queue import tick

MATURE_SCHEDULE_NAME = "campaigns.rewards_mature"


@tick
def rewards_mature_task() -> int:
    """Scheduled every minute (migration 0002): held rewards whose hold period is over become
    payable. Bounded by ``MATURE_BUDGET_SECONDS``; the next run takes what is left."""
    return rewards_mature()


@tick
def rewards_recheck_task() -> int:
    """Scheduled every minute (migration 0029, ticks cluster): the actions of rewards whose hold
    is over are checked again with their platform before they may mature. Returns how many were
    voided as undone."""
    return len(rewards_recheck().voided)


def video_submission_verify_task(submission_id: int) -> str:
    """Enqueued by a claim page's video submission (``web.claim.services``). A copy that is lost (its
    attempts spent, or queued under the path it had before it moved here) is made good by the
    views poll, which verifies submissions still pending after ``VERIFY_LOST_AFTER``."""
    return video_submission_verify(submission_id=submission_id)


@tick
def video_views_poll_task() -> int:
    return video_views_poll()


@tick
def claim_links_send_due_task() -> int:
    """Scheduled every minute: payout-form links for rewards whose person has no bank account yet,
    within ``CLAIM_LINKS_BUDGET_SECONDS``; the next run goes on."""
    return claim_links_send_due()


def platform_credentials_prune_task() -> int:
    """Scheduled daily (migration 0035): platform tokens no submission still needs are deleted."""
    return platform_credentials_prune()


def plan_charges_task() -> str:
    """Daily (migration 0027): charge the month's plan fees and take the due ones from the
    brands' funds (``plan_charges_run``)."""
    run = plan_charges_run()
    return f"{run.created} charged, {run.posted} taken, {run.due} due"


@tick
def brand_alerts_send_due_task() -> int:
    """Scheduled every minute (migration 0032): budget alerts and automatic pauses e-mailed to the
    brand's team, once each."""
    return brand_alerts_send_due()


@tick
def campaign_stats_rollup_task() -> str:
    """Scheduled every minute (migration 0033): the daily figures of the stats pages and API catch
    up with the events and reward changes, within ``BUDGET_SECONDS``; the next run goes on."""
    result = campaign_stats_rollup()
    return f"{result.events} events, {result.reward_events} reward changes, {result.days} days"
