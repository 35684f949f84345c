"""Every campaign of a brand side by side, and totals per currency."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db.models import Count, Sum
from django.utils import timezone

from campaigns.analytics.campaign import CHART_DAYS, stats_as_of
from campaigns.analytics.costs import cost_per_action, cost_per_mille, cost_per_view
from campaigns.models import Brand, Campaign, CampaignDay, CampaignDayTrigger, VideoStatus, VideoSubmission


@dataclass(frozen=True)
class CampaignSummary:
    campaign: Campaign
    visits: int
    started: int
    verified: int
    paid: int
    spent_minor: int
    views: int
    videos: int

    @property
    def cost_per_action(self):
        return cost_per_action(self.spent_minor, self.verified, self.campaign.currency)

    @property
    def cost_per_view(self):
        return cost_per_view(self.spent_minor, self.views, self.campaign.currency)

    @property
    def cost_per_mille(self):
        return cost_per_mille(self.spent_minor, self.views, self.campaign.currency)


@dataclass(frozen=True)
class CurrencyTotals:
    currency: str
    visits: int
    started: int
    verified: int
    paid: int
    spent_minor: int
    views: int

    @property
    def cost_per_action(self):
        return cost_per_action(self.spent_minor, self.verified, self.currency)

    @property
    def cost_per_view(self):
        return cost_per_view(self.spent_minor, self.views, self.currency)

    @property
    def cost_per_mille(self):
        return cost_per_mille(self.spent_minor, self.views, self.currency)


@dataclass
class BrandStats:
    campaigns: list[CampaignSummary]
    totals: list[CurrencyTotals]  # per currency: money of two currencies never adds up
    as_of: datetime | None
    days: list[date] = field(default_factory=list)
    started_per_day: list[int] = field(default_factory=list)
    verified_per_day: list[int] = field(default_factory=list)


def brand_stats(*, brand: Brand, today: date | None = None, days: int = CHART_DAYS) -> BrandStats:
    """Every campaign of ``brand`` side by side, totals per currency, and the brand's actions per
    day (the campaigns' own days). A fixed number of queries."""
    campaigns = list(Campaign.objects.filter(brand=brand).order_by("-created_at", "-id"))
    per_campaign = {
        r["campaign_id"]: r
        for r in CampaignDayTrigger.objects.filter(campaign__brand=brand)
        .values("campaign_id")
        .annotate(started=Sum("events"), verified=Sum("verified"), paid=Sum("paid"), spent=Sum("spent_minor"))
        .order_by("campaign_id")
    }
    visits = dict(
        CampaignDay.objects.filter(campaign__brand=brand)
        .values("campaign_id")
        .annotate(n=Sum("visits"))
        .values_list("campaign_id", "n")
        .order_by("campaign_id")
    )
    videos = {
        r["campaign_id"]: r
        for r in VideoSubmission.objects.filter(campaign__brand=brand, status=VideoStatus.VERIFIED)
        .values("campaign_id")
        .annotate(views=Sum("view_count"), n=Count("id"))
        .order_by("campaign_id")
    }
    summaries = []
    for c in campaigns:
        figures = per_campaign.get(c.pk, {})
        summaries.append(
            CampaignSummary(
                campaign=c,
                visits=visits.get(c.pk, 0) or 0,
                started=figures.get("started", 0),
                verified=figures.get("verified", 0),
                paid=figures.get("paid", 0),
                spent_minor=figures.get("spent", 0),
                views=(videos.get(c.pk) or {}).get("views") or 0,
                videos=(videos.get(c.pk) or {}).get("n") or 0,
            )
        )
    sums: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for s in summaries:
        t = sums[s.campaign.currency]
        for key in ("visits", "started", "verified", "paid", "spent_minor", "views"):
            t[key] += getattr(s, key)
    totals = [CurrencyTotals(currency=cur, **values) for cur, values in sorted(sums.items())]

    today = today or timezone.localdate()
    window = [today - timedelta(days=days - 1 - i) for i in range(days)]
    daily = {
        r["day"]: r
        for r in CampaignDayTrigger.objects.filter(campaign__brand=brand, day__gte=window[0], day__lte=window[-1])
        .values("day")
        .annotate(started=Sum("events"), verified=Sum("verified"))
        .order_by("day")
    }
    return BrandStats(
        campaigns=summaries,
        totals=totals,
        as_of=stats_as_of(),
        days=window,
        started_per_day=[daily[d]["started"] if d in daily else 0 for d in window],
        verified_per_day=[daily[d]["verified"] if d in daily else 0 for d in window],
    )
