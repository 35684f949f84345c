"""Brands, campaigns, reward rules, trigger events and rewards.

Money amounts are integer minor units of the campaign's currency. Status fields change only
through the transition services in ``campaigns.services`` (conditional UPDATEs that write an
audit row in the same transaction); the CHECK constraints here are the database's backstop.
"""

from campaigns.models.brands import Brand, BrandEvent, BrandMembership, BrandRole, BrandStatus
from campaigns.models.campaigns import (
    UNDO_POLICY_FIELDS,
    BrandAlertMail,
    BudgetAlert,
    Campaign,
    CampaignEvent,
    CampaignMode,
    CampaignStatus,
    CampaignTally,
    PayoutMode,
    RuleCounter,
    VopAction,
)
from campaigns.models.credentials import PlatformCredential
from campaigns.models.events import (
    RECHECKED_TRIGGERS,
    ActionWithdrawal,
    EventOutcome,
    EventSource,
    OrderRefund,
    Reward,
    RewardEvent,
    RewardInReview,
    RewardStatus,
    TriggerEvent,
    UndoneReason,
    reward_recheck_pending,
)
from campaigns.models.rules import (
    ENGAGEMENT_TERMS_WARNING,
    ENGAGEMENT_TRIGGERS,
    AmountType,
    ApprovalPolicy,
    RewardRule,
    Trigger,
    Verification,
)

__all__ = [
    "RECHECKED_TRIGGERS",
    "ActionWithdrawal",
    "ENGAGEMENT_TERMS_WARNING",
    "ENGAGEMENT_TRIGGERS",
    "AmountType",
    "ApprovalPolicy",
    "Brand",
    "BrandEvent",
    "BrandMembership",
    "BrandRole",
    "BrandStatus",
    "BrandAlertMail",
    "BudgetAlert",
    "Campaign",
    "CampaignEvent",
    "CampaignMode",
    "CampaignStatus",
    "CampaignTally",
    "EventOutcome",
    "EventSource",
    "OrderRefund",
    "PayoutMode",
    "PlatformCredential",
    "VopAction",
    "Reward",
    "RewardEvent",
    "RewardInReview",
    "RewardRule",
    "RewardStatus",
    "RuleCounter",
    "Trigger",
    "TriggerEvent",
    "UNDO_POLICY_FIELDS",
    "UndoneReason",
    "Verification",
    "reward_recheck_pending",
]

# Partner API keys and outgoing webhooks (issue 6).
from campaigns.models.api import ApiKey, ApiScope  # noqa: E402
from campaigns.models.webhooks import (  # noqa: E402
    WEBHOOK_EVENT_TYPES,
    DeliveryStatus,
    WebhookCursor,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEndpointEvent,
    WebhookEvent,
)

__all__ += [
    "WEBHOOK_EVENT_TYPES",
    "ApiKey",
    "ApiScope",
    "DeliveryStatus",
    "WebhookCursor",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEndpointEvent",
    "WebhookEvent",
]

# Brand portal invitations and claim-page video submissions (issue 7).
from campaigns.models.portal import (  # noqa: E402
    BrandInvitation,
    InvitationStatus,
    VideoStatus,
    VideoSubmission,
)

__all__ += ["BrandInvitation", "InvitationStatus", "VideoStatus", "VideoSubmission"]

# Packages as entitlements (issue 28).
from campaigns.models.plans import BrandPlan, BrandUsage, Channel, Plan, PlanCharge, UpgradeRequest  # noqa: E402

__all__ += ["BrandPlan", "BrandUsage", "Channel", "Plan", "PlanCharge", "UpgradeRequest"]

# What the money bought: daily figures, visits and views (issue 29).
from campaigns.models.analytics import CampaignDay, CampaignDayTrigger, StatsCursor, VideoViewDay  # noqa: E402

__all__ += ["CampaignDay", "CampaignDayTrigger", "StatsCursor", "VideoViewDay"]
