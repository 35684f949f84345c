"""One campaign's figures: the funnel, costs per action by trigger, views and daily series,
and its CSV (one line per day)."""

import csv
import io
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db.models import Count, Q, Sum
from django.utils import timezone

from campaigns.analytics.costs import cost_per_action, cost_per_mille, cost_per_view
from campaigns.analytics.videos import REMOVED_REASON, VideoStats, campaign_videos, views_per_day
from campaigns.models import (
    Campaign,
    CampaignDay,
    CampaignDayTrigger,
    StatsCursor,
    Trigger,
    VideoStatus,
    VideoSubmission,
    VideoViewDay,
)
from campaigns.services.analytics import EVENTS_CURSOR

CHART_DAYS = 30


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

    def daily(self) -> list[tuple[date, int, int, int, int, int]]:
        """(day, visits, started, verified, spent minor units, views by the day's end), oldest first."""
        return list(
            zip(
                self.days,
                self.visits_per_day,
                self.started_per_day,
                self.verified_per_day,
                self.spent_per_day_minor,
                self.views_per_day,
                strict=True,
            )
        )


def stats_as_of() -> datetime | None:
    """When the roll-up last caught up: events up to ``SETTLE`` before it are in the figures."""
    return StatsCursor.objects.filter(name=EVENTS_CURSOR).values_list("updated_at", flat=True).first()


def _window(campaign: Campaign, today: date | None, days: int) -> list[date]:
    today = today or timezone.now().astimezone(campaign.tz).date()
    return [today - timedelta(days=days - 1 - i) for i in range(days)]


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
        views_per_day=views_per_day(campaign=campaign, days=window),
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
    views = dict(zip(span, views_per_day(campaign=campaign, days=span), strict=True))
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
