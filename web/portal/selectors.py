"""Reads for the portal, always scoped to one brand. Budget figures come from the ledger's
materialised balances (``campaigns.selectors.campaigns_with_budget``), counts from grouped
aggregates: a dashboard is a handful of queries whatever the number of rewards.

The dashboard's campaigns, counts and charts are lag-tolerant (``core.replica``): with a replica
configured they read it, except during and just after this browser's own writes. The brand's
unallocated funds are one row per currency read through the books' own selector, on the primary."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from campaigns.models import Brand, Campaign, Reward, RewardStatus, Trigger
from campaigns.models.events import LIVE_STATUSES
from campaigns.selectors import campaigns_with_budget
from core.exceptions import NotFound
from core.replica import lag_tolerant
from payouts.models import PayoutItem, PayoutStatus
from recipients.models import Notice
from reconciliation.selectors import account_balance_by_code

CHART_DAYS = 30


@dataclass
class BudgetTotals:
    currency: str
    unallocated_minor: int = 0
    funded_minor: int = 0
    held_minor: int = 0
    spent_minor: int = 0
    available_minor: int = 0


@dataclass
class Dashboard:
    totals: list[BudgetTotals]
    campaigns: list[Campaign]
    rewards_by_trigger: list[dict]  # trigger label, per-status counts, total
    statuses: list[tuple[str, str]]
    payouts_by_status: list[dict]  # status, label, count, amount_minor, currency
    days: list[date] = field(default_factory=list)
    actions_per_day: list[int] = field(default_factory=list)
    paid_per_day_minor: list[int] = field(default_factory=list)
    chart_currency: str = "EUR"


def brand_unallocated_minor(*, brand: Brand, currency: str) -> int:
    """Money the brand sent us and has not yet allocated to a campaign (0 before its first top-up)."""
    try:
        return account_balance_by_code(code=f"brand:{brand.pk}:funds:{currency}").available_minor
    except NotFound:
        return 0


def brand_campaigns(*, brand: Brand) -> QuerySet[Campaign]:
    """The brand's campaigns with budget figures and live reward counts (for cost per action)."""
    return (
        campaigns_with_budget()
        .filter(brand=brand)
        .annotate(actions=Count("rewards", filter=Q(rewards__status__in=LIVE_STATUSES)))
        .order_by("-created_at", "-id")
    )


def cost_per_action_minor(campaign: Campaign) -> int | None:
    """Spent budget (rewards + fees, net of claw-backs) per rewarded action."""
    if not campaign.actions:
        return None
    return (campaign.spent_minor or 0) // campaign.actions


def brand_rewards(*, brand: Brand) -> QuerySet[Reward]:
    return Reward.objects.filter(campaign__brand=brand).select_related("campaign", "rule", "person", "event")


def brand_payout_items(*, brand: Brand) -> QuerySet[PayoutItem]:
    """One row per (payout, reward of this brand): a payout can carry another brand's rewards to
    the same person, and those amounts are not this brand's business."""
    return PayoutItem.objects.filter(reward__campaign__brand=brand).select_related(
        "payout", "reward__campaign", "reward__rule", "payout__person"
    )


def brand_dashboard(*, brand: Brand, today: date | None = None) -> Dashboard:
    campaigns = list(lag_tolerant(brand_campaigns(brand=brand)))
    totals: dict[str, BudgetTotals] = {}
    for c in campaigns:
        t = totals.setdefault(c.currency, BudgetTotals(currency=c.currency))
        t.funded_minor += c.funded_minor or 0
        t.held_minor += c.held_minor or 0
        t.spent_minor += c.spent_minor or 0
        t.available_minor += c.available_minor or 0
        c.cpa_minor = cost_per_action_minor(c)
    for currency in {*totals.keys(), brand.default_currency}:
        totals.setdefault(currency, BudgetTotals(currency=currency)).unallocated_minor = brand_unallocated_minor(
            brand=brand, currency=currency
        )

    statuses = [(s.value, s.label) for s in RewardStatus]
    grid: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_trigger = Reward.objects.filter(campaign__brand=brand).values("rule__trigger", "status").annotate(n=Count("id"))
    for row in lag_tolerant(by_trigger):
        grid[row["rule__trigger"]][row["status"]] = row["n"]
    labels = dict(Trigger.choices)
    rewards_by_trigger = [
        {
            "trigger": labels.get(trigger, trigger),
            "counts": [grid[trigger][s] for s, _ in statuses],
            "total": sum(grid[trigger].values()),
        }
        for trigger in sorted(grid)
    ]

    payout_rows = lag_tolerant(
        brand_payout_items(brand=brand)
        .filter(active=True)
        .values("payout__status", "payout__currency")
        .annotate(n=Count("id"), total=Sum("amount_minor"))
        .order_by("payout__status")
    )
    # Returned and failed payouts release their items (active=False): count those too.
    released = lag_tolerant(
        brand_payout_items(brand=brand)
        .filter(active=False, payout__status__in=[PayoutStatus.RETURNED, PayoutStatus.FAILED])
        .values("payout__status", "payout__currency")
        .annotate(n=Count("id"), total=Sum("amount_minor"))
    )
    status_labels = dict(PayoutStatus.choices)
    payouts_by_status = [
        {
            "status": r["payout__status"],
            "label": status_labels.get(r["payout__status"], r["payout__status"]),
            "count": r["n"],
            "amount_minor": r["total"] or 0,
            "currency": r["payout__currency"],
        }
        for r in [*payout_rows, *released]
    ]

    today = today or timezone.localdate()
    start = today - timedelta(days=CHART_DAYS - 1)
    days = [start + timedelta(days=i) for i in range(CHART_DAYS)]
    actions = dict(
        lag_tolerant(Reward.objects.all())
        .filter(campaign__brand=brand, created_at__date__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"))
        .values_list("day", "n")
    )
    chart_currency = brand.default_currency
    paid = dict(
        lag_tolerant(brand_payout_items(brand=brand))
        .filter(
            active=True,
            payout__status=PayoutStatus.SETTLED,
            payout__settled_at__date__gte=start,
            payout__currency=chart_currency,
        )
        .annotate(day=TruncDate("payout__settled_at"))
        .values("day")
        .annotate(total=Sum("amount_minor"))
        .values_list("day", "total")
    )
    return Dashboard(
        totals=sorted(totals.values(), key=lambda t: t.currency),
        campaigns=campaigns,
        rewards_by_trigger=rewards_by_trigger,
        statuses=statuses,
        payouts_by_status=payouts_by_status,
        days=days,
        actions_per_day=[actions.get(d, 0) for d in days],
        paid_per_day_minor=[paid.get(d, 0) or 0 for d in days],
        chart_currency=chart_currency,
    )


def test_inbox(*, tenant: Brand, limit: int = 20) -> QuerySet[Notice]:
    """The latest messages to a test tenant's people (delivered to its test inbox, never sent:
    ``recipients.services.notices``), newest first. Only a test tenant has one."""
    if tenant.livemode:
        return Notice.objects.none()
    return Notice.objects.filter(person__brand=tenant).select_related("person").order_by("-id")[:limit]
