"""A campaign with 100,000 actions: the roll-up takes them in, and the stats (selector, partner API,
portal page) read a bounded number of queries of pre-aggregated rows, whatever the volume."""

from datetime import UTC, datetime, time, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from campaigns.analytics import brand_stats, campaign_stats
from campaigns.api_keys import api_key_create
from campaigns.models import CampaignDayTrigger, RewardRule, TriggerEvent
from campaigns.services.analytics import campaign_stats_rollup, campaign_visit_count
from tests.api.conftest import client_for
from tests.campaigns.factories import BrandFactory, funded_campaign
from tests.portal.conftest import member

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

ACTIONS = 100_000
SPACING_SECONDS = 25  # 100,000 actions over 29 days


def events_insert(*, campaign, count: int, start) -> None:
    """``count`` tiktok_login events of ``campaign``, one every ``SPACING_SECONDS`` from ``start``,
    written by one INSERT … SELECT generate_series (factories would take minutes); every tenth
    rejected by a cap."""
    rule = RewardRule.objects.get(campaign=campaign)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {TriggerEvent._meta.db_table} (
                brand_id, campaign_id, rule_id, type, custom_name, external_id, occurred_at, received_at,
                email, whatsapp, social_provider, social_uid, iban_fingerprint, iban_country, evidence,
                source, device_fingerprint, purchase_currency, order_id, code, outcome, reason,
                review_reasons, request_hash
            )
            SELECT %s, %s, %s, 'tiktok_login', '', 'bulk-' || g, t.at, t.at,
                   '', '', '', '', '', '', '{{}}', 'api', '', '', '', '',
                   CASE WHEN g %% 10 = 0 THEN 'rejected' ELSE 'held' END,
                   CASE WHEN g %% 10 = 0 THEN 'person_cap' ELSE '' END,
                   '[]', md5(g::text)
            FROM generate_series(1, %s) AS g,
                 LATERAL (SELECT %s::timestamptz + g * interval '{SPACING_SECONDS} seconds' AS at) AS t
            """,
            [campaign.brand_id, campaign.pk, rule.pk, count, start],
        )


def test_stats_of_100k_actions_take_a_bounded_number_of_queries(django_assert_max_num_queries):
    # given a campaign with 100,000 actions over 29 days from noon UTC 30 days ago (30 UTC days,
    # the last one yesterday, whatever the hour the test runs at), and 50 visits today
    brand = BrandFactory(name="Big Brand", slug="big-brand")
    campaign = funded_campaign(
        brand=brand, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 100}], timezone="UTC"
    )
    start = datetime.combine(timezone.now().date() - timedelta(days=30), time(12), tzinfo=UTC)
    events_insert(campaign=campaign, count=ACTIONS, start=start)
    for _ in range(50):
        campaign_visit_count(campaign=campaign)
    # when the roll-up takes them in (twice: the second run finds nothing new)
    assert campaign_stats_rollup().events == ACTIONS
    assert campaign_stats_rollup().events == 0
    assert CampaignDayTrigger.objects.filter(campaign=campaign).count() == 30

    # then the selector reads a handful of small queries, and the numbers are whole
    with django_assert_max_num_queries(10):
        stats = campaign_stats(campaign=campaign)
    assert stats.funnel.started == ACTIONS and stats.funnel.visits == 50
    assert sum(t.started for t in stats.by_trigger) == ACTIONS
    window_start = datetime.combine(stats.days[0], time.min, tzinfo=UTC)  # the campaign's days are UTC's
    in_window = TriggerEvent.objects.filter(campaign=campaign, received_at__gte=window_start).count()
    assert sum(stats.started_per_day) == in_window
    with django_assert_max_num_queries(8):
        assert brand_stats(brand=brand).totals[0].started == ACTIONS

    # and so do the partner API (JSON and CSV) and the portal pages
    api = client_for(api_key_create(brand=brand, name="bi", scopes=["read"]).token)
    with django_assert_max_num_queries(16):
        body = api.get(f"/api/v1/campaigns/{campaign.pk}/stats/").json()
    assert body["funnel"]["started"] == ACTIONS
    with django_assert_max_num_queries(12):
        assert api.get(f"/api/v1/campaigns/{campaign.pk}/stats.csv").status_code == 200
    browser = Client()
    browser.force_login(member(brand))
    with django_assert_max_num_queries(20):
        page = browser.get(f"/portal/{brand.slug}/campaigns/{campaign.pk}/analytics/")
    assert page.status_code == 200 and b'data-testid="funnel-started">100000<' in page.content
    with django_assert_max_num_queries(16):
        assert browser.get(f"/portal/{brand.slug}/analytics/").status_code == 200
