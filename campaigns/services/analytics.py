"""Writes of the daily figures that say what a campaign's money bought (``campaigns.models.analytics``).

Ingestion writes none of them: a per-campaign row touched by every event would serialise a busy
campaign's ingestion on one lock, the very problem the tallies had. Instead:

* ``campaign_stats_rollup`` (a tick) follows two watermarks, the last trigger event and the last
  reward event in the figures. A new event marks its campaign's day changed (and widens the day's
  id range); a reward event (approved, matured, paid, voided, clawed back, expired, reduced) marks
  the day its trigger event was received. Each changed day is then recomputed whole from its
  events and their rewards and upserted by (campaign, day, trigger): running it twice, or after a
  crash between the two, writes the same rows. The rows and the watermarks move in one transaction.
* ``campaign_visit_count``: one upsert per claim page visit on the (campaign, day) row, in its own
  autocommit statement (no cookie, nothing about the visitor). A visit costs one short row lock; at
  claim-page rates (a person reads a page, then acts) that is far from ingestion's thousands per
  second, so no batching layer is kept for it.
* ``video_views_record``: the views poll's reading, kept as the day's highest count per video.
"""

import logging
import time as clock
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, Sum, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from campaigns.models import (
    Campaign,
    CampaignDay,
    CampaignDayTrigger,
    EventOutcome,
    RewardEvent,
    RewardStatus,
    StatsCursor,
    TriggerEvent,
    VideoSubmission,
    VideoViewDay,
)

logger = logging.getLogger(__name__)

# Sequences hand out ids at insert, not at commit: an event of a transaction still open may carry
# a lower id than one already committed. The roll-up reads only rows older than this, longer than
# any ingesting transaction may run (tasks stop at Q_TIMEOUT, 60 s), so no id is skipped.
SETTLE = timedelta(minutes=2)
CHUNK = 50_000  # ids per step: a step recomputes each changed day once, so fewer, larger steps
BUDGET_SECONDS = 20
EVENTS_CURSOR = "trigger_events"
REWARD_EVENTS_CURSOR = "reward_events"

VERIFIED_STATUSES = (RewardStatus.PAYABLE, RewardStatus.PAID, RewardStatus.EXPIRED)
UNDONE_STATUSES = (RewardStatus.VOIDED, RewardStatus.CLAWED_BACK)
RESERVED_STATUSES = (RewardStatus.REVIEW, RewardStatus.HELD)
COMMITTED_STATUSES = (RewardStatus.PAYABLE, RewardStatus.PAID)


def campaign_day_of(campaign: Campaign, at: datetime) -> date:
    """The campaign's calendar day of ``at`` (its own time zone, as its caps count days)."""
    return at.astimezone(campaign.tz).date()


def _increment_or_create(model, *, keys: dict, update: dict, create: dict) -> None:
    """One UPDATE in the common case; the first writer of the day inserts, and a racing second
    insert falls back to the UPDATE."""
    if model.objects.filter(**keys).update(**update):
        return
    try:
        with transaction.atomic():
            model.objects.create(**keys, **create)
    except IntegrityError:
        model.objects.filter(**keys).update(**update)


def campaign_visit_count(*, campaign: Campaign, at: datetime | None = None) -> None:
    """Count one view of the campaign's claim page on its day. Stores nothing about the visitor.
    Runs in the caller's transaction (none on a claim page: one statement, committed at once)."""
    day = campaign_day_of(campaign, at or timezone.now())
    _increment_or_create(
        CampaignDay, keys={"campaign": campaign, "day": day}, update={"visits": F("visits") + 1}, create={"visits": 1}
    )


def video_views_record(*, video: VideoSubmission, views: int, at: datetime | None = None) -> None:
    """Keep ``views`` as the video's count for the day if it is the highest read that day. Safe to
    repeat and in any order. ``video.campaign`` gives the day's time zone."""
    day = campaign_day_of(video.campaign, at or timezone.now())
    _increment_or_create(
        VideoViewDay,
        keys={"video": video, "day": day},
        update={"views": Greatest(F("views"), Value(views))},
        create={"views": views},
    )


