"""The analytics pages in a real browser, on a phone and a desktop, in English and Italian:
screenshotted, no page wider than the screen, and (with axe-core installed) no serious
accessibility violation."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from campaigns.models import VideoSubmission
from campaigns.services import event_ingest, rewards_mature
from campaigns.services.analytics import SETTLE, campaign_stats_rollup, campaign_visit_count, video_views_record
from tests.browser.test_site import AXE, axe_violations
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign
from tests.portal.conftest import member

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def analytics_brand():
    brand = BrandFactory(name="Alpha Shoes", slug="alpha")
    campaign = funded_campaign(
        brand=brand, amount_minor=100_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )
    for _ in range(12):
        campaign_visit_count(campaign=campaign)
    rewards = [event_ingest(brand=brand, payload=event(email=f"fan{i}@example.com")).reward for i in range(3)]
    rewards_mature(now=timezone.now() + timedelta(seconds=1))
    for n, views in enumerate((12_500, 800)):
        video = VideoSubmission.objects.create(
            campaign=campaign,
            person=rewards[n].person,
            social_uid=f"open-{n}",
            video_id=f"v{n}",
            status="verified",
            view_count=views,
            reason="" if n == 0 else "video_gone",
            share_url=f"https://www.tiktok.com/@fan/video/v{n}",
        )
        video_views_record(video=video, views=views // 2, at=timezone.now() - timedelta(days=1))
        video_views_record(video=video, views=views)
    campaign_stats_rollup(now=timezone.now() + SETTLE + timedelta(seconds=1))
    return brand, campaign, member(brand)


def _signed_in(page, live_server, user):
    """The browser carries the session a test client opened for ``user``."""
    client = Client()
    client.force_login(user)
    page.context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
          "url": live_server.url}]
    )  # fmt: skip


@pytest.mark.parametrize("mobile", [True, False], ids=["phone", "desktop"])
@pytest.mark.parametrize("language", ["en", "it"])
def test_the_analytics_pages_render_on_a_phone_and_a_desktop(
    new_page, shots, live_server, analytics_brand, language, mobile
):
    brand, campaign, user = analytics_brand
    page = new_page(locale="it-IT" if language == "it" else "en-GB", mobile=mobile)
    page.context.add_cookies([{"name": "django_language", "value": language, "url": live_server.url}])
    _signed_in(page, live_server, user)
    viewport = "phone" if mobile else "desktop"
    found = {}
    for name, url in (
        ("campaign", f"/portal/{brand.slug}/campaigns/{campaign.pk}/analytics/"),
        ("brand", f"/portal/{brand.slug}/analytics/"),
    ):
        response = page.goto(url)
        assert response.status == 200
        assert page.locator("html").get_attribute("lang") == language
        assert page.locator("h1").count() == 1
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        shots(page, f"{language}-{viewport}-analytics-{name}")
        if AXE.exists():
            violations = axe_violations(page)
            if violations:
                found[name] = violations
    page.goto(f"/portal/{brand.slug}/campaigns/{campaign.pk}/analytics/")
    assert page.inner_text("[data-testid=funnel-started]") == "3"
    assert page.inner_text("[data-testid=total-views]") == "13300"
    assert found == {}
