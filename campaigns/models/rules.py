from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from campaigns.models.campaigns import Campaign
from campaigns.triggers import TRIGGERS, trigger_values

# Declared in ``campaigns.triggers``: PURCHASE, TIKTOK_LOGIN, WHATSAPP_OPTIN, UGC_SHARE, LIKE, COMMENT,
# VIEW_THRESHOLD, CUSTOM.
Trigger = models.TextChoices("Trigger", [(spec.value.upper(), (spec.value, spec.label)) for spec in TRIGGERS])


class AmountType(models.TextChoices):
    FIXED = "fixed", _("Fixed amount")
    PERCENT = "percent", _("Percent of the purchase")


class ApprovalPolicy(models.TextChoices):
    AUTO = "auto", _("Automatic")
    REVIEW_ABOVE = "review_above", _("Review above an amount")
    ALWAYS_REVIEW = "always_review", _("Always review")


class Verification(models.TextChoices):
    FIRST_PARTY = "first_party", _("First-party (we verified it through the platform)")
    PARTNER_ATTESTED = "partner_attested", _("Partner-attested (the brand's system says so)")
    MANUAL = "manual", _("Manual review")


UNVERIFIABLE_FIRST_PARTY = tuple(Trigger(v) for v in trigger_values(unverifiable=True))
UNVERIFIABLE_EXPLANATION = (
    "Likes and comments on brand content cannot be verified first-party: TikTok's public APIs "
    "(Login Kit, Display API) only show a person's own profile and videos, not who liked or commented "
    "on someone else's video. Use partner-attested (your agency or tool reports them) or manual review."
)

# Purchases have no first-party proof: the shop's system reports them (the Cashback API), so a
# purchase rule is partner-attested or manual; a first-party one would refuse every purchase.
PURCHASE_NOT_FIRST_PARTY = _(
    "A purchase is reported by the shop's system, never verified first-party: choose partner-attested "
    "(the shop's API call says so) or manual review."
)


def verification_default(trigger: str) -> str:
    """How a rule for ``trigger`` is verified unless the brand says otherwise: likes and comments
    (TikTok cannot show them) and purchases (the shop reports them) are partner-attested."""
    if trigger in (*UNVERIFIABLE_FIRST_PARTY, Trigger.PURCHASE):
        return Verification.PARTNER_ATTESTED
    return Verification.FIRST_PARTY


# Paid engagement: TikTok's terms forbid artificially inflating engagement, and a like or a comment
# on someone else's video is invisible to the public APIs. Shown wherever such a rule is made or read.
ENGAGEMENT_TRIGGERS = tuple(Trigger(v) for v in trigger_values(engagement=True))
ENGAGEMENT_TERMS_WARNING = _(
    "Paying people for likes, comments or views may breach TikTok's terms (incentivised or artificial "
    "engagement) and can get the content or the account penalised; likes and comments cannot be verified "
    "first-party, only reported by your system or checked by hand. Prefer rewarding purchases, logins, "
    "opt-ins or videos people make themselves."
)


