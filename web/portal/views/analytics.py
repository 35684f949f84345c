"""What the money bought: a campaign's analytics page (funnel, costs per action / view / thousand
views, the UGC videos, daily charts) and the brand's overview of every campaign. Reads only the
pre-aggregated daily rows (``campaigns.analytics``); the CSV is the partner API's."""

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.translation import gettext as _

from campaigns.analytics import brand_stats, campaign_stats, campaign_stats_csv
from campaigns.models import Campaign
from core.money import format_minor
from web.portal.access import brand_view
from web.portal.charts import bar_chart_svg


def _campaign(access, campaign_id: int) -> Campaign:
    return get_object_or_404(Campaign.objects.select_related("brand"), pk=campaign_id, brand=access.brand)


@brand_view()
def campaign_analytics(request, access, campaign_id: int):
    campaign = _campaign(access, campaign_id)
    stats = campaign_stats(campaign=campaign)
    in_money = {"unit_format": lambda v: format_minor(v, stats.currency, with_currency=False)}
    charts = [
        (_("Claim page visits per day"), stats.visits_per_day, {}),
        (_("Actions started per day"), stats.started_per_day, {}),
        (_("Verified actions per day"), stats.verified_per_day, {}),
        (_("Spent per day (%(currency)s)") % {"currency": stats.currency}, stats.spent_per_day_minor, in_money),
        (_("Total views reached"), stats.views_per_day, {}),
    ]
    return render(
        request,
        "portal/campaign_analytics.html",
        {
            "access": access,
            "brand": access.brand,
            "campaign": campaign,
            "stats": stats,
            "funnel": stats.funnel.steps(),
            "funnel_top": max(stats.funnel.visits, stats.funnel.started, 1),
            "charts": [
                (title, bar_chart_svg(title=title, days=stats.days, values=values, **fmt))
                for title, values, fmt in charts
            ],
            "series": stats.daily(),
        },
    )


@brand_view()
def campaign_analytics_csv(request, access, campaign_id: int):
    campaign = _campaign(access, campaign_id)
    response = HttpResponse(campaign_stats_csv(campaign=campaign), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-stats.csv"'
    return response


@brand_view()
def brand_analytics(request, access):
    stats = brand_stats(brand=access.brand)
    charts = [
        (_("Actions started per day"), stats.started_per_day),
        (_("Verified actions per day"), stats.verified_per_day),
    ]
    return render(
        request,
        "portal/analytics.html",
        {
            "access": access,
            "brand": access.brand,
            "stats": stats,
            "charts": [(title, bar_chart_svg(title=title, days=stats.days, values=values)) for title, values in charts],
            "series": list(zip(stats.days, stats.started_per_day, stats.verified_per_day, strict=True)),
        },
    )
