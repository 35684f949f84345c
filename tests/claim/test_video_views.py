"""View-threshold rewards: the job verifies the video, then the scheduled poll reads its views
through the Display API (the fake) until it passes the threshold, once."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from campaigns.models import PlatformCredential, Reward, VideoSubmission, VideoViewDay
from campaigns.services.videos import VERIFY_LOST_AFTER, video_views_poll
from tests.campaigns.factories import funded_campaign
from tests.claim.conftest import tiktok_login

pytestmark = pytest.mark.django_db

RULES = [
    {"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback"},
    {"trigger": "view_threshold", "fixed_minor": 1500, "view_threshold": 1000, "required_code": "#joyback"},
]


def test_views_are_polled_until_the_threshold_then_rewarded_once(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="views", rules=RULES)
    settings.FAKE_TIKTOK_VIEWS_PER_MINUTE = 0  # the fake video stays at 120 views
    client = Client()
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/views/videos/", scope="video.list")
    video = next(v for v in client.get("/c/alpha/views/videos/").context["videos"] if v.has_tag("#joyback"))
    form = {"name": "Luca", "email": "luca@example.com", "iban": "DE89370400440532013000", "consent": "on"}
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/c/alpha/views/videos/", {**form, "video_id": video.id})
    submission = VideoSubmission.objects.get()
    assert submission.status == "verified" and not submission.threshold_done and submission.view_count == 120
    assert list(Reward.objects.values_list("rule__trigger", flat=True)) == ["ugc_share"]
    # below the threshold: polling changes nothing
    assert video_views_poll() == 0
    # the video takes off
    settings.FAKE_TIKTOK_VIEWS_PER_MINUTE = 10_000_000
    assert video_views_poll() == 1
    assert video_views_poll() == 0  # done: no second reward, token dropped
    submission.refresh_from_db()
    assert submission.threshold_done and not PlatformCredential.objects.exists()
    assert sorted(Reward.objects.values_list("rule__trigger", flat=True)) == ["ugc_share", "view_threshold"]
    # every reading was kept for the brand's analytics: the day's highest count, the link, the cover
    (day,) = VideoViewDay.objects.filter(video=submission)
    assert day.views == submission.view_count > 1000
    assert submission.share_url.startswith("https://www.tiktok.com/") and submission.cover_url.startswith("https://")


def _submit_losing_the_task(client, fake_tiktok) -> VideoSubmission:
    """A video submitted whose verify task never runs (its on-commit enqueue is not executed)."""
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/views/videos/", scope="video.list")
    video = next(v for v in client.get("/c/alpha/views/videos/").context["videos"] if v.has_tag("#joyback"))
    form = {"name": "Luca", "email": "luca@example.com", "iban": "DE89370400440532013000", "consent": "on"}
    client.post("/c/alpha/views/videos/", {**form, "video_id": video.id})
    return VideoSubmission.objects.get()


def test_a_submission_whose_verify_task_was_lost_is_verified_by_the_poll(brand_a, fake_tiktok, settings):
    # given a submission still pending well after it was made: its task was lost
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="views", rules=RULES)
    settings.FAKE_TIKTOK_VIEWS_PER_MINUTE = 0
    submission = _submit_losing_the_task(Client(), fake_tiktok)
    VideoSubmission.objects.filter(pk=submission.pk).update(
        created_at=timezone.now() - VERIFY_LOST_AFTER - timedelta(minutes=1)
    )
    # when the scheduled poll runs
    video_views_poll()
    # then the video is verified and its share rewarded, once
    submission.refresh_from_db()
    assert submission.status == "verified"
    video_views_poll()
    assert list(Reward.objects.values_list("rule__trigger", flat=True)) == ["ugc_share"]


def test_a_fresh_pending_submission_is_left_to_its_task(brand_a, fake_tiktok, settings):
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="views", rules=RULES)
    submission = _submit_losing_the_task(Client(), fake_tiktok)
    video_views_poll()
    submission.refresh_from_db()
    assert submission.status == "pending" and submission.checked_at is None
    assert not Reward.objects.exists()
