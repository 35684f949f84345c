"""Notices to people: the outbox of what a person must be told about their money.

A notice is written in the same transaction as the change it announces (a payout settled, failed
or came back, the account we pay into changed, money waits for an IBAN, a reminder that unclaimed
money will go back, the money went back), so it exists exactly when that change committed. It is
then delivered at least once on each channel the person has (``NoticeDelivery``: e-mail,
WhatsApp), by the task enqueued with it and by the every-minute sweep, whichever comes first
(``recipients.services.notices``).

The rows hold no personal data — ids, kinds, amounts, codes — so erasure has nothing to wipe
here: the address, the language and the text are made at send time from the person as they are
then (an erased person is sent nothing).
"""

from django.db import models
from django.db.models import Q


class NoticeKind(models.TextChoices):
    PAID = "paid", "Payout settled"
    FAILED = "failed", "Payout failed"
    RETURNED = "returned", "Payout came back"
    ACCOUNT_CHANGED = "account_changed", "Payout account changed"
    IBAN_NEEDED = "iban_needed", "IBAN needed"
    CLAIM_LINK = "claim_link", "Claim link (reward earned elsewhere)"
    REMINDER = "reminder", "Reminder: unclaimed money"
    EXPIRED = "expired", "Unclaimed money returned"
    PAYEE_CHECK = "payee_check", "Bank details to confirm or correct"
    ACCOUNT_CHANGE_CODE = "account_change_code", "Code to confirm a new payout account"
    ACTION_UNDONE = "action_undone", "Reward voided: the action was undone"
    CONSENT_CONFIRM = "consent_confirm", "Link to confirm a marketing consent (double opt-in)"


class NoticeStatus(models.TextChoices):
    PENDING = "pending", "Being delivered"
    DONE = "done", "Done (every channel sent or failed)"


class Notice(models.Model):
    """One message to one person, unique by ``key`` (a replay of the change records nothing).
    ``reward`` is the reward whose private link the message carries (none only for an account
    change of a person without rewards); ``payout`` the payout it is about. ``next_attempt_at``
    is when the sweep looks at a pending notice again."""

    key = models.CharField(max_length=120, unique=True)
    person = models.ForeignKey("recipients.Person", on_delete=models.PROTECT, related_name="notices", db_index=False)
    kind = models.CharField(max_length=20, choices=NoticeKind.choices)
    reward = models.ForeignKey(
        "campaigns.Reward", null=True, blank=True, on_delete=models.PROTECT, related_name="notices", db_index=False
    )
    payout = models.ForeignKey(
        "payouts.Payout", null=True, blank=True, on_delete=models.PROTECT, related_name="notices", db_index=False
    )
    data = models.JSONField(default=dict, blank=True, help_text="Amounts, codes and dates the text needs; no PII.")
    status = models.CharField(max_length=8, choices=NoticeStatus.choices, default=NoticeStatus.PENDING)
    next_attempt_at = models.DateTimeField()
    created_at = models.DateTimeField()
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=NoticeKind.values), name="notice_kind_valid"),
            models.CheckConstraint(condition=Q(status__in=NoticeStatus.values), name="notice_status_valid"),
            models.CheckConstraint(
                condition=Q(status="pending", done_at__isnull=True) | Q(status="done", done_at__isnull=False),
                name="notice_done_has_time",
            ),
        ]
        indexes = [
            # The sweep's question; done notices (nearly all of them) are not in it.
            models.Index(fields=["next_attempt_at"], name="notice_pending_idx", condition=Q(status="pending")),
            models.Index(fields=["person", "id"], name="notice_person_idx"),
            models.Index(fields=["reward", "kind"], name="notice_reward_idx", condition=Q(reward__isnull=False)),
            models.Index(fields=["payout"], name="notice_payout_idx", condition=Q(payout__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.kind} → person #{self.person_id} ({self.status})"


class Channel(models.TextChoices):
    EMAIL = "email", "E-mail"
    WHATSAPP = "whatsapp", "WhatsApp"


class DeliveryState(models.TextChoices):
    QUEUED = "queued", "Queued (due at next_attempt_at)"
    SENDING = "sending", "Being sent (claimed)"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed for good"


class NoticeDelivery(models.Model):
    """A notice on one channel, claimed by a conditional UPDATE (queued and due, or a claim gone
    stale → sending) before the provider is called, and recorded after. Unique per channel, so
    a notice handled by two workers (task and sweep) is sent once per channel. ``error`` is the
    provider's code and title, redacted (``core.logging.redact``): never an address."""

    notice = models.ForeignKey(Notice, on_delete=models.PROTECT, related_name="deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    status = models.CharField(max_length=8, choices=DeliveryState.choices, default=DeliveryState.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    provider_message_id = models.CharField(max_length=200, blank=True, default="")
    error_code = models.CharField(max_length=40, blank=True, default="")
    error = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        verbose_name_plural = "notice deliveries"
        constraints = [
            models.UniqueConstraint(fields=["notice", "channel"], name="notice_delivery_once_per_channel"),
            models.CheckConstraint(condition=Q(channel__in=Channel.values), name="notice_delivery_channel_valid"),
            models.CheckConstraint(condition=Q(status__in=DeliveryState.values), name="notice_delivery_status_valid"),
            models.CheckConstraint(
                condition=~Q(status="sent") | Q(sent_at__isnull=False), name="notice_delivery_sent_has_time"
            ),
            models.CheckConstraint(
                condition=~Q(status="sending") | Q(claimed_at__isnull=False), name="notice_delivery_sending_claimed"
            ),
            models.CheckConstraint(
                condition=~Q(status="queued") | Q(next_attempt_at__isnull=False), name="notice_delivery_queued_due"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.status}"
