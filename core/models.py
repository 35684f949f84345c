"""Shared tables of the partner API and the inbound webhooks.

``IdempotencyRecord``: one row per (brand, Idempotency-Key). The row is inserted *before* the work
(its own short transaction; the unique constraint decides which of two concurrent requests runs),
and the response is stored on it afterwards, so a retry gets the same answer.

``InboundWebhook``: every verified delivery from WhatsApp, TikTok or the PSP, stored raw before
anything is done with it, then processed by a task. ``(provider, dedupe_key)`` is unique, so a
provider's redelivery is recognised and acknowledged without being processed twice.
"""

from django.db import models
from django.db.models import Q


class IdempotencyStatus(models.TextChoices):
    IN_FLIGHT = "in_flight", "In flight"
    DONE = "done", "Done"


class IdempotencyRecord(models.Model):
    brand = models.ForeignKey("campaigns.Brand", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=500)
    request_hash = models.CharField(max_length=64, help_text="sha256 of the raw request body.")
    status = models.CharField(max_length=10, choices=IdempotencyStatus.choices, default=IdempotencyStatus.IN_FLIGHT)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.BinaryField(null=True, blank=True)
    response_content_type = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["brand", "key"], name="idempotency_key_unique_per_brand"),
            models.CheckConstraint(condition=Q(status__in=IdempotencyStatus.values), name="idempotency_status_valid"),
            models.CheckConstraint(
                condition=Q(status="in_flight", response_status__isnull=True)
                | Q(status="done", response_status__isnull=False, completed_at__isnull=False),
                name="idempotency_done_has_response",
            ),
        ]
        indexes = [models.Index(fields=["expires_at"], name="idempotency_expires_idx")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} [{self.key}] {self.status}"


class InboundStatus(models.TextChoices):
    RECEIVED = "received", "Received"
    PROCESSING = "processing", "Processing"
    PROCESSED = "processed", "Processed"
    IGNORED = "ignored", "Ignored (nothing to do)"
    FAILED = "failed", "Failed"


class InboundWebhook(models.Model):
    """A verified inbound delivery. Forged or stale ones are never stored (only a ``security``
    log line), so every row here passed its provider's signature check."""

    # The name its handler is registered by (``core.webhooks_in``: a platform, a PSP), never a
    # choices list: a provider comes with the app that registers it.
    provider = models.CharField(max_length=32)
    dedupe_key = models.CharField(max_length=255)
    headers = models.JSONField(default=dict, blank=True)
    body = models.BinaryField()
    signature_ok = models.BooleanField(default=True)
    status = models.CharField(max_length=12, choices=InboundStatus.choices, default=InboundStatus.RECEIVED)
    attempts = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField()
    processed_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["provider", "dedupe_key"], name="inbound_webhook_dedupe"),
            models.CheckConstraint(condition=Q(status__in=InboundStatus.values), name="inbound_status_valid"),
            models.CheckConstraint(condition=Q(signature_ok=True), name="inbound_only_verified"),
        ]
        indexes = [models.Index(fields=["status", "received_at"], name="inbound_status_idx")]

    def __str__(self) -> str:
        return f"{self.provider} {self.dedupe_key[:40]} {self.status}"


# The audit trail's models (their own module; imported here so Django finds them).
from core.audit_models import AuditSeal, AuditTrail  # noqa: E402, F401
