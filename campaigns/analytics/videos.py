"""The UGC videos of a campaign as its brand may see them, and their views over time."""

import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime

from django.db.models import Max, Q
from django.db.models.functions import Coalesce

from campaigns.models import Brand, Campaign, VideoStatus, VideoSubmission, VideoViewDay
from campaigns.platforms import platform_get
from core.exceptions import InvalidInput
from recipients.models import MarketingConsent, Person
from recipients.models_consent import ACTIVE

VIDEOS_SHOWN = 100
REMOVED_REASON = "video_gone"
# TikTok's share links name the author's account: https://www.tiktok.com/@handle/video/123.
HANDLE_IN_LINK = re.compile(r"/@([A-Za-z0-9._]{1,64})(?:/|$)")


def handles_visible(*, people: list[Person], brand: Brand) -> set[int]:
    """Ids among ``people`` whose videos ``brand`` may show with their author: those with an
    active marketing consent to ``brand`` on their human (the root or any row merged into it) and
    not erased. One query for the lot."""
    roots = {p.pk: p.merged_into_id or p.pk for p in people if p.erased_at is None}
    if not roots:
        return set()
    consenting = MarketingConsent.objects.filter(ACTIVE, brand=brand, person__erased_at__isnull=True).filter(
        Q(person_id__in=set(roots.values())) | Q(person__merged_into_id__in=set(roots.values()))
    )
    consenting_roots = set(consenting.values_list(Coalesce("person__merged_into_id", "person_id"), flat=True))
    return {person_id for person_id, root in roots.items() if root in consenting_roots}


def handle_visible(person: Person, brand: Brand) -> bool:
    """Whether ``brand`` may see who made ``person``'s videos: the author's handle is the
    person's data, shown only to a brand they gave marketing consent to (a batch of one of
    ``handles_visible``)."""
    return person.pk in handles_visible(people=[person], brand=brand)


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


def views_per_day(*, campaign: Campaign, days: list[date]) -> list[int]:
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
    visible = handles_visible(people=[v.person for v in rows], brand=brand)
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
            handle=_handle(v.share_url) if v.person_id in visible else None,
            submitted_at=v.created_at,
            checked_at=v.checked_at,
        )
        for v in rows
    ]
