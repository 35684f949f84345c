import zoneinfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from campaigns.models.brands import Brand
from core.money import format_minor


class CampaignMode(models.TextChoices):
    CASHBACK = "cashback", _("Cashback (after a purchase)")
    JOYBACK = "joyback", _("JoyBack (for a social action)")


class CampaignStatus(models.TextChoices):
    DRAFT = "draft", pgettext_lazy("campaign status", "Draft")
    ACTIVE = "active", pgettext_lazy("campaign status", "Active")
    PAUSED = "paused", pgettext_lazy("campaign status", "Paused")
    ENDED = "ended", pgettext_lazy("campaign status", "Ended")
    CLOSED = "closed", pgettext_lazy("campaign status", "Closed")


# The shortest window leaves a day between reminders; the longest is ten years.
CLAIM_WINDOW_DAYS = (3, 3650)


class PayoutMode(models.TextChoices):
    INSTANT = "instant", _("Instant (one payout per reward)")
    AGGREGATE = "aggregate", _("Aggregate (one payout per person every N minutes)")


class VopAction(models.TextChoices):
    """What a payout does with a Verification of Payee answer other than a match (the brand's
    policy per campaign). ``ask`` is for a close match only: the person sees the name their bank
    holds and confirms it or corrects their details; ``block`` waits for corrected details."""

    PAY = "pay", _("Pay")
    REVIEW = "review", _("Hold for our review")
    ASK = "ask", _("Ask the person to confirm their bank's name")
    BLOCK = "block", _("Block until the person corrects their details")


# For answers with no name to show, a person can only correct, not confirm.
VOP_ACTIONS_WITHOUT_ASK = [(v, label) for v, label in VopAction.choices if v != VopAction.ASK]


def validate_timezone(value: str) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError(f"{value!r} is not an IANA time zone (e.g. Europe/Rome).") from exc


