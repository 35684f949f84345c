"""Reads for brands, campaigns and rewards. Budget figures come from the ledger's materialised
balances (one row each), so a list of campaigns with their budgets is one query."""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import F, OuterRef, QuerySet, Subquery
from django.utils import timezone

from campaigns.models import (
    ActionWithdrawal,
    Brand,
    BrandMembership,
    BrandPlan,
    BrandUsage,
    Campaign,
    Plan,
    PlanCharge,
    Reward,
    RewardStatus,
    UpgradeRequest,
)
from campaigns.models.plans import usage_month
from core.exceptions import InvalidInput
from recipients import crypto


@dataclass(frozen=True)
class CampaignBudget:
    """``funded``: allocated so far; ``held``: reserved for rewards in review or maturing;
    ``spent``: funded minus available (reserved + committed to people and fees, net of
    claw-backs); ``available``: what new rewards can still reserve."""

    currency: str
    funded_minor: int
    held_minor: int
    available_minor: int

    @property
    def spent_minor(self) -> int:
        return self.funded_minor - self.available_minor

    @property
    def spent_pct(self) -> int:
        return (self.spent_minor * 100 // self.funded_minor) if self.funded_minor else 0


def campaign_budget(*, campaign: Campaign) -> CampaignBudget:
    row = (
        Campaign.objects.filter(pk=campaign.pk)
        .values_list("currency", "tally__funded_minor", "budget_account__posted_minor", "budget_account__held_minor")
        .get()
    )
    currency, funded, posted, held = row
    return CampaignBudget(
        currency=currency, funded_minor=funded or 0, held_minor=held or 0, available_minor=(posted or 0) - (held or 0)
    )


def campaigns_with_budget() -> QuerySet[Campaign]:
    """Campaigns annotated with ``funded_minor``, ``held_minor``, ``available_minor``, ``spent_minor``."""
    return Campaign.objects.select_related("brand", "budget_account").annotate(
        funded_minor=F("tally__funded_minor"),
        held_minor=F("budget_account__held_minor"),
        available_minor=F("budget_account__posted_minor") - F("budget_account__held_minor"),
        spent_minor=F("tally__funded_minor") - (F("budget_account__posted_minor") - F("budget_account__held_minor")),
    )


def review_queue(*, brand=None) -> QuerySet[Reward]:
    qs = Reward.objects.filter(status=RewardStatus.REVIEW).select_related("campaign__brand", "rule", "person", "event")
    if brand is not None:
        qs = qs.filter(campaign__brand=brand)
    return qs.order_by("created_at", "id")


def brands_for_user(*, user) -> list[tuple[int, str]]:
    """(brand id, role) of every brand the user belongs to."""
    return list(BrandMembership.objects.filter(user=user).values_list("brand_id", "role"))


def brand_plan_current(*, brand: Brand) -> Plan | None:
    """The plan the brand is on now (None only for a brand made before its default plan existed)."""
    period = BrandPlan.objects.select_related("plan").filter(brand=brand, ended_at__isnull=True).first()
    return period.plan if period else None


def brand_plans_current(*, brand_ids: set[int]) -> dict[int, Plan]:
    """The current plan of each of ``brand_ids`` (brand id → plan), in one query."""
    periods = BrandPlan.objects.select_related("plan").filter(brand_id__in=brand_ids, ended_at__isnull=True)
    return {period.brand_id: period.plan for period in periods}


def plans_for_sale() -> QuerySet[Plan]:
    """The packages shown on the public pricing page, in their order."""
    return Plan.objects.filter(is_public=True).order_by("position", "id")


def plan_default() -> Plan:
    """The plan a new brand starts on (``settings.PLAN_DEFAULT_SLUG``). Raises InvalidInput when
    ops removed it."""
    slug = settings.PLAN_DEFAULT_SLUG
    plan = Plan.objects.filter(slug=slug).first()
    if plan is None:
        raise InvalidInput(f"The default plan {slug!r} does not exist.", code="no_default_plan")
    return plan


def brands_with_plan() -> QuerySet[Brand]:
    """Brands annotated with ``plan_name``: their current plan's name (one query for a list)."""
    current = BrandPlan.objects.filter(brand=OuterRef("pk"), ended_at__isnull=True).values("plan__name")[:1]
    return Brand.objects.annotate(plan_name=Subquery(current))


@dataclass(frozen=True)
class PlanUsage:
    """A brand's month so far against its plan's allowances (None: no limit)."""

    month: object
    actions: int
    rewards_minor: int
    actions_allowed: int | None
    rewards_allowed_minor: int | None

    @property
    def actions_pct(self) -> int | None:
        return None if not self.actions_allowed else min(100, self.actions * 100 // self.actions_allowed)

    @property
    def rewards_pct(self) -> int | None:
        if not self.rewards_allowed_minor:
            return None
        return min(100, self.rewards_minor * 100 // self.rewards_allowed_minor)


def brand_usage_month(*, brand: Brand, plan: Plan | None, now=None) -> PlanUsage:
    """This calendar month's (UTC) rewarded actions and reward amounts (``BrandUsage``, counted by
    ingestion) against ``plan``'s allowances."""
    month = usage_month(now or timezone.now())
    row = BrandUsage.objects.filter(brand=brand, month=month).values_list("actions", "rewards_minor").first()
    actions, rewards = row or (0, 0)
    return PlanUsage(
        month=month,
        actions=actions,
        rewards_minor=rewards,
        actions_allowed=plan.monthly_actions if plan else None,
        rewards_allowed_minor=plan.monthly_payouts_minor if plan else None,
    )


def upgrade_requests_open(*, brand: Brand) -> QuerySet[UpgradeRequest]:
    return UpgradeRequest.objects.filter(brand=brand, handled_at__isnull=True).select_related("wanted_plan")


def withdrawal_account(*, platform: str, uid: str) -> str:
    """The keyed fingerprint an ``ActionWithdrawal`` names its account by."""
    return crypto.fingerprint("action-withdrawal", f"{platform}:{uid}")


def action_withdrawn_since(*, platform: str, uid: str, kind: str, since) -> bool:
    """Did the account ``uid`` on ``platform`` take back (``kind``: an ``UndoneReason``) what it
    gave, at or after ``since``? A later opt-in or login is a new action, rewarded afresh.
    Platforms stamp their notices to the second: one in the action's second counts as after it."""
    return ActionWithdrawal.objects.filter(
        platform=platform,
        account=withdrawal_account(platform=platform, uid=uid),
        kind=kind,
        occurred_at__gte=since.replace(microsecond=0),
    ).exists()


def plan_charges_recent(*, brand: Brand, months: int = 12) -> QuerySet[PlanCharge]:
    """The brand's last ``months`` monthly fees, newest first (the portal's plan page)."""
    return PlanCharge.objects.filter(brand=brand).select_related("plan").order_by("-month")[:months]
