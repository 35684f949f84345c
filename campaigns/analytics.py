"""Reads of what a campaign's money bought (DESIGN §7): the UGC videos and their views over time,
total views, cost per view, per thousand views and per action by trigger, the funnel (claim page
visits → actions started → verified → paid) and daily series for charts.

Every figure comes from the pre-aggregated daily rows (``campaigns.models.analytics``, kept by
``campaigns.services.analytics``) and the video rows, never from the events: a campaign's page is
a fixed handful of queries however many actions it has. Figures trail the events by the
roll-up's settle time and interval (a few minutes); ``as_of`` says up to when.

Money is minor units inside, ``Money`` with ``Decimal`` amounts (django-money's ``moneyed``) out.
"""

import csv
import io
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Count, Max, Q, Sum
from django.utils import timezone
from moneyed import Money

from campaigns.models import (
    Brand,
    Campaign,
    CampaignDay,
    CampaignDayTrigger,
    StatsCursor,
    Trigger,
    VideoStatus,
    VideoSubmission,
    VideoViewDay,
)
from campaigns.platforms import platform_get
from campaigns.services.analytics import EVENTS_CURSOR
from core.exceptions import InvalidInput
from core.money import currency_exponent, from_minor, minor_to_decimal, round_to_minor
from recipients.models import Person

CHART_DAYS = 30
VIDEOS_SHOWN = 100
# A cost per view is a small fraction of a cent: four places below the currency's minor unit.
PER_VIEW_EXTRA_PLACES = 4
REMOVED_REASON = "video_gone"
# TikTok's share links name the author's account: https://www.tiktok.com/@handle/video/123.
HANDLE_IN_LINK = re.compile(r"/@([A-Za-z0-9._]{1,64})(?:/|$)")


def handle_visible(person: Person, brand: Brand) -> bool:
    """Whether ``brand`` may see who made a video: its author's handle is the person's data, shown
    only to a brand they gave marketing consent to.

    TODO(consent): wire to the marketing consent the person gave ``brand`` (the consent work in
    ``recipients``); until then no brand sees an author."""
    return False


def _cost(spent_minor: int, count: int, currency: str) -> Money | None:
    """Spent per unit, rounded half up to the minor unit (the project's one rounding rule); None
    when nothing was counted."""
    if not count:
        return None
    return from_minor(round_to_minor(minor_to_decimal(spent_minor, currency) / count, currency), currency)


def cost_per_view(spent_minor: int, views: int, currency: str) -> Money | None:
    """Spent per view as ``Money`` with four places below the minor unit (€0.0125), or None."""
    if not views:
        return None
    places = currency_exponent(currency) + PER_VIEW_EXTRA_PLACES
    amount = (minor_to_decimal(spent_minor, currency) / views).quantize(
        Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP
    )
    return Money(amount, currency)


def cost_per_mille(spent_minor: int, views: int, currency: str) -> Money | None:
    """Spent per thousand views (CPM), rounded half up to the minor unit, or None."""
    return _cost(spent_minor * 1000, views, currency)


def cost_per_action(spent_minor: int, actions: int, currency: str) -> Money | None:
    return _cost(spent_minor, actions, currency)


@dataclass(frozen=True)
class TriggerStats:
    trigger: str
    label: str
    started: int
    accepted: int
    verified: int
    paid: int
    undone: int
    spent_minor: int
    reserved_minor: int
    currency: str

    @property
    def cost_per_action(self):
        """Spent per verified action (past verification and hold)."""
        return cost_per_action(self.spent_minor, self.verified, self.currency)


@dataclass(frozen=True)
class Funnel:
    visits: int
    started: int
    verified: int
    paid: int

    def steps(self) -> list[tuple[str, int, int | None]]:
        """(key, count, percent of the step before) per step."""
        out, before = [], None
        for key in ("visits", "started", "verified", "paid"):
            value = getattr(self, key)
            pct = None if before in (None, 0) else round(100 * value / before)
            out.append((key, value, pct))
            before = value
        return out


@dataclass(frozen=True)
class VideoStats:
    id: int
    platform: str
    platform_label: str  # "TikTok"
    video_id: str
    share_url: str
    cover_url: str
    views: int
    live: bool  # False once the platform no longer shows it (deleted or made private)
    handle: str | None  # only where ``handle_visible``
    submitted_at: datetime
    checked_at: datetime | None