class Campaign(models.Model):
    """A campaign spends its budget (ledger account ``campaign:<id>:budget:<CUR>``, no overdraft)
    on rewards. ``status`` moves draft → active ⇄ paused → ended → closed only through the
    transition services. Period caps (per day / per week) use ``timezone``.

    Fraud thresholds (null = signal off) send an event to review with the reasons stored; they
    never reject on their own, because a shared family IBAN or a shop's Wi-Fi is often legitimate.
    """

    brand = models.ForeignKey(Brand, on_delete=models.PROTECT, related_name="campaigns")
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80)
    mode = models.CharField(max_length=12, choices=CampaignMode.choices)
    currency = models.CharField(max_length=3)
    timezone = models.CharField(max_length=64, default="Europe/Amsterdam", validators=[validate_timezone])
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=12, choices=CampaignStatus.choices, default=CampaignStatus.DRAFT, editable=False
    )
    # Set by campaign_create in the transaction that creates the campaign (the account's code
    # carries the campaign id, so the row exists first).
    budget_account = models.OneToOneField(
        "reconciliation.Account", null=True, on_delete=models.PROTECT, related_name="+", editable=False
    )
    # Payout settings, read by the payouts app.
    payout_mode = models.CharField(max_length=12, choices=PayoutMode.choices, default=PayoutMode.INSTANT)
    aggregate_minutes = models.PositiveIntegerField(default=0)
    min_payout_minor = models.BigIntegerField(default=0)
    # Verification of Payee policy: what each answer other than a match does to a payout. A
    # payout holding rewards of several campaigns follows the strictest of their policies.
    vop_no_match = models.CharField(
        max_length=8,
        choices=VOP_ACTIONS_WITHOUT_ASK,
        default=VopAction.REVIEW,
        verbose_name=_("Name does not match the account"),
        help_text=_("A typo or someone else's account: by default our team looks before paying."),
    )
    vop_close_match = models.CharField(
        max_length=8,
        choices=VopAction.choices,
        default=VopAction.ASK,
        verbose_name=_("Name is close to the account holder's"),
        help_text=_("By default the person sees the name their bank holds and confirms it or corrects it."),
    )
    vop_not_possible = models.CharField(
        max_length=8,
        choices=VOP_ACTIONS_WITHOUT_ASK,
        default=VopAction.PAY,
        verbose_name=_("The bank cannot check the name"),
        help_text=_("Many banks cannot answer yet: not a sign of a wrong account, so by default we pay."),
    )
    # Payout destinations beyond a bank account: the claim page offers PayPal when this is on and
    # a PayPal rail is configured (``payouts.rails.paypal``).
    allow_paypal = models.BooleanField(
        default=False,
        verbose_name=_("People may be paid to PayPal"),
        help_text=_("The claim page offers a PayPal e-mail address besides a bank account."),
    )
    # Who decides rewards in review: our reviewers (the admin's queue) always may; with this on,
    # the brand's admins may approve or reject its rewards in review from the portal too. Set by
    # ops: fraud signals send rewards to review, and a brand deciding them takes that risk on.
    brand_reviews = models.BooleanField(
        default=False,
        verbose_name=_("The brand decides rewards in review"),
        help_text=_("The brand's admins may approve or reject this campaign's rewards in review in the portal."),
    )
    # Unclaimed money (payouts.services.unclaimed): null keeps it owed for ever.
    claim_window_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Days a person has to give a bank account once a reward is owed to them (3 to 3650); reminded "
        "after a third and two thirds, then the money goes back to the campaign (the brand's funds once closed). "
        "Empty: it waits for ever.",
    )
    # A plan without claim pages (the Cashback API alone) gives its campaigns no public claim page;
    # this turns on the payout-form links for buyers the shop sent without a bank account.
    buyer_claim_links = models.BooleanField(
        default=False,
        verbose_name=_("Claim links for buyers without a bank account"),
        help_text=_("API-only plans: e-mail buyers a link to give their bank account when your shop sent none."),
    )
    # What counts as an action undone during its hold (``campaigns.services.undone``): each on
    # voids the reward, and the money goes back to the budget, when the re-check before maturing or
    # the platform's own notice (a TikTok deauthorization, a WhatsApp STOP) finds it.
    undo_void_content_removed = models.BooleanField(
        default=True,
        verbose_name=_("Void when the video is deleted or made private"),
        help_text=_("Checked with the platform before the reward matures."),
    )
    undo_void_views_dropped = models.BooleanField(
        default=True,
        verbose_name=_("Void when the views fall below the rule's threshold"),
        help_text=_("Checked with the platform before the reward matures."),
    )
    undo_void_authorization_revoked = models.BooleanField(
        default=True,
        verbose_name=_("Void when the person removes our access to their TikTok account"),
        help_text=_("TikTok tells us at once; the pending rewards of that account are voided."),
    )
    undo_void_optin_withdrawn = models.BooleanField(
        default=True,
        verbose_name=_("Void when the person withdraws their WhatsApp opt-in (STOP)"),
        help_text=_("A STOP sent before the reward matures voids the opt-in's reward."),
    )
    # Fraud and velocity signals (null: off).
    fraud_max_people_per_iban = models.PositiveIntegerField(
        null=True, blank=True, default=3, help_text="Review when more distinct people than this share one IBAN."
    )
    fraud_max_events_per_ip_hour = models.PositiveIntegerField(
        null=True, blank=True, default=30, help_text="Review when one IP sent more events than this in the last hour."
    )
    fraud_max_events_per_device_hour = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=30,
        help_text="Review when one device sent more events than this in the last hour.",
    )
    fraud_max_iban_claims_per_day = models.PositiveIntegerField(
        null=True, blank=True, default=10, help_text="Review when one IBAN received more rewards than this in 24 hours."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["brand", "slug"], name="campaign_slug_unique_per_brand"),
            models.CheckConstraint(condition=Q(status__in=CampaignStatus.values), name="campaign_status_valid"),
            models.CheckConstraint(condition=Q(mode__in=CampaignMode.values), name="campaign_mode_valid"),
            models.CheckConstraint(condition=Q(payout_mode__in=PayoutMode.values), name="campaign_payout_mode_valid"),
            models.CheckConstraint(
                condition=Q(ends_at__isnull=True) | Q(ends_at__gt=F("starts_at")), name="campaign_ends_after_start"
            ),
            models.CheckConstraint(condition=Q(min_payout_minor__gte=0), name="campaign_min_payout_not_negative"),
            models.CheckConstraint(
                condition=Q(payout_mode="instant") | Q(aggregate_minutes__gt=0),
                name="campaign_aggregate_needs_minutes",
            ),
            models.CheckConstraint(
                condition=Q(vop_no_match__in=["pay", "review", "block"])
                & Q(vop_close_match__in=VopAction.values)
                & Q(vop_not_possible__in=["pay", "review", "block"]),
                name="campaign_vop_policy_valid",
            ),
            models.CheckConstraint(
                condition=Q(claim_window_days__isnull=True)
                | Q(claim_window_days__gte=CLAIM_WINDOW_DAYS[0], claim_window_days__lte=CLAIM_WINDOW_DAYS[1]),
                name="campaign_claim_window_range",
            ),
        ]
        indexes = [models.Index(fields=["status"], name="campaign_status_idx")]

    def __str__(self) -> str:
        return f"{self.brand.slug}/{self.slug}" if self.brand_id else self.slug

    @property
    def tz(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.timezone)

    def clean(self) -> None:
        if self.payout_mode == PayoutMode.AGGREGATE and not self.aggregate_minutes:
            raise ValidationError({"aggregate_minutes": "Aggregate payouts need an interval in minutes."})
        low, high = CLAIM_WINDOW_DAYS
        if self.claim_window_days is not None and not low <= self.claim_window_days <= high:
            raise ValidationError({"claim_window_days": f"Give people between {low} and {high} days."})


