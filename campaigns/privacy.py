"""Campaigns' personal data, declared to the personal-data registry (``core.personal_data``):
trigger events (identifiers, IP, device, evidence), and rewards and video submissions, which an
access request lists; the tokens a person's platform login granted (``PlatformCredential``),
deleted on erasure; and the retention of the outbound webhook outbox (events and deliveries),
which is not personal data but grows with every event. Registered by ``CampaignsConfig.ready``."""

from django.db.models import Q

from campaigns.models import (
    DeliveryStatus,
    PlatformCredential,
    Reward,
    RewardStatus,
    TriggerEvent,
    VideoSubmission,
    WebhookDelivery,
    WebhookEvent,
)
from campaigns.selectors import withdrawal_account
from core.personal_data import BLANK, DELETE, Erasure, PersonalData, Retention

# A delivery in one of these may still be sent: neither it nor its event is ever purged.
_UNDELIVERED = (DeliveryStatus.PENDING, DeliveryStatus.SENDING)

TRIGGER_EVENT_BLANK = {
    "email": "",
    "whatsapp": "",
    "social_uid": "",
    "ip": None,
    "device_fingerprint": "",
    "evidence": {},
}


def _trigger_events_erase(erasure: Erasure) -> dict[str, int]:
    """The person's events, and the brand's events carrying their identifiers: rejected events
    may name no person but still carry them."""
    theirs = Q(person_id__in=erasure.cluster)
    values = erasure.values
    uids = {v.split(":", 1)[1] for v in values["social"] if ":" in v}
    if erasure.brand_id is not None and (values["email"] or values["whatsapp"] or uids):
        theirs |= Q(brand_id=erasure.brand_id) & (
            Q(email__in=values["email"]) | Q(whatsapp__in=values["whatsapp"]) | Q(social_uid__in=uids)
        )
    return {"trigger_events": TriggerEvent.objects.filter(theirs).update(**TRIGGER_EVENT_BLANK)}


VIDEO_SUBMISSION_BLANK = {"share_url": "", "cover_url": ""}


def _video_submissions_erase(erasure: Erasure) -> dict[str, int]:
    """The links to the person's videos lead to their account: the brand's analytics keep the
    counts and lose the links."""
    rows = VideoSubmission.objects.filter(person_id__in=erasure.cluster)
    return {"video_submissions": rows.update(**VIDEO_SUBMISSION_BLANK)}


def _platform_credentials_erase(erasure: Erasure) -> dict[str, int]:
    """The tokens of every platform account the person proved (their social identifiers, and the
    accounts their submissions came from): deleted, whatever was still to be read with them. The
    tokens are one per account, so a watch of the same account for another brand stops too: a
    re-check that cannot read the video never voids (it cannot tell)."""
    accounts = {tuple(v.split(":", 1)) for v in erasure.values["social"] if ":" in v}
    accounts |= set(VideoSubmission.objects.filter(person_id__in=erasure.cluster).values_list("platform", "social_uid"))
    fingerprints = {withdrawal_account(platform=platform, uid=uid) for platform, uid in accounts if uid}
    deleted, _ = PlatformCredential.objects.filter(account__in=fingerprints).delete()
    return {"platform_credentials": deleted}


# Registered by the app's ``AppConfig.ready``, in this order.
PERSONAL_DATA = (
    PersonalData(
        kind="trigger_events",
        model=TriggerEvent,
        blank=TRIGGER_EVENT_BLANK,
        erase=_trigger_events_erase,
        # Events whose reward is still reserved (in review or held) keep their evidence until
        # it is decided or matures.
        retention=Retention(
            kind="trigger_events",
            setting="RETENTION_TRIGGER_EVENT_DAYS",
            default_days=400,
            date_field="received_at",
            purge=BLANK,
            keep=Q(reward__status__in=(RewardStatus.REVIEW, RewardStatus.HELD)),
        ),
        export=(
            "id",
            "campaign_id",
            "campaign__name",
            "type",
            "custom_name",
            "external_id",
            "occurred_at",
            "received_at",
            "source",
            "email",
            "whatsapp",
            "social_provider",
            "social_uid",
            "iban_country",
            "ip",
            "device_fingerprint",
            "evidence",
            "purchase_amount_minor",
            "purchase_currency",
            "order_id",
            "code",
            "view_count",
            "outcome",
            "reason",
        ),
    ),
    PersonalData(
        kind="rewards",
        model=Reward,
        export=(
            "id",
            "event_id",
            "campaign_id",
            "campaign__name",
            "amount_minor",
            "currency",
            "status",
            "occurred_at",
            "matures_at",
            "decided_at",
            "decision_reason",
            "created_at",
            "updated_at",
        ),
    ),
    PersonalData(
        kind="video_submissions",
        model=VideoSubmission,
        blank=VIDEO_SUBMISSION_BLANK,
        erase=_video_submissions_erase,
        export=(
            "id",
            "campaign_id",
            "platform",
            "social_uid",
            "video_id",
            "status",
            "reason",
            "view_count",
            "share_url",
            "cover_url",
            "checked_at",
            "created_at",
        ),
    ),
    # No ``blank``: erasure and the end of every reading delete the row (``campaigns.services.
    # credentials``); never exported (a key, not information about the person).
    PersonalData(kind="platform_credentials", model=PlatformCredential, erase=_platform_credentials_erase),
    # Deliveries before events, so an event's final deliveries past their own period are gone
    # before it is looked at; an event purged takes its remaining (final) deliveries with it.
    PersonalData(
        kind="webhook_deliveries",
        model=WebhookDelivery,
        retention=Retention(
            kind="webhook_deliveries",
            setting="RETENTION_WEBHOOK_DELIVERIES_DAYS",
            default_days=30,
            date_field="created_at",
            purge=DELETE,
            keep=Q(status__in=_UNDELIVERED),
        ),
    ),
    PersonalData(
        kind="webhook_events",
        model=WebhookEvent,
        retention=Retention(
            kind="webhook_events",
            setting="RETENTION_WEBHOOK_EVENTS_DAYS",
            default_days=30,
            date_field="created_at",
            purge=DELETE,
            keep=Q(deliveries__status__in=_UNDELIVERED),
        ),
    ),
)
