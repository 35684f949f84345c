"""Writes for brands, campaigns, rules, trigger events and rewards (see each module)."""

from campaigns.services.brands import (
    brand_create,
    brand_funds_account,
    brand_membership_set,
    brand_topup_record,
    platform_bank_account,
)
from campaigns.services.campaigns import (
    campaign_allocate,
    campaign_budget_release,
    campaign_close,
    campaign_create,
    campaign_end,
    campaign_launch,
    campaign_pause,
    campaign_provision,
    campaign_resume,
    rule_create,
    smallest_reservation_minor,
)
from campaigns.services.ingest import event_ingest, event_ingest_bulk
from campaigns.services.ingest_types import EventInput, IngestResult
from campaigns.services.plan_charges import ChargeRun, plan_charges_run
from campaigns.services.plans import brand_plan_change, upgrade_request_create, upgrade_requests_handle
from campaigns.services.refunds import RefundResult, order_refund
from campaigns.services.rewards import (
    BulkOutcome,
    reward_approve,
    reward_brand_approve,
    reward_brand_reject,
    reward_claw_back,
    reward_expire,
    reward_mark_paid,
    reward_reduce,
    reward_reject,
    reward_void,
    rewards_approve_bulk,
    rewards_mature,
    rewards_reject_bulk,
)
from campaigns.services.undone import WithdrawOutcome, action_withdraw, rewards_recheck

__all__ = [
    "WithdrawOutcome",
    "action_withdraw",
    "rewards_recheck",
    "BulkOutcome",
    "EventInput",
    "IngestResult",
    "RefundResult",
    "brand_create",
    "brand_funds_account",
    "brand_membership_set",
    "brand_plan_change",
    "plan_charges_run",
    "ChargeRun",
    "brand_topup_record",
    "campaign_allocate",
    "campaign_budget_release",
    "campaign_close",
    "campaign_create",
    "campaign_end",
    "campaign_launch",
    "campaign_pause",
    "campaign_provision",
    "campaign_resume",
    "event_ingest",
    "event_ingest_bulk",
    "order_refund",
    "platform_bank_account",
    "reward_approve",
    "reward_brand_approve",
    "reward_brand_reject",
    "reward_claw_back",
    "reward_expire",
    "reward_mark_paid",
    "reward_reduce",
    "reward_reject",
    "reward_void",
    "rewards_approve_bulk",
    "rewards_mature",
    "rewards_reject_bulk",
    "rule_create",
    "smallest_reservation_minor",
    "upgrade_request_create",
    "upgrade_requests_handle",
]
