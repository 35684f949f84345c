"""What the money bought: the roll-up of daily figures (watermarked, idempotent, off the ingestion
path), claim page visits, video views over time, and the numbers the stats selectors give."""

import hashlib
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from moneyed import Money

from campaigns.analytics import brand_stats, campaign_daily_rows, campaign_stats, handle_visible
from campaigns.models import CampaignDay, CampaignDayTrigger, StatsCursor, VideoSubmission, VideoViewDay
from campaigns.selectors import campaign_budget
from campaigns.services import event_ingest, reward_claw_back, reward_mark_paid, rewards_mature
from campaigns.services.analytics import (
    SETTLE,
    campaign_day_of,
    campaign_stats_rollup,
    campaign_visit_count,
    video_views_record,
)
from recipients.services.consent import consent_give, consent_withdraw
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign

pytestmark = pytest.mark.django_db

LOGIN = {
    "trigger": "tiktok_login",
    "fixed_minor": 500,
    "verification": "partner_attested",
    "person_count_per_campaign": 1,
}
SHARE = {
    "trigger": "ugc_share",
    "fixed_minor": 300,
    "verification": "partner_attested",
    "approval_policy": "always_review",
}


def rollup(**kwargs):
    """The roll-up as the tick runs it, its clock past the settle time of everything written."""
    return campaign_stats_rollup(now=timezone.now() + SETTLE + timedelta(seconds=1), **kwargs)


def figures(campaign) -> list[tuple]:
    return list(
        CampaignDayTrigger.objects.filter(campaign=campaign)
        .order_by("day", "trigger")
        .values_list(
            "day", "trigger", "events", "accepted", "verified", "paid", "undone", "spent_minor", "reserved_minor"
        )
    )


@pytest.fixture
def shop(db):
    """Joy Shoes pays a 10 cent fee per reward."""
    return BrandFactory(name="Joy Shoes", slug="joy-shoes", fee_fixed_minor=10)


@pytest.fixture
def campaign(shop):
    return funded_campaign(brand=shop, amount_minor=100_000, rules=[LOGIN, SHARE], timezone="Europe/Rome")


def login(shop, email: str):
    return event_ingest(brand=shop, payload=event(type="tiktok_login", source="api", email=email))


@pytest.fixture
def activity(shop, campaign):
    """Hand-made: 10 claim page visits; 4 people log in (one twice: rejected by the cap), one
    shares a video (in review); the logins mature, two are paid, one is clawed back. Two videos:
    one live (1,000 views yesterday, 3,000 today), one removed (500 views today)."""
    for _ in range(10):
        campaign_visit_count(campaign=campaign)
    rewards = [login(shop, f"fan{i}@example.com").reward for i in range(4)]
    assert login(shop, "fan0@example.com").reward is None  # the cap rejects the second login
    event_ingest(brand=shop, payload=event(type="ugc_share", source="api", email="maker@example.com"))
    rewards_mature(now=timezone.now() + timedelta(seconds=1))
    reward_mark_paid(reward_ids=[rewards[0].pk, rewards[1].pk], payout_ref="payout:1")
    rewards[3].refresh_from_db()
    reward_claw_back(reward=rewards[3], reason="fraud")
    person = rewards[0].person
    live = VideoSubmission.objects.create(
        campaign=campaign,
        person=person,
        social_uid="u1",
        video_id="v1",
        status="verified",
        view_count=3000,
        share_url="https://www.tiktok.com/@maker/video/v1",
        cover_url="https://p16.tiktokcdn.example/v1.jpeg",
    )
    gone = VideoSubmission.objects.create(
        campaign=campaign,
        person=person,
        social_uid="u1",
        video_id="v2",
        status="verified",
        view_count=500,
        reason="video_gone",
        share_url="javascript:alert(1)",
    )
    now = timezone.now()
    video_views_record(video=live, views=1000, at=now - timedelta(days=1))
    video_views_record(video=live, views=3000, at=now)
    video_views_record(video=gone, views=500, at=now)
    return rewards


def test_the_rollup_gives_the_hand_counted_figures(campaign, activity):
    # when the roll-up runs
    rollup()
    # then the day's rows hold what happened, per trigger
    today = campaign_day_of(campaign, timezone.now())
    assert figures(campaign) == [
        # day, trigger, started, accepted, verified, paid, undone, spent, reserved
        (today, "tiktok_login", 5, 4, 3, 2, 1, 3 * 510, 0),
        (today, "ugc_share", 1, 1, 0, 0, 0, 0, 310),
    ]
    # and the stats read them: the funnel, costs in exact Money, views over time, the videos
    stats = campaign_stats(campaign=campaign)
    assert (stats.funnel.visits, stats.funnel.started, stats.funnel.verified, stats.funnel.paid) == (10, 6, 3, 2)
    assert stats.spent_minor == 1530 and stats.reserved_minor == 310
    # the two ways to count spend agree: the books (whose "spent" counts what is reserved) and the roll-up
    assert campaign_budget(campaign=campaign).spent_minor == stats.spent_minor + stats.reserved_minor
    assert stats.total_views == 3500
    assert stats.cost_per_action == Money(Decimal("5.10"), "EUR")
    assert stats.cost_per_view == Money(Decimal("0.004371"), "EUR")  # 15.30 / 3,500
    assert stats.cost_per_mille == Money(Decimal("4.37"), "EUR")
    assert stats.by_trigger[0].cost_per_action == Money(Decimal("5.10"), "EUR")
    assert stats.by_trigger[1].cost_per_action is None  # nothing verified yet
    assert stats.views_per_day[-2:] == [1000, 3500] and stats.started_per_day[-1] == 6
    assert stats.visits_per_day[-1] == 10 and stats.spent_per_day_minor[-1] == 1530
    assert [(v.video_id, v.views, v.live) for v in stats.videos] == [("v1", 3000, True), ("v2", 500, False)]
    assert stats.videos[0].share_url.startswith("https://") and stats.videos[1].share_url == ""  # never a script
    assert stats.videos_total == 2 and stats.videos_live == 1
    # no author is shown without their marketing consent
    assert all(v.handle is None for v in stats.videos)
    assert handle_visible(activity[0].person, campaign.brand) is False