@dataclass(frozen=True)
class RollupResult:
    events: int  # trigger events newly taken in
    reward_events: int  # reward events newly taken in
    days: int  # (campaign, day) pairs recomputed


def _day_bounds(day: date, tz) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time.min, tzinfo=tz)
    return start, datetime.combine(day + timedelta(days=1), time.min, tzinfo=tz)


def campaign_day_recompute(*, campaign: Campaign, day: CampaignDay) -> int:
    """Recompute ``day``'s rows of ``campaign`` from its trigger events and their rewards, and
    replace them (upsert by trigger; a trigger with no event left that day loses its row). Reads
    only the day's id range (by the primary key or the (campaign, outcome, id) index, as the planner
    likes), never the campaign's whole history. Returns the rows written. Runs in the caller's
    transaction."""
    if day.first_event_id is None:
        return 0
    start, end = _day_bounds(day.day, campaign.tz)
    money = F("reward__amount_minor") + F("reward__fee_minor")
    figures = (
        TriggerEvent.objects.filter(
            campaign_id=campaign.pk,
            outcome__in=EventOutcome.values,  # lets (campaign, outcome, id) be walked per outcome
            id__gte=day.first_event_id,
            id__lte=day.last_event_id,
            received_at__gte=start,
            received_at__lt=end,
        )
        .values("type")
        .annotate(
            n_events=Count("id"),
            n_accepted=Count("reward"),
            n_verified=Count("reward", filter=Q(reward__status__in=VERIFIED_STATUSES)),
            n_paid=Count("reward", filter=Q(reward__status=RewardStatus.PAID)),
            n_undone=Count("reward", filter=Q(reward__status__in=UNDONE_STATUSES)),
            committed=Coalesce(Sum(money, filter=Q(reward__status__in=COMMITTED_STATUSES)), 0),
            expired_fees=Coalesce(Sum("reward__fee_minor", filter=Q(reward__status=RewardStatus.EXPIRED)), 0),
            reserved=Coalesce(Sum(money, filter=Q(reward__status__in=RESERVED_STATUSES)), 0),
        )
        .order_by("type")
    )
    rows = [
        CampaignDayTrigger(
            campaign_id=campaign.pk,
            day=day.day,
            trigger=f["type"],
            events=f["n_events"],
            accepted=f["n_accepted"],
            verified=f["n_verified"],
            paid=f["n_paid"],
            undone=f["n_undone"],
            spent_minor=f["committed"] + f["expired_fees"],
            reserved_minor=f["reserved"],
        )
        for f in figures
    ]
    CampaignDayTrigger.objects.filter(campaign_id=campaign.pk, day=day.day).exclude(
        trigger__in=[r.trigger for r in rows]
    ).delete()
    CampaignDayTrigger.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["campaign", "day", "trigger"],
        update_fields=["events", "accepted", "verified", "paid", "undone", "spent_minor", "reserved_minor"],
    )
    return len(rows)


def _settled(rows: list[tuple], horizon: datetime) -> list[tuple]:
    """The leading rows (id order) older than ``horizon``: the first newer one stops the read, so
    the watermark never passes an id whose neighbours may still be uncommitted."""
    taken = []
    for row in rows:
        if row[1] >= horizon:
            break
        taken.append(row)
    return taken