@dataclass
class CampaignStats:
    campaign: Campaign
    currency: str
    funnel: Funnel
    by_trigger: list[TriggerStats]
    spent_minor: int
    reserved_minor: int
    total_views: int
    videos: list[VideoStats]
    videos_total: int
    videos_live: int
    as_of: datetime | None
    days: list[date] = field(default_factory=list)
    visits_per_day: list[int] = field(default_factory=list)
    started_per_day: list[int] = field(default_factory=list)
    verified_per_day: list[int] = field(default_factory=list)
    spent_per_day_minor: list[int] = field(default_factory=list)
    views_per_day: list[int] = field(default_factory=list)  # total views reached by the end of each day

    @property
    def cost_per_view(self):
        return cost_per_view(self.spent_minor, self.total_views, self.currency)

    @property
    def cost_per_mille(self):
        return cost_per_mille(self.spent_minor, self.total_views, self.currency)

    @property
    def cost_per_action(self):
        return cost_per_action(self.spent_minor, self.funnel.verified, self.currency)


def _platform_label(name: str) -> str:
    try:
        return platform_get(name).label
    except InvalidInput:  # a platform configured once and removed since
        return name


def _handle(share_url: str) -> str | None:
    """The author's handle as the platform's link gives it, if it gives one."""
    found = HANDLE_IN_LINK.search(share_url)
    return f"@{found.group(1)}" if found else None


def _safe_url(url: str) -> str:
    """A platform's URL as given, if it is one a page may link to."""
    return url if url.startswith(("https://", "http://")) else ""


def stats_as_of() -> datetime | None:
    """Up to when events are in the figures: the last roll-up step that took some in."""
    return StatsCursor.objects.filter(name=EVENTS_CURSOR).values_list("updated_at", flat=True).first()


def _window(campaign: Campaign, today: date | None, days: int) -> list[date]:
    today = today or timezone.now().astimezone(campaign.tz).date()
    return [today - timedelta(days=days - 1 - i) for i in range(days)]


def _views_per_day(*, campaign: Campaign, days: list[date]) -> list[int]:
    """Total views reached by the end of each day: each video counts its highest reading up to
    that day (a day without a reading carries the one before)."""
    start, end = days[0], days[-1]
    videos = VideoViewDay.objects.filter(video__campaign=campaign)
    base = dict(videos.filter(day__lt=start).values("video_id").annotate(v=Max("views")).values_list("video_id", "v"))
    readings: dict[date, list[tuple[int, int]]] = defaultdict(list)
    for video_id, day, views in videos.filter(day__gte=start, day__lte=end).values_list("video_id", "day", "views"):
        readings[day].append((video_id, views))
    best = dict(base)
    out = []
    for day in days:
        for video_id, views in readings.get(day, ()):
            best[video_id] = max(best.get(video_id, 0), views)
        out.append(sum(best.values()))
    return out


def campaign_videos(*, campaign: Campaign, limit: int | None = VIDEOS_SHOWN) -> list[VideoStats]:
    """The campaign's verified videos, most viewed first."""
    rows = (
        VideoSubmission.objects.filter(campaign=campaign, status=VideoStatus.VERIFIED)
        .select_related("person")
        .order_by("-view_count", "id")
    )
    if limit is not None:
        rows = rows[:limit]
    brand = campaign.brand
    rows = list(rows)
    labels = {name: _platform_label(name) for name in {v.platform for v in rows}}
    return [
        VideoStats(
            id=v.pk,
            platform=v.platform,
            platform_label=labels[v.platform],
            video_id=v.video_id,
            share_url=_safe_url(v.share_url),
            cover_url=_safe_url(v.cover_url),
            views=v.view_count,
            live=v.reason != REMOVED_REASON,
            handle=_handle(v.share_url) if handle_visible(v.person, brand) else None,
            submitted_at=v.created_at,
            checked_at=v.checked_at,
        )
        for v in rows
    ]


