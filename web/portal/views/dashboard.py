from django.shortcuts import render
from django.utils.translation import gettext as _

from core.money import format_minor
from web.portal.access import brand_view
from web.portal.charts import bar_chart_svg
from web.portal.selectors import brand_dashboard


@brand_view()
def dashboard(request, access):
    data = brand_dashboard(brand=access.brand)
    actions_chart = bar_chart_svg(title=_("Rewarded actions per day"), days=data.days, values=data.actions_per_day)
    paid_chart = bar_chart_svg(
        title=_("Paid out per day (%(currency)s)") % {"currency": data.chart_currency},
        days=data.days,
        values=data.paid_per_day_minor,
        unit_format=lambda v: format_minor(v, data.chart_currency, with_currency=False),
    )
    return render(
        request,
        "portal/dashboard.html",
        {
            "access": access,
            "brand": access.brand,
            "data": data,
            "actions_chart": actions_chart,
            "paid_chart": paid_chart,
            "series": list(zip(data.days, data.actions_per_day, data.paid_per_day_minor, strict=True)),
        },
    )