def _rollup_step(*, chunk: int, horizon: datetime) -> RollupResult:
    with transaction.atomic(durable=True):
        cursors = {c.name: c for c in StatsCursor.objects.select_for_update().order_by("name")}
        events_cursor, rewards_cursor = cursors[EVENTS_CURSOR], cursors[REWARD_EVENTS_CURSOR]
        events = _settled(
            list(
                TriggerEvent.objects.filter(id__gt=events_cursor.last_id)
                .order_by("id")
                .values_list("id", "received_at", "campaign_id")[:chunk]
            ),
            horizon,
        )
        changes = _settled(
            list(
                RewardEvent.objects.filter(id__gt=rewards_cursor.last_id)
                .order_by("id")
                .values_list("id", "created_at", "reward__campaign_id", "reward__event__received_at")[:chunk]
            ),
            horizon,
        )
        if not events and not changes:
            return RollupResult(events=0, reward_events=0, days=0)
        campaign_ids = {e[2] for e in events} | {c[2] for c in changes}
        campaigns = {c.pk: c for c in Campaign.objects.filter(pk__in=campaign_ids).only("id", "timezone")}

        ranges: dict[tuple[int, date], list[int]] = {}
        for event_id, received_at, campaign_id in events:
            key = (campaign_id, campaign_day_of(campaigns[campaign_id], received_at))
            low_high = ranges.setdefault(key, [event_id, event_id])
            low_high[0], low_high[1] = min(low_high[0], event_id), max(low_high[1], event_id)
        dirty = set(ranges) | {(cid, campaign_day_of(campaigns[cid], received)) for _, _, cid, received in changes}

        days = _days_widen(dirty=dirty, ranges=ranges)
        for campaign_id, day in sorted(dirty):
            campaign_day_recompute(campaign=campaigns[campaign_id], day=days[(campaign_id, day)])

        if events:
            events_cursor.last_id = events[-1][0]
            events_cursor.save(update_fields=["last_id", "updated_at"])
        if changes:
            rewards_cursor.last_id = changes[-1][0]
            rewards_cursor.save(update_fields=["last_id", "updated_at"])
        return RollupResult(events=len(events), reward_events=len(changes), days=len(dirty))


def _days_widen(*, dirty: set[tuple[int, date]], ranges: dict[tuple[int, date], list[int]]) -> dict:
    """The ``CampaignDay`` rows of ``dirty``, their id ranges widened by ``ranges``; written only
    where a range changed (visits are never written here: the claim page counts them)."""
    by_campaign: dict[int, set[date]] = {}
    for campaign_id, day in dirty:
        by_campaign.setdefault(campaign_id, set()).add(day)
    wanted = Q()
    for campaign_id, day_set in by_campaign.items():
        wanted |= Q(campaign_id=campaign_id, day__in=sorted(day_set))
    days = {(d.campaign_id, d.day): d for d in CampaignDay.objects.filter(wanted)}
    changed = []
    for key, (low, high) in ranges.items():
        row = days.setdefault(key, CampaignDay(campaign_id=key[0], day=key[1]))
        new_low = low if row.first_event_id is None else min(row.first_event_id, low)
        new_high = high if row.last_event_id is None else max(row.last_event_id, high)
        if (new_low, new_high) != (row.first_event_id, row.last_event_id):
            row.first_event_id, row.last_event_id = new_low, new_high
            changed.append(row)
    CampaignDay.objects.bulk_create(
        sorted(changed, key=lambda r: (r.campaign_id, r.day)),
        update_conflicts=True,
        unique_fields=["campaign", "day"],
        update_fields=["first_event_id", "last_event_id"],
    )
    for key in dirty:
        days.setdefault(key, CampaignDay(campaign_id=key[0], day=key[1]))
    return days


def campaign_stats_rollup(
    *, now: datetime | None = None, chunk: int = CHUNK, budget_seconds: float = BUDGET_SECONDS
) -> RollupResult:
    """Bring the daily figures up to date with every trigger and reward event older than
    ``SETTLE``, ``chunk`` of each per transaction, until nothing is left or ``budget_seconds``
    have passed (the next tick goes on). Idempotent: a changed day is recomputed, not added to.
    Each step is one durable transaction holding the watermarks' row locks, so two runs take turns."""
    for name in (EVENTS_CURSOR, REWARD_EVENTS_CURSOR):
        StatsCursor.objects.get_or_create(name=name)
    horizon = (now or timezone.now()) - SETTLE
    deadline = clock.monotonic() + budget_seconds
    events = reward_events = days = 0
    while True:
        step = _rollup_step(chunk=chunk, horizon=horizon)
        events, reward_events, days = events + step.events, reward_events + step.reward_events, days + step.days
        caught_up = step.events < chunk and step.reward_events < chunk
        if caught_up or clock.monotonic() > deadline:
            break
    if caught_up:  # the pages' "as of": when the figures last caught up, new events or not
        StatsCursor.objects.filter(name=EVENTS_CURSOR).update(updated_at=timezone.now())
    return RollupResult(events=events, reward_events=reward_events, days=days)
