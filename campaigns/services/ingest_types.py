"""The shapes ingestion takes, passes along and returns."""

from dataclasses import dataclass, field
from datetime import datetime

from campaigns.models import Campaign, EventSource, Plan, Reward, RewardRule, Trigger, TriggerEvent
from core.exceptions import ApplicationError
from recipients.normalise import AccountInfo
from recipients.services import Resolved


@dataclass(frozen=True)
class EventInput:
    external_id: str
    campaign: str  # the campaign's slug within the brand
    type: str  # a Trigger value
    occurred_at: datetime | None = None  # default: received now
    custom_name: str = ""
    source: str = EventSource.API
    name: str = ""
    email: str = ""
    whatsapp: str = ""
    phone_region: str = ""
    iban: str = ""
    social_provider: str = ""
    social_uid: str = ""
    evidence: dict = field(default_factory=dict)
    ip: str = ""
    device_fingerprint: str = ""
    purchase_amount_minor: int | None = None
    purchase_currency: str = ""
    order_id: str = ""
    code: str = ""
    view_count: int | None = None


@dataclass(frozen=True)
class IngestResult:
    event: TriggerEvent | None
    reward: Reward | None
    outcome: str  # an EventOutcome, or "error" (bulk only: ``error`` says why, nothing stored)
    reason: str
    replayed: bool
    error: ApplicationError | None = None


@dataclass(frozen=True)
class PreparedEvent:
    payload: EventInput
    request_hash: str
    occurred_at: datetime
    email: str
    whatsapp: str
    social: str
    iban_fingerprint: str
    # The request IP as the database compares it (``ingest_reads.ip_key``), "" for none: parsed
    # once here, not at each velocity count.
    ip: str = ""
    # The IBAN validated and normalised once, here (None without one): resolving the person
    # does not parse it again.
    iban_info: AccountInfo | None = None
    # The e-mail mixes scripts like a look-alike does (``recipients.normalise.email_mixed_script``).
    email_mixed_script: bool = False


@dataclass
class CampaignContext:
    """The campaign an event is for, with its brand, budget account and active rules, read once
    per call (``ingest_reads.campaign_context``)."""

    campaign: Campaign
    rules: list[RewardRule]
    smallest_reservation: int | None
    plan: Plan | None = None  # the brand's current plan: fees, triggers, monthly allowances

    def rule_for(self, payload: EventInput) -> RewardRule | None:
        custom = payload.custom_name if payload.type == Trigger.CUSTOM else ""
        return next((r for r in self.rules if r.trigger == payload.type and r.custom_name == custom), None)


@dataclass
class Item:
    """One event of the batch and what its evaluation decided."""

    p: PreparedEvent
    ctx: CampaignContext
    rule: RewardRule | None = None
    early: str = ""
    who: Resolved | None = None
    error: ApplicationError | None = None
    outcome: str = ""
    reason: str = ""
    review_reasons: list[str] = field(default_factory=list)
    amount: int = 0
    fee: int = 0
    status: str = ""
    event: TriggerEvent | None = None
    reward: Reward | None = None
