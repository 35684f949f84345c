"""GET /api/v1/campaigns/{id}/stats/ (JSON) and its CSV: the brand's own campaign only, the read
scope, exact money as decimal strings."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from campaigns.api_keys import api_key_create
from campaigns.models import Reward, VideoSubmission
from campaigns.services import rewards_mature
from campaigns.services.analytics import SETTLE, campaign_stats_rollup, campaign_visit_count
from tests.api.conftest import assert_problem, client_for, ingest

pytestmark = pytest.mark.django_db


@pytest.fixture
def figures(campaign):
    """Three logins (one each), four claim page visits, rolled up."""
    for _ in range(4):
        campaign_visit_count(campaign=campaign)
    for _ in range(3):
        ingest(campaign)
    campaign_stats_rollup(now=timezone.now() + SETTLE + timedelta(seconds=1))


def test_the_stats_answer_the_funnel_costs_and_days(api, campaign, figures):
    response = api.get(f"/api/v1/campaigns/{campaign.pk}/stats/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["campaign_id"] == campaign.pk and body["currency"] == "EUR"
    assert body["funnel"] == {"visits": 4, "started": 3, "verified": 0, "paid": 0}
    assert body["reserved_minor"] == 1500 and body["spent_minor"] == 0
    assert body["cost_per_action"] is None and body["cost_per_view"] is None and body["total_views"] == 0
    (login,) = body["by_trigger"]
    assert (login["trigger"], login["started"], login["accepted"]) == ("tiktok_login", 3, 3)
    assert len(body["days"]) == 30 and body["days"][-1]["visits"] == 4 and body["days"][-1]["started"] == 3
    assert body["videos"] == [] and body["as_of"] is not None


def test_costs_are_decimal_strings_never_floats(api, campaign, figures):
    rewards_mature(now=timezone.now() + timedelta(seconds=1))
    assert Reward.objects.filter(campaign=campaign, status="payable").count() == 3
    campaign_stats_rollup(now=timezone.now() + SETTLE + timedelta(seconds=1))
    body = api.get(f"/api/v1/campaigns/{campaign.pk}/stats/").json()
    assert body["cost_per_action"] == {"amount": "5.00", "currency": "EUR"}
    assert body["by_trigger"][0]["cost_per_action"] == {"amount": "5.00", "currency": "EUR"}


@pytest.mark.parametrize("suffix", ["stats/?format=csv", "stats.csv"])
def test_the_csv_has_a_line_per_day(api, campaign, figures, suffix):
    response = api.get(f"/api/v1/campaigns/{campaign.pk}/{suffix}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 1
    assert {k: rows[0][k] for k in ("visits", "started", "accepted", "reserved_minor", "currency")} == {
        "visits": "4",
        "started": "3",
        "accepted": "3",
        "reserved_minor": "1500",
        "currency": "EUR",
    }


@pytest.mark.parametrize("suffix", ["stats/", "stats/?format=csv", "stats.csv"])
def test_another_brands_campaign_is_not_found(rival_api, campaign, figures, suffix):
    assert_problem(rival_api.get(f"/api/v1/campaigns/{campaign.pk}/{suffix}"), 404, "not_found")


def test_the_read_scope_is_enough_and_needed(brand, campaign, figures):
    reader = client_for(api_key_create(brand=brand, name="bi", scopes=["read"]).token)
    assert reader.get(f"/api/v1/campaigns/{campaign.pk}/stats/").status_code == 200
    sender = client_for(api_key_create(brand=brand, name="shop", scopes=["events"]).token)
    assert_problem(sender.get(f"/api/v1/campaigns/{campaign.pk}/stats/"), 403, "insufficient_scope")


def test_the_schema_documents_the_stats(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/campaigns/{id}/stats/"]["get"]
    assert operation["operationId"] == "campaigns_stats"
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/csv"}


def test_videos_come_with_link_cover_views_and_no_author(api, campaign, figures):
    person = Reward.objects.filter(campaign=campaign).first().person
    VideoSubmission.objects.create(
        campaign=campaign, person=person, social_uid="open-1", video_id="v1", status="verified", view_count=4200,
        share_url="https://www.tiktok.com/@fan/video/v1", cover_url="https://p16.tiktokcdn.example/v1.jpeg",
    )  # fmt: skip
    body = api.get(f"/api/v1/campaigns/{campaign.pk}/stats/").json()
    (video,) = body["videos"]
    assert {k: video[k] for k in ("platform", "platform_label", "video_id", "views", "live", "handle")} == {
        "platform": "tiktok",
        "platform_label": "TikTok",
        "video_id": "v1",
        "views": 4200,
        "live": True,
        "handle": None,
    }
    assert video["share_url"].endswith("/video/v1") and video["cover_url"].endswith("v1.jpeg")
    assert body["total_views"] == 4200 and body["videos_live"] == 1