def test_the_author_handle_shows_only_with_marketing_consent_to_the_brand(campaign, activity):
    # given the maker consents to Joy Shoes' marketing
    person = activity[0].person
    text = "News from Joy Shoes by e-mail."
    consent_give(
        person=person,
        brand=campaign.brand,
        text=text,
        version=hashlib.sha256(text.encode()).hexdigest(),
        language="en",
        channel="claim_page",
    )
    # then the handle the platform's link names shows (v2, removed, has no usable link)
    assert handle_visible(person, campaign.brand) is True
    assert [v.handle for v in campaign_stats(campaign=campaign).videos] == ["@maker", None]
    # and once withdrawn it is gone again
    consent_withdraw(person=person, brand=campaign.brand, channel="link")
    assert [v.handle for v in campaign_stats(campaign=campaign).videos] == [None, None]


def test_the_rollup_is_idempotent_and_recomputes_rather_than_adds(campaign, activity):
    rollup()
    first = figures(campaign)
    # running again changes nothing
    assert rollup().days == 0 and figures(campaign) == first
    # forgetting the watermarks and running again writes the same rows, not twice the numbers
    StatsCursor.objects.update(last_id=0)
    rollup()
    assert figures(campaign) == first


def test_a_later_reward_change_updates_the_day_it_belongs_to(shop, campaign):
    reward = login(shop, "late@example.com").reward
    rollup()
    assert figures(campaign)[0][2:7] == (1, 1, 0, 0, 0)
    # when the reward matures and is paid, days later
    rewards_mature(now=timezone.now() + timedelta(seconds=1))
    reward_mark_paid(reward_ids=[reward.pk], payout_ref="payout:9")
    result = rollup()
    # then its (earlier) day is recomputed through the reward events' watermark
    assert result.events == 0 and result.reward_events == 2 and result.days == 1
    assert figures(campaign)[0][2:8] == (1, 1, 1, 1, 0, 510)


def test_events_younger_than_the_settle_time_wait_for_the_next_run(shop, campaign):
    login(shop, "now@example.com")
    # a run whose clock is now leaves the fresh event (its neighbours' ids may still be uncommitted)
    assert campaign_stats_rollup().events == 0
    assert StatsCursor.objects.get(name="trigger_events").last_id == 0 and not figures(campaign)
    assert rollup().events == 1


def test_the_rollup_stops_at_its_chunk_and_goes_on_next_run(shop, campaign):
    for i in range(3):
        login(shop, f"c{i}@example.com")
    # a budget of zero takes one chunk per run
    assert rollup(chunk=2, budget_seconds=0).events == 2
    assert rollup(chunk=2, budget_seconds=0).events == 1
    assert figures(campaign)[0][2] == 3


def test_visits_and_views_are_counted_on_the_campaigns_own_day(shop, campaign):
    # 23:30 UTC on 1 March is already 2 March in Rome
    late = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)
    campaign_visit_count(campaign=campaign, at=late)
    campaign_visit_count(campaign=campaign, at=late)
    assert list(CampaignDay.objects.filter(campaign=campaign).values_list("day", "visits")) == [(date(2026, 3, 2), 2)]
    video = VideoSubmission.objects.create(
        campaign=campaign, person=login(shop, "v@example.com").reward.person, social_uid="u", video_id="x"
    )
    # readings in any order keep the day's highest
    video_views_record(video=video, views=700, at=late)
    video_views_record(video=video, views=400, at=late)
    assert list(VideoViewDay.objects.values_list("day", "views")) == [(date(2026, 3, 2), 700)]


def test_the_csv_rows_cover_every_day_with_figures(campaign, activity):
    rollup()
    rows = campaign_daily_rows(campaign=campaign)
    today = campaign_day_of(campaign, timezone.now())
    assert [r["day"] for r in rows] == [today - timedelta(days=1), today]
    assert rows[0]["views"] == 1000 and rows[0]["started"] == 0
    assert rows[1] | {} == {
        "day": today,
        "visits": 10,
        "started": 6,
        "accepted": 5,
        "verified": 3,
        "paid": 2,
        "undone": 1,
        "spent_minor": 1530,
        "reserved_minor": 310,
        "views": 3500,
    }


def test_brand_stats_sum_per_currency_and_show_only_the_brands_campaigns(shop, campaign, activity):
    other = BrandFactory(name="Rival", slug="rival")
    rival_campaign = funded_campaign(brand=other, amount_minor=10_000, rules=[LOGIN])
    event_ingest(brand=other, payload=event(type="tiktok_login", source="api", email="x@example.com"))
    campaign_visit_count(campaign=rival_campaign)
    rollup()
    stats = brand_stats(brand=shop)
    assert [s.campaign.pk for s in stats.campaigns] == [campaign.pk]
    (eur,) = stats.totals
    assert (eur.visits, eur.started, eur.verified, eur.paid, eur.spent_minor, eur.views) == (10, 6, 3, 2, 1530, 3500)
    assert eur.cost_per_mille == Money(Decimal("4.37"), "EUR")
    # the rival's own figures are its own
    (rival_eur,) = brand_stats(brand=other).totals
    assert (rival_eur.visits, rival_eur.started) == (1, 1)
