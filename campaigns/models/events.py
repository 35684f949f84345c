from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from campaigns.models.brands import Brand
from campaigns.models.campaigns import Campaign
from campaigns.models.rules import RewardRule
from campaigns.triggers import PLATFORM_SOURCES, trigger_values
from core.money import format_minor

# Where an event came from: the partner API, each platform of ``campaigns.triggers.PLATFORM_SOURCES``
# (its first-party events; the member is its name in upper case), the claim page, the admin.
EventSource = models.TextChoices(
    "EventSource",
    [
        ("API", ("api", "Partner API")),
        *((name.upper(), (name, label)) for name, label in PLATFORM_SOURCES),
        ("CLAIM_PAGE", ("claim_page", "Claim page")),
        ("ADMIN", ("admin", "Admin")),
    ],
)


class EventOutcome(models.TextChoices):
    REJECTED = "rejected", "Rejected"
    REVIEW = "review", "Sent to review (money reserved)"
    HELD = "held", "Held until the hold period ends (money reserved)"
    REWARDED = "rewarded", "Rewarded (no hold period; payable at the next maturing run)"


class TriggerEvent(models.Model):
    """Something a person did that may earn a reward. ``(brand, external_id)`` is the idempotency
    key: a replay with the same content (``request_hash``) returns the first outcome, a different
    content under the same id is refused. The outcome is written once, at ingestion; what happens
    to the reward afterwards is on the reward. Identifiers are stored normalised; the IBAN itself
    lives encrypted in ``recipients`` and only its keyed fingerprint and country are kept here."""

    # No single-column indexes on brand and campaign: (brand, external_id) and (campaign, outcome, id)
    # lead with them, and every index is written on each of the thousands of inserts per second.
    brand = models.ForeignKey(Brand, on_delete=models.PROTECT, related_name="trigger_events", db_index=False)
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="trigger_events", db_index=False)
    rule = models.ForeignKey(RewardRule, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    type = models.CharField(max_length=20)
    custom_name = models.CharField(max_length=60, blank=True, default="")
    external_id = models.CharField(max_length=200)
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField()
    person = models.ForeignKey(
        "recipients.Person", null=True, blank=True, on_delete=models.PROTECT, related_name="trigger_events"
    )
    email = models.CharField(max_length=254, blank=True, default="")
    whatsapp = models.CharField(max_length=20, blank=True, default="")
    social_provider = models.CharField(max_length=20, blank=True, default="")
    social_uid = models.CharField(max_length=200, blank=True, default="")
    iban_fingerprint = models.CharField(max_length=64, blank=True, default="")
    iban_country = models.CharField(max_length=2, blank=True, default="")
    evidence = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=12, choices=EventSource.choices)
    ip = models.GenericIPAddressField(null=True, blank=True)
    device_fingerprint = models.CharField(max_length=128, blank=True, default="")
    purchase_amount_minor = models.BigIntegerField(null=True, blank=True)
    purchase_currency = models.CharField(max_length=3, blank=True, default="")
    order_id = models.CharField(max_length=120, blank=True, default="")
    code = models.CharField(max_length=120, blank=True, default="")
    view_count = models.BigIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=EventOutcome.choices)
    reason = models.CharField(max_length=40, blank=True, default="", help_text="Reason code of a rejection.")
    review_reasons = models.JSONField(default=list, blank=True)
    request_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["brand", "external_id"], name="trigger_event_external_id_unique"),
            models.CheckConstraint(condition=Q(outcome__in=EventOutcome.values), name="trigger_event_outcome_valid"),
            models.CheckConstraint(condition=Q(source__in=EventSource.values), name="trigger_event_source_valid"),
            models.CheckConstraint(
                condition=Q(outcome="rejected", reason__gt="") | (~Q(outcome="rejected") & Q(reason="")),
                name="trigger_event_rejection_has_reason",
            ),
            models.CheckConstraint(
                condition=Q(purchase_amount_minor__isnull=True) | Q(purchase_amount_minor__gt=0),
                name="trigger_event_purchase_positive",
            ),
        ]
        indexes = [
            models.Index(fields=["ip", "received_at"], name="trigger_event_ip_idx", condition=Q(ip__isnull=False)),
            models.Index(
                fields=["device_fingerprint", "received_at"],
                name="trigger_event_device_idx",
                condition=~Q(device_fingerprint=""),
            ),
            models.Index(fields=["campaign", "outcome", "id"], name="trigger_event_campaign_idx"),
            # Refund by order id (``order_refund``); only purchases carry one, so the rest of the
            # inserts write no entry.
            models.Index(fields=["brand", "order_id"], name="trigger_event_order_idx", condition=~Q(order_id="")),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.external_id} → {self.outcome}"