# A campaign's undo settings, one per ``UndoneReason`` (``campaigns.services.undone.POLICY_FIELDS``).
UNDO_POLICY_FIELDS = (
    "undo_void_content_removed",
    "undo_void_views_dropped",
    "undo_void_authorization_revoked",
    "undo_void_optin_withdrawn",
)


class CampaignTally(models.Model):
    """One row per campaign: the lock every reservation takes last (see ``campaigns.locks``) and
    the running total of money allocated, so budget alerts compare spent against funded."""

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, primary_key=True, related_name="tally")
    funded_minor = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(funded_minor__gte=0), name="tally_funded_not_negative")]

    def __str__(self) -> str:
        return f"tally of campaign {self.campaign_id}"


class RuleCounter(models.Model):
    """Rewards counted per rule and period (``all`` or a local ISO date) for the campaign-wide
    caps. Incremented by a conditional upsert under the tally lock; decremented when a reward is
    voided, rejected or clawed back, so the count always equals the live rewards."""

    rule = models.ForeignKey("campaigns.RewardRule", on_delete=models.CASCADE, related_name="counters")
    period = models.CharField(max_length=10)
    rewards_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "period"], name="rule_counter_unique")]

    def __str__(self) -> str:
        return f"rule {self.rule_id} {self.period}: {self.rewards_count}"


class CampaignEvent(models.Model):
    """Audit trail and webhook source for a campaign: ``kind`` like ``campaign.launched``,
    ``campaign.paused``, ``campaign.budget_allocated``, ``campaign.budget_threshold``."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=40)
    from_status = models.CharField(max_length=12, blank=True, default="")
    to_status = models.CharField(max_length=12, blank=True, default="")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.CharField(max_length=200, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["campaign", "id"], name="campaign_event_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.from_status}→{self.to_status}"


class BudgetAlert(models.Model):
    """A 50 / 80 / 100 % spent threshold crossed. Unique per (campaign, threshold, funded amount):
    one alert per crossing; a new allocation changes the funded amount and re-arms the alerts."""

    THRESHOLDS = (50, 80, 100)

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="budget_alerts")
    threshold_pct = models.PositiveSmallIntegerField()
    funded_minor = models.BigIntegerField()
    spent_minor = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "threshold_pct", "funded_minor"], name="budget_alert_once_per_crossing"
            ),
            models.CheckConstraint(condition=Q(threshold_pct__in=(50, 80, 100)), name="budget_alert_threshold_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.threshold_pct}% of {format_minor(self.funded_minor, self.campaign.currency)} spent"


class BrandAlertMail(models.Model):
    """The e-mail to a brand's team about one alert — a budget threshold crossed or a campaign
    that paused itself — one row per ``CampaignEvent`` (the unique key: once per crossing,
    however often the sweep runs). Sent at least once: claimed by a conditional UPDATE before
    the SMTP call, ``sent_at`` recorded after it; a claim older than five minutes is taken again
    (``campaigns.services.alerts``)."""

    campaign_event = models.OneToOneField(CampaignEvent, on_delete=models.CASCADE, related_name="alert_mail")
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    recipients_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["sent_at", "id"], name="brand_alert_mail_due_idx")]

    def __str__(self) -> str:
        return f"alert mail for campaign event {self.campaign_event_id}"
