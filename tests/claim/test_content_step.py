"""The claim pages' content step, keyed by platform (``web.claim.views.content_claim``): one view
and one route for every platform that reads people's content, TikTok's keeping its first address
(…/videos/); its words come from the platform (``Platform.content_texts``)."""

import html
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import translation

from campaigns.models import Reward, TriggerEvent, VideoSubmission
from campaigns.platforms import Content, Platform, ProvenIdentity, TokenGrant, platform_get
from campaigns.platforms.base import ContentTexts
from tests.campaigns.factories import funded_campaign
from tests.claim.conftest import tiktok_login

UGC = {"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback"}


class FakegramPlatform(Platform):
    """A second platform that reads content, to show the step is not TikTok's: every visitor is
    logged in as one account with two stories."""

    name = "fakegram"
    label = "Fakegram"
    proof = "oauth"
    content_texts = ContentTexts(**{f: f"fakegram {f}" for f in ContentTexts.__dataclass_fields__})
    STORIES = [
        Content(id="s1", description="my story #joyback", view_count=5),
        Content(id="s2", description="x", view_count=1),
    ]

    def identity_from_session(self, request):
        return ProvenIdentity(
            platform=self.name,
            uid="fg-1",
            name="Giulia Rossi",
            token="fg-token",
            grant=TokenGrant(access_token="fg-token"),
        )

    def content_list(self, *, identity):
        return self.STORIES

    def content_query(self, *, token, ids):
        return [s for s in self.STORIES if s.id in ids] if token == "fg-token" else []

    def content_login_url(self, *, next_url):
        return f"/fakegram/login/?next={next_url}"


DETAILS = {"name": "Giulia Rossi", "email": "giulia@example.com", "iban": "IT60 X054 2811 1010 0000 0123 456"}


def test_the_content_route_of_tiktok_is_the_same_step_as_its_videos_page(
    brand_a, fake_tiktok, sandbox, debtor, django_capture_on_commit_callbacks
):
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="ugc", rules=[UGC])
    client = Client()
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/ugc/content/tiktok/", scope="video.list")
    # given the generic address of TikTok's content step, it lists the person's videos in TikTok's words
    page = client.get("/c/alpha/ugc/content/tiktok/")
    assert page.status_code == 200 and "Your recent TikTok videos" in page.content.decode()
    assert "Choose the video with #joyback in its caption." in page.content.decode()
    mine = next(v for v in page.context["videos"] if v.has_tag("#joyback"))
    # when the person picks theirs
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/c/alpha/ugc/content/tiktok/", {**DETAILS, "consent": "on", "video_id": mine.id})
    # then the submission is TikTok's and its event came from TikTok, as through …/videos/
    submission = VideoSubmission.objects.get()
    assert (submission.platform, submission.status) == ("tiktok", "verified")
    event = TriggerEvent.objects.get()
    assert (event.type, event.source, event.social_provider) == ("ugc_share", "tiktok", "tiktok")
    assert Reward.objects.get().rule.trigger == "ugc_share"


@pytest.mark.parametrize("platform", ["whatsapp", "myspace"])
def test_a_platform_without_a_content_step_is_not_found_and_nothing_is_created(brand_a, platform):
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="ugc", rules=[UGC])
    client = Client()
    assert client.get(f"/c/alpha/ugc/content/{platform}/").status_code == 404
    assert client.post(f"/c/alpha/ugc/content/{platform}/", {**DETAILS, "video_id": "v1"}).status_code == 404
    assert not VideoSubmission.objects.exists() and not TriggerEvent.objects.exists()


def test_the_offer_leads_to_the_platforms_login_then_its_content_step_in_its_words(brand_a):
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="ugc", rules=[UGC])
    page = Client().get("/c/alpha/ugc/").content.decode()
    # the offer posts to TikTok's login with the scope that reads videos, back to …/videos/
    action = html.unescape(page.split('data-testid="tiktok-videos"')[0].rsplit('action="', 1)[1].split('"')[0])
    url = urlsplit(action)
    assert url.path == "/accounts/tiktok/login/"
    assert parse_qs(url.query) == {"process": ["login"], "scope": ["video.list"], "next": ["/c/alpha/ugc/videos/"]}
    assert "Post a TikTok video with #joyback in the caption, then pick it here." in page
    assert "Pick my TikTok video" in page


def test_the_content_words_are_translated():
    texts = platform_get("tiktok").content_texts
    with translation.override("it"):
        assert str(texts.offer_button) != "Pick my TikTok video"
        assert str(texts.pick_hint) != "Choose the video with %(tag)s in its caption." and "%(tag)s" in str(
            texts.pick_hint
        )


def test_another_content_platform_reuses_the_step_with_its_own_words(
    brand_a, settings, django_capture_on_commit_callbacks
):
    settings.PLATFORMS = {"fakegram": "tests.claim.test_content_step.FakegramPlatform"}
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="ugc", rules=[UGC])
    client = Client()
    # given a platform registered by settings, its content step lists its items in its words
    page = client.get("/c/alpha/ugc/content/fakegram/")
    assert page.status_code == 200 and "fakegram pick_legend" in page.content.decode()
    assert [v.id for v in page.context["videos"]] == ["s1", "s2"]
    # when the person picks the story without the hashtag
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post("/c/alpha/ugc/content/fakegram/", {**DETAILS, "consent": "on", "video_id": "s2"})
    # then the job read it through that platform and rejected it, offering another pick there
    submission = VideoSubmission.objects.get()
    assert (submission.platform, submission.status, submission.reason) == (
        "fakegram",
        "rejected",
        "required_code_missing",
    )
    status = client.get(done["Location"]).content.decode()
    assert "fakegram pick_another" in status and 'href="/c/alpha/ugc/content/fakegram/"' in status
    assert not TriggerEvent.objects.exists()