class OrderRefund(models.Model):
    """One refund of a brand's order through the Cashback API, recorded once per Idempotency-Key
    before its effects on the order's rewards are applied (``campaigns.services.refunds``). The
    order's refunded total is the sum of its rows, read and extended under the lock of the
    order's purchase events, so two refunds with different keys add up and a replay adds nothing."""

    brand = models.ForeignKey(Brand, on_delete=models.CASCADE, related_name="+", db_index=False)
    order_id = models.CharField(max_length=120)
    key = models.CharField(max_length=255, help_text="The Idempotency-Key the refund was sent with.")
    amount_minor = models.BigIntegerField(help_text="What this refund added to the order's refunded total.")
    total_minor = models.BigIntegerField(help_text="The order's refunded total after this refund.")
    purchase_amount_minor = models.BigIntegerField()
    reason = models.CharField(max_length=200, blank=True, default="")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["brand", "order_id", "key"], name="orderrefund_once_per_key"),
            models.CheckConstraint(
                condition=Q(amount_minor__gte=0, total_minor__gte=models.F("amount_minor"))
                & Q(total_minor__lte=models.F("purchase_amount_minor")),
                name="orderrefund_within_purchase",
            ),
        ]

    def __str__(self) -> str:
        return f"refund {self.order_id} +{self.amount_minor}"


class RewardStatus(models.TextChoices):
    REVIEW = "review", _("In review (reserved)")
    HELD = "held", _("Held (reserved, maturing)")
    PAYABLE = "payable", _("Payable")
    PAID = "paid", _("Paid")
    VOIDED = "voided", _("Voided")
    CLAWED_BACK = "clawed_back", _("Clawed back")
    EXPIRED = "expired", _("Expired (unclaimed, money returned)")


class UndoneReason(models.TextChoices):
    """Why an action no longer stands (``Platform.action_recheck``, the platforms' own notices):
    the reason code of a reward voided for it. Each maps to a campaign's undo setting
    (``campaigns.services.undone.POLICY_FIELDS``)."""

    CONTENT_REMOVED = "content_removed", _("The video was deleted or made private")
    VIEWS_DROPPED = "views_dropped", _("The video's views fell below the threshold")
    AUTHORIZATION_REVOKED = "authorization_revoked", _("The TikTok authorization was revoked")
    OPTIN_WITHDRAWN = "optin_withdrawn", _("The WhatsApp opt-in was withdrawn")


# The rewards caps and "new people only" count: an expired one was earned, only never claimed.
LIVE_STATUSES = (RewardStatus.REVIEW, RewardStatus.HELD, RewardStatus.PAYABLE, RewardStatus.PAID, RewardStatus.EXPIRED)
RESERVED_STATUSES = (RewardStatus.REVIEW, RewardStatus.HELD)


