"""The brand's plan: what it includes, its fees, this month's usage against its allowances, its
monthly fees charged (taken from the funds, or due until a top-up covers them), and a request to
ops for another plan (``upgrade_request_create``; ops answer in the admin)."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from campaigns.entitlements import plan_display_name
from campaigns.models import BrandRole, Channel, Trigger
from campaigns.selectors import (
    brand_plan_current,
    brand_usage_month,
    plan_charges_recent,
    plans_for_sale,
    upgrade_requests_open,
)
from campaigns.services import upgrade_request_create
from core.exceptions import ApplicationError
from web.portal.access import brand_view
from web.portal.forms import UpgradeRequestForm
from web.portal.views.common import report


@brand_view()
@require_http_methods(["GET", "POST"])
def plan(request, access):
    brand = access.brand
    current = brand_plan_current(brand=brand)
    others = [p for p in plans_for_sale() if p != current]
    form = UpgradeRequestForm(request.POST or None, plans=others)
    if request.method == "POST":
        if not access.can(BrandRole.ADMIN):
            return redirect("portal:plan", brand_slug=brand.slug)
        if form.is_valid():
            try:
                upgrade_request_create(
                    brand=brand,
                    plan=form.cleaned_data["plan"],
                    requested_by=request.user,
                    message=form.cleaned_data["message"],
                )
            except ApplicationError as exc:
                report(request, exc, form=form)
            else:
                messages.success(request, _("Request sent: our team will get back to you shortly."))
                return redirect("portal:plan", brand_slug=brand.slug)
    return render(
        request,
        "portal/plan.html",
        {
            "access": access,
            "brand": brand,
            "plan": current,
            "plan_name": plan_display_name(current) if current else "",
            "triggers": [Trigger(t).label for t in (current.triggers if current else []) if t in Trigger.values],
            "channels": [Channel(c).label for c in (current.channels if current else []) if c in Channel.values],
            "usage": brand_usage_month(brand=brand, plan=current),
            "others": [(p, plan_display_name(p)) for p in others],
            "form": form,
            "pending": upgrade_requests_open(brand=brand),
            "charges": [(c, plan_display_name(c.plan)) for c in plan_charges_recent(brand=brand)],
        },
    )
