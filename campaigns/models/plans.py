"""Packages a brand buys (issue 28): what each allows and costs, and which one a brand is on.

A ``Plan`` is sold on the public site (``is_public``) and edited by ops in the admin, never in
code: the triggers and channels it allows, its monthly allowances (None = no limit), its fees per
reward (fixed + basis points, booked by the ledger to ``platform:fees``) and its monthly fee. The
four packages are seeded by migration 0018. A brand is on exactly one plan at a time: its
``BrandPlan`` rows are the history, the one with no ``ended_at`` the current one (a partial unique
constraint), changed only through ``brand_plan_change``.
"""

from datetime import UTC, date, datetime

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from campaigns.models.brands import Brand
from core.money import format_minor


class Channel(models.TextChoices):
    """How a plan's actions reach the engine."""

    CLAIM_PAGE = "claim_page", _("Public claim pages")
    API = "api", _("Partner API")


class Plan(models.Model):
    slug = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=80)
    name_it = models.CharField(max_length=80, blank=True, help_text="Italian name; the English one when empty.")
    tagline = models.CharField(max_length=200, blank=True)
    tagline_it = models.CharField(max_length=200, blank=True)
    # One highlight per line, shown on the pricing page.
    highlights = models.TextField(blank=True)
    highlights_it = models.TextField(blank=True)
    triggers = models.JSONField(default=list, help_text="Trigger codes this plan allows (campaigns.models.Trigger).")
    channels = models.JSONField(default=list, help_text="Channels this plan allows: claim_page, api.")
    monthly_actions = models.PositiveIntegerField(
        null=True, blank=True, help_text="Rewarded actions per calendar month; empty = no limit."
    )
    monthly_payouts_minor = models.BigIntegerField(
        null=True, blank=True, help_text="Money paid to people per calendar month, minor units; empty = no limit."
    )
    fee_fixed_minor = models.BigIntegerField(default=0, help_text="Fee per reward, minor units.")
    fee_bps = models.PositiveIntegerField(default=0, help_text="Fee per reward in basis points (100 = 1%).")
    monthly_fee_minor = models.BigIntegerField(default=0, help_text="Monthly fee, minor units.")
    currency = models.CharField(max_length=3, default="EUR")
    is_public = models.BooleanField(default=True, help_text="Shown on the public pricing page.")
    position = models.PositiveSmallIntegerField(default=0, help_text="Order on the pricing page.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(fee_fixed_minor__gte=0), name="plan_fee_fixed_not_negative"),
            models.CheckConstraint(condition=Q(fee_bps__lte=10000), name="plan_fee_bps_at_most_100pct"),
            models.CheckConstraint(condition=Q(monthly_fee_minor__gte=0), name="plan_monthly_fee_not_negative"),
            models.CheckConstraint(
                condition=Q(monthly_payouts_minor__isnull=True) | Q(monthly_payouts_minor__gte=0),
                name="plan_monthly_payouts_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def fee_description(self) -> str:
        """The fee per reward, e.g. "€0.15", "10%" or "€0.10 + 2%"."""
        parts = [format_minor(self.fee_fixed_minor, self.currency)] if self.fee_fixed_minor else []
        if self.fee_bps:
            parts.append(f"{self.fee_bps / 100:g}%")
        return " + ".join(parts) or str(_("no fee"))


class BrandPlan(models.Model):
    """One period of a brand on a plan; the current one has no ``ended_at``."""

    brand = models.ForeignKey(Brand, on_delete=models.CASCADE, related_name="plan_periods")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="brand_periods")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["brand"], condition=Q(ended_at__isnull=True), name="brandplan_one_current_per_brand"
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=models.F("started_at")),
                name="brandplan_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.brand} on {self.plan}"


def usage_month(moment: datetime) -> date:
    """The calendar month (UTC) a moment's usage counts in: its first day."""
    return moment.astimezone(UTC).date().replace(day=1)


class BrandUsage(models.Model):
    """A brand's rewarded actions and their reward amounts in one calendar month (UTC, by the
    moment ingestion accepted them), held against its plan's monthly allowances. Ingestion adds
    each batch's share in one upsert and, when the plan has an allowance, reads the row locked
    after the campaigns' tallies (``campaigns.locks``). A reward voided later still counts: the
    plan sells actions processed, and the month's figure never goes back."""

    brand = models.ForeignKey(Brand, on_delete=models.CASCADE, related_name="usage_months")
    month = models.DateField(help_text="The first day of the month.")
    actions = models.PositiveIntegerField(default=0)
    rewards_minor = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["brand", "month"], name="brandusage_one_per_month"),
            models.CheckConstraint(condition=Q(rewards_minor__gte=0), name="brandusage_rewards_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.brand} {self.month:%Y-%m}"


class UpgradeRequest(models.Model):
    """A brand asking ops for another plan from the portal; ops answer it in the admin (and change
    the plan there with ``brand_plan_change``)."""

    brand = models.ForeignKey(Brand, on_delete=models.CASCADE, related_name="upgrade_requests")
    current_plan = models.ForeignKey(Plan, null=True, on_delete=models.PROTECT, related_name="+")
    wanted_plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="+")
    message = models.TextField(blank=True, max_length=2000)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    handled_at = models.DateTimeField(null=True, blank=True)
    handled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.brand}: {self.current_plan} → {self.wanted_plan}"


class PlanCharge(models.Model):
    """A plan's monthly fee for one calendar month (UTC), charged to a live brand's funds
    (``plan_charges_run``): due when created, posted when the brand's funds cover it, by one
    ledger entry (funds → ``platform:fees``) in the same transaction. One per brand and month."""

    brand = models.ForeignKey(Brand, on_delete=models.PROTECT, related_name="plan_charges")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="+")
    month = models.DateField(help_text="The first day of the month charged.")
    amount_minor = models.BigIntegerField()
    currency = models.CharField(max_length=3)
    created_at = models.DateTimeField()
    entry = models.OneToOneField(
        "reconciliation.JournalEntry", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    posted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["brand", "month"], name="plancharge_one_per_month"),
            models.CheckConstraint(condition=Q(amount_minor__gt=0), name="plancharge_amount_positive"),
            models.CheckConstraint(
                condition=Q(entry__isnull=True, posted_at__isnull=True)
                | Q(entry__isnull=False, posted_at__isnull=False),
                name="plancharge_posted_with_entry",
            ),
        ]
        indexes = [models.Index(fields=["id"], name="plancharge_due_idx", condition=Q(entry__isnull=True))]

    def __str__(self) -> str:
        return f"{self.brand} {self.month:%Y-%m} {format_minor(self.amount_minor, self.currency)}"