class Reward(models.Model):
    """Money a person earned with one event.

    ``review`` and ``held`` have a pending ledger hold of ``amount_minor + fee_minor`` on the
    campaign budget, so approving can never fail for lack of budget. Maturing commits the hold
    (budget → the person's payable + platform fee) and sets ``commit_entry``: ``payable``. Payouts
    move it to ``paid``. A void releases the hold (``voided``); a claw-back reverses the commit
    entry of a payable reward (``clawed_back``); money nobody gave an account for within the
    campaign's ``claim_window_days`` goes back to it (``expired``, ``expiry_entry``). Every change
    writes a RewardEvent.
    """

    event = models.OneToOneField(TriggerEvent, on_delete=models.PROTECT, related_name="reward")
    # Campaign, rule and person lead the composite indexes below: no single-column ones to write.
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="rewards", db_index=False)
    rule = models.ForeignKey(RewardRule, on_delete=models.PROTECT, related_name="rewards", db_index=False)
    person = models.ForeignKey("recipients.Person", on_delete=models.PROTECT, related_name="rewards", db_index=False)
    amount_minor = models.BigIntegerField()
    fee_minor = models.BigIntegerField(default=0)
    currency = models.CharField(max_length=3)
    status = models.CharField(max_length=12, choices=RewardStatus.choices)
    hold = models.OneToOneField("reconciliation.Hold", on_delete=models.PROTECT, related_name="+")
    # One reward per entry, unique where set (constraints below): a one-to-one's unique index
    # would take an entry for every NULL, that is for every reward ingested.
    commit_entry = models.ForeignKey(
        "reconciliation.JournalEntry", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    clawback_entry = models.ForeignKey(
        "reconciliation.JournalEntry", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    expiry_entry = models.ForeignKey(
        "reconciliation.JournalEntry", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    occurred_at = models.DateTimeField(help_text="The event's time: what period caps count by.")
    matures_at = models.DateTimeField()
    iban_fingerprint = models.CharField(max_length=64, blank=True, default="")
    review_reasons = models.JSONField(default=list, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.CharField(max_length=200, blank=True, default="")
    payout_ref = models.CharField(max_length=120, blank=True, default="")
    # The action undone (``UndoneReason``) of a reward voided for it; "" for every other reward.
    undone_reason = models.CharField(max_length=24, blank=True, default="", choices=UndoneReason.choices)
    # The re-check before maturing (``campaigns.services.undone``): when it found the action still
    # standing; the transient failures so far, and when to try again.
    rechecked_at = models.DateTimeField(null=True, blank=True)
    recheck_failures = models.PositiveSmallIntegerField(default=0)
    recheck_after = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(amount_minor__gt=0), name="reward_amount_positive"),
            models.CheckConstraint(condition=Q(fee_minor__gte=0), name="reward_fee_not_negative"),
            models.CheckConstraint(condition=Q(status__in=RewardStatus.values), name="reward_status_valid"),
            models.CheckConstraint(
                condition=(
                    Q(status__in=["review", "held", "voided"], commit_entry__isnull=True, clawback_entry__isnull=True)
                    | Q(status__in=["payable", "paid"], commit_entry__isnull=False, clawback_entry__isnull=True)
                    | Q(status="clawed_back", commit_entry__isnull=False, clawback_entry__isnull=False)
                    | Q(status="expired", commit_entry__isnull=False, clawback_entry__isnull=True)
                )
                & (
                    Q(status="expired", expiry_entry__isnull=False)
                    | ~Q(status="expired") & Q(expiry_entry__isnull=True)
                ),
                name="reward_status_entries_coherent",
            ),
            # An expired reward keeps the reference of a payout that came back, if it had one.
            models.CheckConstraint(
                condition=Q(status="paid", payout_ref__gt="")
                | Q(status="expired")
                | (~Q(status__in=["paid", "expired"]) & Q(payout_ref="")),
                name="reward_paid_has_payout_ref",
            ),
            models.CheckConstraint(
                condition=Q(undone_reason="") | Q(status="voided", undone_reason__in=UndoneReason.values),
                name="reward_undone_only_voided",
            ),
            models.UniqueConstraint(
                fields=["commit_entry"], condition=Q(commit_entry__isnull=False), name="reward_commit_entry_unique"
            ),
            models.UniqueConstraint(
                fields=["clawback_entry"],
                condition=Q(clawback_entry__isnull=False),
                name="reward_clawback_entry_unique",
            ),
            models.UniqueConstraint(
                fields=["expiry_entry"], condition=Q(expiry_entry__isnull=False), name="reward_expiry_entry_unique"
            ),
        ]
        indexes = [
            models.Index(fields=["rule", "person", "occurred_at"], name="reward_rule_person_idx"),
            models.Index(
                fields=["rule", "iban_fingerprint", "occurred_at"],
                name="reward_rule_iban_idx",
                condition=~Q(iban_fingerprint=""),
            ),
            models.Index(
                fields=["iban_fingerprint", "created_at"], name="reward_iban_idx", condition=~Q(iban_fingerprint="")
            ),
            models.Index(fields=["matures_at"], name="reward_maturing_idx", condition=Q(status="held")),
            models.Index(fields=["campaign", "status"], name="reward_campaign_status_idx"),
            models.Index(fields=["person", "status"], name="reward_person_status_idx"),
            # Partial: most rewards are decided by no one, and a NULL entry is still an entry.
            models.Index(fields=["decided_by"], name="reward_decided_by_idx", condition=Q(decided_by__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"reward #{self.pk} {format_minor(self.amount_minor, self.currency)} {self.status}"

    @property
    def reserved_minor(self) -> int:
        return self.amount_minor + self.fee_minor


class RewardEvent(models.Model):
    """Audit trail and webhook source for a reward: ``kind`` like ``reward.held``, ``reward.review``,
    ``reward.approved``, ``reward.payable``, ``reward.voided``, ``reward.clawed_back``, ``reward.paid``,
    ``reward.expired``."""

    reward = models.ForeignKey(Reward, on_delete=models.CASCADE, related_name="audit", db_index=False)
    kind = models.CharField(max_length=40)
    from_status = models.CharField(max_length=12, blank=True, default="")
    to_status = models.CharField(max_length=12)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    reason = models.CharField(max_length=200, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["reward", "id"], name="reward_event_idx"),
            models.Index(fields=["actor"], name="reward_event_actor_idx", condition=Q(actor__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.from_status}→{self.to_status}"


# The actions a platform can re-check before their reward matures (``Platform.action_recheck``).
RECHECKED_TRIGGERS = trigger_values(first_party=True)


def reward_recheck_pending() -> Q:
    """Rewards that wait for their re-check before they may mature: a first-party action rewarded
    with a hold (with none, nothing could be undone during it) not yet found still standing.
    ``rewards_mature`` leaves them; ``rewards_recheck`` clears or voids them."""
    return Q(rule__trigger__in=RECHECKED_TRIGGERS, matures_at__gt=F("created_at"), rechecked_at__isnull=True)


class ActionWithdrawal(models.Model):
    """A person took back, on the platform, what a reward paid for: a TikTok authorization removed
    (TikTok's ``authorization.removed`` webhook), a WhatsApp opt-in withdrawn (a STOP message).
    The re-check before maturing reads it (``Platform.action_recheck``), so a void missed when it
    arrived still happens before any money is committed. Unique by the platform's reference of the
    notice: a redelivery records nothing. The account is kept only as a keyed fingerprint
    (``account_fingerprint``): no clear identifier to erase."""

    platform = models.CharField(max_length=20)
    kind = models.CharField(max_length=24, choices=UndoneReason.choices)
    account = models.CharField(max_length=64, help_text="Keyed fingerprint of the platform account.")
    occurred_at = models.DateTimeField()
    ref = models.CharField(max_length=200, help_text="The platform's reference of the notice (no personal data).")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["platform", "kind", "ref"], name="action_withdrawal_once"),
            models.CheckConstraint(condition=Q(kind__in=UndoneReason.values), name="action_withdrawal_kind_valid"),
        ]
        indexes = [models.Index(fields=["platform", "account", "occurred_at"], name="action_withdrawal_account_idx")]

    def __str__(self) -> str:
        return f"{self.platform} {self.kind} at {self.occurred_at:%Y-%m-%d %H:%M}"


class RewardInReview(Reward):
    """The review queue in the admin: rewards waiting for a person's decision."""

    class Meta:
        proxy = True
        verbose_name = "reward in review"
        verbose_name_plural = "review queue"
