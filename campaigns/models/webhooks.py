from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

WEBHOOK_EVENT_TYPES = (
    "reward.held",
    "reward.payable",
    "reward.voided",
    "reward.expired",
    "payout.submitted",
    "payout.settled",
    "payout.failed",
    "payout.returned",
    "campaign.paused",
    "campaign.budget_threshold",
    "topup.received",
    "person.consent_given",
    "person.consent_withdrawn",
)


class WebhookEndpoint(models.Model):
    """Where a brand wants its events. ``secret_ciphertext`` is the signing secret encrypted at
    rest (Fernet, ``recipients.crypto``): it must be readable to sign, so it cannot be hashed.
    After a rotation the previous secret keeps signing too (a second ``v1``) until
    ``previous_secret_expires_at``. ``failing_since`` is the first failure of the current streak;
    an endpoint failing for ``WEBHOOK_DISABLE_AFTER_HOURS`` is disabled and the brand told."""

    brand = models.ForeignKey("campaigns.Brand", on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=500)
    description = models.CharField(max_length=200, blank=True, default="")
    event_types = models.JSONField(default=list, help_text="Empty: every event type.")
    secret_ciphertext = models.TextField()
    previous_secret_ciphertext = models.TextField(blank=True, default="")
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField(default=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=200, blank=True, default="")
    failing_since = models.DateTimeField(null=True, blank=True)
    failure_streak = models.PositiveIntegerField(default=0)
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(is_active=True, disabled_at__isnull=True) | Q(is_active=False),
                name="webhook_endpoint_active_not_disabled",
            ),
        ]
        indexes = [models.Index(fields=["brand", "is_active"], name="webhook_endpoint_brand_idx")]

    def __str__(self) -> str:
        return self.url

    def wants(self, event_type: str) -> bool:
        return not self.event_types or event_type in self.event_types


class WebhookEndpointEvent(models.Model):
    """Audit trail of an endpoint's state: ``endpoint.disabled`` (by the delivery worker after a
    failing streak) and ``endpoint.enabled`` (by a person through the portal, the API or the
    admin). ``channel`` says through which; ``data`` holds what was reset and requeued."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="audit")
    kind = models.CharField(max_length=40)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    channel = models.CharField(max_length=10, blank=True, default="")
    reason = models.CharField(max_length=200, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["endpoint", "id"], name="webhook_endpoint_event_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.endpoint_id}"


class WebhookEvent(models.Model):
    """One event for one brand (the outbox). ``public_id`` is the ``id`` in the payload, the same
    on every delivery attempt, so receivers de-duplicate by it. ``source`` (``reward_event:12``,
    ``payout_event:7``…) is unique per brand: collecting an audit row twice emits nothing new."""

    public_id = models.CharField(max_length=40, unique=True)
    brand = models.ForeignKey("campaigns.Brand", on_delete=models.CASCADE, related_name="webhook_events")
    type = models.CharField(max_length=40)
    data = models.JSONField(default=dict)
    source = models.CharField(max_length=80)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["brand", "source"], name="webhook_event_source_unique"),
            models.CheckConstraint(condition=Q(type__in=WEBHOOK_EVENT_TYPES), name="webhook_event_type_valid"),
        ]
        indexes = [models.Index(fields=["brand", "id"], name="webhook_event_brand_idx")]

    def __str__(self) -> str:
        return f"{self.type} {self.public_id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    SENDING = "sending", _("Sending")
    DELIVERED = "delivered", _("Delivered")
    FAILED = "failed", _("Failed (gave up)")


class WebhookDelivery(models.Model):
    """One event to one endpoint. Claimed by a conditional UPDATE (pending and due → sending,
    attempt + 1), sent outside any transaction, recorded in one short transaction.
    ``queued_at``: a task that will send it is in the queue and has not claimed it yet. Set by
    the UPDATE (or INSERT) that hands it to a task, cleared by the claim; the tick skips it until
    it has been queued longer than ``QUEUED_STALE_AFTER`` (then the task counts as lost)."""

    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    attempt = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_snippet = models.CharField(max_length=500, blank=True, default="")
    error = models.CharField(max_length=200, blank=True, default="")
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["event", "endpoint"], name="webhook_delivery_unique"),
            models.CheckConstraint(condition=Q(status__in=DeliveryStatus.values), name="webhook_delivery_status_valid"),
            models.CheckConstraint(
                condition=~Q(status="delivered") | Q(delivered_at__isnull=False),
                name="webhook_delivery_delivered_at",
            ),
            models.CheckConstraint(
                condition=~Q(status="pending") | Q(next_attempt_at__isnull=False),
                name="webhook_delivery_pending_is_scheduled",
            ),
        ]
        indexes = [
            models.Index(fields=["next_attempt_at"], name="webhook_delivery_due_idx", condition=Q(status="pending")),
            models.Index(fields=["endpoint", "id"], name="webhook_delivery_endpoint_idx"),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} of {self.event_id} → {self.endpoint_id}: {self.status}"


class WebhookCursor(models.Model):
    """How far the collector has read each audit table (``campaigns.webhooks``): every row up to
    ``last_id`` is collected for good. ``pending_top`` is the highest id seen in a snapshot whose
    writers may still have been running (their transaction ids were below ``pending_xmax``); it
    becomes ``last_id`` once all of them have ended. ``queued_at`` (the same on every row): a
    collection task is queued and has not started; while it is set no other one is enqueued."""

    source = models.CharField(max_length=40, primary_key=True)
    last_id = models.BigIntegerField(default=0)
    pending_top = models.BigIntegerField(default=0)
    pending_xmax = models.BigIntegerField(null=True, blank=True)  # a PostgreSQL xid8
    pending_since = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.source} @ {self.last_id}"