class RewardRule(models.Model):
    """What a campaign pays for one trigger event, when, and how often.

    Amount: ``fixed_minor``, or ``percent_bps`` of the purchase (basis points) clamped to
    ``min_minor``/``max_minor``; a percentage is rounded ROUND_HALF_UP to the minor unit once
    (``core.money.round_to_minor``), then clamped.
    Caps (null = no cap) are per rule. Per person they count every identity linked to that person
    (any shared email, phone, IBAN or social account); per IBAN they count rewards paid to that
    IBAN whoever claims; per day and per week are calendar periods in the campaign's time zone
    (weeks start on Monday), taken from the event's ``occurred_at``. Rewards that were voided,
    rejected or clawed back do not count.
    One active rule per (campaign, trigger, custom name): an event finds its rule unambiguously.
    """

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="rules")
    name = models.CharField(max_length=200, blank=True, default="")
    trigger = models.CharField(max_length=20, choices=Trigger.choices)
    custom_name = models.SlugField(max_length=60, blank=True, default="", help_text="Only for custom triggers.")
    is_active = models.BooleanField(default=True)
    # Amount.
    amount_type = models.CharField(max_length=10, choices=AmountType.choices, default=AmountType.FIXED)
    fixed_minor = models.BigIntegerField(null=True, blank=True)
    percent_bps = models.PositiveIntegerField(null=True, blank=True, help_text="Basis points: 500 = 5%.")
    min_minor = models.BigIntegerField(null=True, blank=True)
    max_minor = models.BigIntegerField(null=True, blank=True)
    # Conditions.
    allowed_iban_countries = models.JSONField(
        default=list, blank=True, help_text='ISO country codes of accepted IBANs, e.g. ["NL", "IT"]; empty: any.'
    )
    new_people_only = models.BooleanField(default=False, help_text="Only people never rewarded by this brand before.")
    min_purchase_minor = models.BigIntegerField(null=True, blank=True)
    view_threshold = models.PositiveIntegerField(null=True, blank=True)
    required_code = models.CharField(
        max_length=60, blank=True, default="", help_text="Hashtag or code the event must carry (case-insensitive)."
    )
    # Caps per person (all linked identities).
    person_count_per_day = models.PositiveIntegerField(null=True, blank=True)
    person_count_per_week = models.PositiveIntegerField(null=True, blank=True)
    person_count_per_campaign = models.PositiveIntegerField(null=True, blank=True)
    person_amount_per_day_minor = models.BigIntegerField(null=True, blank=True)
    person_amount_per_week_minor = models.BigIntegerField(null=True, blank=True)
    person_amount_per_campaign_minor = models.BigIntegerField(null=True, blank=True)
    # Caps per IBAN.
    iban_count_per_day = models.PositiveIntegerField(null=True, blank=True)
    iban_count_per_campaign = models.PositiveIntegerField(null=True, blank=True)
    # Caps for the whole campaign (this rule).
    campaign_count = models.PositiveIntegerField(null=True, blank=True, help_text="At most this many rewards.")
    campaign_count_per_day = models.PositiveIntegerField(null=True, blank=True)
    # Maturing and approval.
    hold_days = models.PositiveIntegerField(default=0, help_text="e.g. 14 for a cashback return window, 0 for a login.")
    approval_policy = models.CharField(max_length=16, choices=ApprovalPolicy.choices, default=ApprovalPolicy.AUTO)
    review_above_minor = models.BigIntegerField(null=True, blank=True)
    verification = models.CharField(
        max_length=20,
        choices=Verification.choices,
        default=Verification.FIRST_PARTY,
        help_text=UNVERIFIABLE_EXPLANATION,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(trigger__in=Trigger.values), name="rule_trigger_valid"),
            models.CheckConstraint(
                condition=(Q(trigger="custom") & ~Q(custom_name="")) | (~Q(trigger="custom") & Q(custom_name="")),
                name="rule_custom_name_iff_custom",
            ),
            models.CheckConstraint(
                condition=(
                    Q(amount_type="fixed", fixed_minor__isnull=False, fixed_minor__gt=0, percent_bps__isnull=True)
                    | Q(
                        amount_type="percent",
                        fixed_minor__isnull=True,
                        percent_bps__isnull=False,
                        percent_bps__gt=0,
                        percent_bps__lte=10000,
                    )
                ),
                name="rule_amount_coherent",
            ),
            models.CheckConstraint(
                condition=Q(amount_type="fixed") | Q(trigger="purchase"),
                name="rule_percent_only_for_purchases",
            ),
            models.CheckConstraint(condition=Q(min_minor__isnull=True) | Q(min_minor__gt=0), name="rule_min_positive"),
            models.CheckConstraint(
                condition=Q(max_minor__isnull=True) | Q(min_minor__isnull=True) | Q(max_minor__gte=F("min_minor")),
                name="rule_max_not_below_min",
            ),
            models.CheckConstraint(condition=Q(max_minor__isnull=True) | Q(max_minor__gt=0), name="rule_max_positive"),
            models.CheckConstraint(
                condition=~Q(trigger__in=UNVERIFIABLE_FIRST_PARTY) | ~Q(verification="first_party"),
                name="rule_like_comment_not_first_party",
            ),
            models.CheckConstraint(
                condition=~Q(trigger="purchase") | ~Q(verification="first_party"),
                name="rule_purchase_not_first_party",
            ),
            models.CheckConstraint(condition=Q(verification__in=Verification.values), name="rule_verification_valid"),
            models.CheckConstraint(
                condition=(
                    (Q(approval_policy="review_above", review_above_minor__isnull=False, review_above_minor__gt=0))
                    | (Q(approval_policy__in=["auto", "always_review"]) & Q(review_above_minor__isnull=True))
                ),
                name="rule_review_above_needs_amount",
            ),
            models.CheckConstraint(condition=Q(hold_days__lte=365), name="rule_hold_days_at_most_a_year"),
            models.CheckConstraint(
                condition=(
                    (Q(person_amount_per_day_minor__isnull=True) | Q(person_amount_per_day_minor__gt=0))
                    & (Q(person_amount_per_week_minor__isnull=True) | Q(person_amount_per_week_minor__gt=0))
                    & (Q(person_amount_per_campaign_minor__isnull=True) | Q(person_amount_per_campaign_minor__gt=0))
                    & (Q(min_purchase_minor__isnull=True) | Q(min_purchase_minor__gt=0))
                ),
                name="rule_amount_caps_positive",
            ),
            models.UniqueConstraint(
                fields=["campaign", "trigger", "custom_name"],
                condition=Q(is_active=True),
                name="rule_one_active_per_trigger",
            ),
        ]

    def __str__(self) -> str:
        label = self.custom_name if self.trigger == Trigger.CUSTOM else self.get_trigger_display()
        return self.name or f"{label} rule"

    @property
    def terms_warning(self) -> str:
        """The platform-terms warning for a paid-engagement rule (``ENGAGEMENT_TRIGGERS``), else ""."""
        return str(ENGAGEMENT_TERMS_WARNING) if self.trigger in ENGAGEMENT_TRIGGERS else ""

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.trigger in UNVERIFIABLE_FIRST_PARTY and self.verification == Verification.FIRST_PARTY:
            errors["verification"] = UNVERIFIABLE_EXPLANATION
        if self.trigger == Trigger.PURCHASE and self.verification == Verification.FIRST_PARTY:
            errors["verification"] = str(PURCHASE_NOT_FIRST_PARTY)
        if self.trigger == Trigger.CUSTOM and not self.custom_name:
            errors["custom_name"] = "A custom trigger needs a name."
        if self.trigger != Trigger.CUSTOM and self.custom_name:
            errors["custom_name"] = "Only custom triggers have a name."
        if self.amount_type == AmountType.FIXED:
            if not self.fixed_minor or self.fixed_minor <= 0:
                errors["fixed_minor"] = "A fixed reward needs a positive amount."
            if self.percent_bps is not None:
                errors["percent_bps"] = "A fixed reward has no percentage."
        else:
            if self.trigger != Trigger.PURCHASE:
                errors["amount_type"] = "Only purchase rules can pay a percentage (of the purchase)."
            if not self.percent_bps or not 0 < self.percent_bps <= 10000:
                errors["percent_bps"] = "A percentage reward needs 1 to 10000 basis points."
            if self.fixed_minor is not None:
                errors["fixed_minor"] = "A percentage reward has no fixed amount."
        if self.min_minor is not None and self.max_minor is not None and self.max_minor < self.min_minor:
            errors["max_minor"] = "The maximum cannot be below the minimum."
        if self.approval_policy == ApprovalPolicy.REVIEW_ABOVE and not self.review_above_minor:
            errors["review_above_minor"] = "Say above which amount rewards go to review."
        if self.approval_policy != ApprovalPolicy.REVIEW_ABOVE and self.review_above_minor is not None:
            errors["review_above_minor"] = "Only the 'review above an amount' policy uses this."
        if self.view_threshold is not None and self.trigger != Trigger.VIEW_THRESHOLD:
            errors["view_threshold"] = "Only view-threshold rules have a view count."
        if self.trigger == Trigger.VIEW_THRESHOLD and not self.view_threshold:
            errors["view_threshold"] = "A view-threshold rule needs the number of views."
        if self.min_purchase_minor is not None and self.trigger != Trigger.PURCHASE:
            errors["min_purchase_minor"] = "Only purchase rules have a minimum purchase."
        countries = self.allowed_iban_countries
        if not isinstance(countries, list) or any(
            not isinstance(c, str) or len(c) != 2 or not c.isalpha() or not c.isupper() for c in countries
        ):
            errors["allowed_iban_countries"] = 'A list of two-letter upper-case country codes, e.g. ["NL", "IT"].'
        if errors:
            raise ValidationError(errors)

    @property
    def requires_iban(self) -> bool:
        """IBAN-based conditions and caps can only be checked when the person has an IBAN."""
        return bool(self.allowed_iban_countries) or bool(self.iban_count_per_day or self.iban_count_per_campaign)

    @property
    def has_person_caps(self) -> bool:
        return any(
            v is not None
            for v in (
                self.person_count_per_day,
                self.person_count_per_week,
                self.person_count_per_campaign,
                self.person_amount_per_day_minor,
                self.person_amount_per_week_minor,
                self.person_amount_per_campaign_minor,
            )
        )

    @property
    def has_iban_caps(self) -> bool:
        return self.iban_count_per_day is not None or self.iban_count_per_campaign is not None

    @property
    def smallest_reward_minor(self) -> int:
        """The least this rule can pay: what auto-pause compares the available budget against."""
        if self.amount_type == AmountType.FIXED:
            return self.fixed_minor or 0
        return self.min_minor or 1
