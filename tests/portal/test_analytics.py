"""The portal's analytics: a campaign's page (funnel, costs, videos, charts, CSV) and the brand's
overview, in English and Italian, for every member of the brand and nobody else."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from campaigns.models import CampaignDay, VideoSubmission
from campaigns.services import event_ingest, rewards_mature
from campaigns.services.analytics import SETTLE, campaign_stats_rollup, campaign_visit_count, video_views_record
from tests.campaigns.conftest import event
from tests.portal.test_portal_italian import assert_italian

pytestmark = pytest.mark.django_db


@pytest.fixture
def activity(brand_a, campaign_a):
    """Brand A: 8 visits, two logins made payable, a shared video with 2,000 views; rolled up."""
    for _ in range(8):
        campaign_visit_count(campaign=campaign_a)
    rewards = [event_ingest(brand=brand_a, payload=event(email=f"fan{i}@example.com")).reward for i in range(2)]
    rewards_mature(now=timezone.now() + timedelta(seconds=1))
    video = VideoSubmission.objects.create(
        campaign=campaign_a,
        person=rewards[0].person,
        social_uid="open-1",
        video_id="v1",
        status="verified",
        view_count=2000,
        share_url="https://www.tiktok.com/@fan/video/v1",
        cover_url="https://p16.tiktokcdn.example/v1.jpeg",
    )
    video_views_record(video=video, views=2000)
    campaign_stats_rollup(now=timezone.now() + SETTLE + timedelta(seconds=1))
    return rewards


def client_for(user, language: str = "en") -> Client:
    client = Client()
    client.force_login(user)
    client.cookies["django_language"] = language
    return client


def test_the_campaign_page_shows_funnel_costs_and_videos(analyst_a, campaign_a, activity):
    page = client_for(analyst_a).get(f"/portal/alpha/campaigns/{campaign_a.pk}/analytics/")
    assert page.status_code == 200
    html = page.content.decode()
    for key, value in (("visits", 8), ("started", 2), ("verified", 2), ("paid", 0)):
        assert f'data-testid="funnel-{key}">{value}<' in html
    assert 'data-testid="total-views">2000<' in html
    assert 'data-testid="cpa">€5.00<' in html  # 10.00 spent over two verified logins
    assert 'data-testid="cpv">€0.005<' in html and 'data-testid="cpm">€5.00<' in html
    assert (
        'href="https://www.tiktok.com/@fan/video/v1"' in html and 'src="https://p16.tiktokcdn.example/v1.jpeg"' in html
    )
    assert "Author shown only with their marketing consent" in html
    assert html.count('<svg class="chart"') == 5 and "The same figures as a table" in html


def test_the_campaign_page_in_italian(owner_a, campaign_a, activity):
    assert_italian(
        client_for(owner_a, "it").get(f"/portal/alpha/campaigns/{campaign_a.pk}/analytics/"),
        english=["Analytics", "Funnel step", "Claim page visits", "Cost per view", "Watch on", "views"],
        italian=["Statistiche", "Visite alla pagina del premio", "Costo per visualizzazione", "Guarda su", "5,00"],
    )


def test_the_brand_overview_in_english_and_italian(owner_a, campaign_a, campaign_b, activity):
    page = client_for(owner_a).get("/portal/alpha/analytics/")
    html = page.content.decode()
    assert page.status_code == 200 and "All campaigns (EUR)" in html and campaign_a.name in html
    assert f"/campaigns/{campaign_b.pk}/" not in html  # brand B's campaign is not listed
    assert_italian(
        client_for(owner_a, "it").get("/portal/alpha/analytics/"),
        english=["All campaigns", "Actions started", "Cost per verified action"],
        italian=["Tutte le campagne (EUR)", "Azioni avviate", "Costo per azione verificata"],
    )


def test_the_csv_download(owner_a, campaign_a, activity):
    response = client_for(owner_a).get(f"/portal/alpha/campaigns/{campaign_a.pk}/analytics.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    header, today = response.content.decode().splitlines()
    assert header.startswith("day,visits,started") and ",8,2,2,2,0,0,1000,0,2000,EUR" in today


def test_another_brands_analytics_are_not_found(owner_b, campaign_a, activity):
    client = client_for(owner_b)
    for url in (
        f"/portal/alpha/campaigns/{campaign_a.pk}/analytics/",
        f"/portal/alpha/campaigns/{campaign_a.pk}/analytics.csv",
        "/portal/alpha/analytics/",
        f"/portal/beta/campaigns/{campaign_a.pk}/analytics/",
    ):
        assert client.get(url).status_code == 404, url


def test_a_claim_page_visit_counts_once_and_sets_no_cookie(brand_a, campaign_a):
    response = Client().get(f"/c/alpha/{campaign_a.slug}/")
    assert response.status_code == 200
    assert list(CampaignDay.objects.filter(campaign=campaign_a).values_list("visits", flat=True)) == [1]
    assert "sessionid" not in response.cookies
