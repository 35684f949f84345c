"""Reads of what a campaign's money bought (DESIGN §7): the UGC videos and their views over time,
total views, cost per view, per thousand views and per action by trigger, the funnel (claim page
visits → actions started → verified → paid) and daily series for charts.

Every figure comes from the pre-aggregated daily rows (``campaigns.models.analytics``, kept by
``campaigns.services.analytics``) and the video rows, never from the events: a campaign's page is
a fixed handful of queries however many actions it has. Figures trail the events by the
roll-up's settle time and interval (a few minutes); ``as_of`` says up to when.

Money is minor units inside, ``Money`` with ``Decimal`` amounts (django-money's ``moneyed``) out.
"""

from campaigns.analytics.brand import BrandStats, CampaignSummary, CurrencyTotals, brand_stats
from campaigns.analytics.campaign import (
    CHART_DAYS,
    CampaignStats,
    Funnel,
    TriggerStats,
    campaign_daily_rows,
    campaign_stats,
    campaign_stats_csv,
    stats_as_of,
)
from campaigns.analytics.costs import cost_per_action, cost_per_mille, cost_per_view
from campaigns.analytics.videos import VideoStats, campaign_videos, handle_visible

__all__ = [
    "CHART_DAYS",
    "BrandStats",
    "CampaignStats",
    "CampaignSummary",
    "CurrencyTotals",
    "Funnel",
    "TriggerStats",
    "VideoStats",
    "brand_stats",
    "campaign_daily_rows",
    "campaign_stats",
    "campaign_stats_csv",
    "campaign_videos",
    "cost_per_action",
    "cost_per_mille",
    "cost_per_view",
    "handle_visible",
    "stats_as_of",
]