def campaign_stats(*, campaign: Campaign, today: date | None = None, days: int = CHART_DAYS) -> CampaignStats:
    """Everything the campaign's stats page and API show; ``days`` days of series ending ``today``
    (the campaign's own today by default). A fixed number of queries."""
    window = _window(campaign, today, days)
    rows = CampaignDayTrigger.objects.filter(campaign=campaign)
    by_trigger_rows = (
        rows.values("trigger")
        .annotate(
            s_events=Sum("events"),
            s_accepted=Sum("accepted"),
            s_verified=Sum("verified"),
            s_paid=Sum("paid"),
            s_undone=Sum("undone"),
            s_spent=Sum("spent_minor"),
            s_reserved=Sum("reserved_minor"),
        )
        .order_by("trigger")
    )
    labels = dict(Trigger.choices)
    by_trigger = [
        TriggerStats(
            trigger=r["trigger"],
            label=str(labels.get(r["trigger"], r["trigger"])),
            started=r["s_events"],
            accepted=r["s_accepted"],
            verified=r["s_verified"],
            paid=r["s_paid"],
            undone=r["s_undone"],
            spent_minor=r["s_spent"],
            reserved_minor=r["s_reserved"],
            currency=campaign.currency,
        )
        for r in by_trigger_rows
    ]
    daily = {
        r["day"]: r
        for r in rows.filter(day__gte=window[0], day__lte=window[-1])
        .values("day")
        .annotate(s_events=Sum("events"), s_verified=Sum("verified"), s_spent=Sum("spent_minor"))
        .order_by("day")
    }
    visit_rows = CampaignDay.objects.filter(campaign=campaign)
    visits_total = visit_rows.aggregate(n=Sum("visits"))["n"] or 0
    visits = dict(visit_rows.filter(day__gte=window[0], day__lte=window[-1]).values_list("day", "visits"))
    video_rows = VideoSubmission.objects.filter(campaign=campaign, status=VideoStatus.VERIFIED)
    video_totals = video_rows.aggregate(
        views=Sum("view_count"), n=Count("id"), gone=Count("id", filter=Q(reason=REMOVED_REASON))
    )
    videos_total = video_totals["n"] or 0
    return CampaignStats(
        campaign=campaign,
        currency=campaign.currency,
        funnel=Funnel(
            visits=visits_total,
            started=sum(t.started for t in by_trigger),
            verified=sum(t.verified for t in by_trigger),
            paid=sum(t.paid for t in by_trigger),
        ),
        by_trigger=by_trigger,
        spent_minor=sum(t.spent_minor for t in by_trigger),
        reserved_minor=sum(t.reserved_minor for t in by_trigger),
        total_views=video_totals["views"] or 0,
        videos=campaign_videos(campaign=campaign),
        videos_total=videos_total,
        videos_live=videos_total - (video_totals["gone"] or 0),
        as_of=stats_as_of(),
        days=window,
        visits_per_day=[visits.get(d, 0) for d in window],
        started_per_day=[daily[d]["s_events"] if d in daily else 0 for d in window],
        verified_per_day=[daily[d]["s_verified"] if d in daily else 0 for d in window],
        spent_per_day_minor=[daily[d]["s_spent"] if d in daily else 0 for d in window],
        views_per_day=_views_per_day(campaign=campaign, days=window),
    )


def campaign_daily_rows(*, campaign: Campaign) -> list[dict]:
    """One row per day the campaign has figures for (visits, actions or views), oldest first: the
    CSV export. Views are the total reached by the end of the day."""
    figures = {
        r["day"]: r
        for r in CampaignDayTrigger.objects.filter(campaign=campaign)
        .values("day")
        .annotate(
            started=Sum("events"),
            accepted=Sum("accepted"),
            verified=Sum("verified"),
            paid=Sum("paid"),
            undone=Sum("undone"),
            spent_minor=Sum("spent_minor"),
            reserved_minor=Sum("reserved_minor"),
        )
        .order_by("day")
    }
    visits = dict(CampaignDay.objects.filter(campaign=campaign).values_list("day", "visits"))
    view_days = {
        d for d in VideoViewDay.objects.filter(video__campaign=campaign).values_list("day", flat=True).distinct()
    }
    known = sorted({*figures, *visits, *view_days})
    if not known:
        return []
    span = [known[0] + timedelta(days=i) for i in range((known[-1] - known[0]).days + 1)]
    views = dict(zip(span, _views_per_day(campaign=campaign, days=span), strict=True))
    empty = dict.fromkeys(("started", "accepted", "verified", "paid", "undone", "spent_minor", "reserved_minor"), 0)
    return [
        {"day": day, "visits": visits.get(day, 0), **{k: figures.get(day, empty)[k] for k in empty}}
        | {"views": views[day]}
        for day in known
    ]


CSV_COLUMNS = (
    "day", "visits", "started", "accepted", "verified", "paid", "undone", "spent_minor", "reserved_minor", "views",
)  # fmt: skip


def campaign_stats_csv(*, campaign) -> str:
    """``campaign_daily_rows`` as CSV, with the currency: numbers and dates only, so no cell can
    be read as a spreadsheet formula."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*CSV_COLUMNS, "currency"])
    for row in campaign_daily_rows(campaign=campaign):
        writer.writerow([row["day"].isoformat(), *(row[c] for c in CSV_COLUMNS[1:]), campaign.currency])
    return out.getvalue()


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
