"""The shapes ``event_ingest`` takes and returns."""

from dataclasses import dataclass, field
from datetime import datetime

from campaigns.models import EventSource, Reward, TriggerEvent
from core.exceptions import ApplicationError


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
