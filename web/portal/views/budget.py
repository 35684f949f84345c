"""A campaign's money going back to the brand: closing the campaign (everything unspent) and
moving part of its unspent budget back. Each is a confirmation page (GET) and the act (POST);
a replayed POST changes nothing (the service is idempotent)."""

import uuid

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from campaigns.models import BrandRole, Campaign, CampaignStatus, Reward
from campaigns.models.events import RESERVED_STATUSES
from campaigns.selectors import campaign_budget
from campaigns.services import campaign_budget_release, campaign_close
from core.exceptions import ApplicationError
from core.money import to_minor
from web.portal.access import brand_view
from web.portal.forms import ReleaseForm
from web.portal.views.common import report


def _campaign(access, campaign_id: int) -> Campaign:
    return get_object_or_404(Campaign.objects.select_related("brand"), pk=campaign_id, brand=access.brand)


def _page(request, access, campaign, template: str, status: int = 200, **context):
    return render(
        request,
        template,
        {
            "access": access,
            "brand": access.brand,
            "campaign": campaign,
            "budget": campaign_budget(campaign=campaign),
            **context,
        },
        status=status,
    )


@brand_view(BrandRole.ADMIN)
@require_http_methods(["GET", "POST"])
def campaign_close_view(request, access, campaign_id: int):
    """Close: end (if still running) and give every unspent cent back to the brand's funds."""
    campaign = _campaign(access, campaign_id)
    if request.method == "POST":
        was_closed = campaign.status == CampaignStatus.CLOSED
        try:
            campaign_close(campaign=campaign, actor=request.user)
        except ApplicationError as exc:
            report(request, exc)
            return _page(
                request,
                access,
                campaign,
                "portal/campaign_close.html",
                status=exc.http_status,
                reserved=exc.details.get("reserved", 0),
            )
        if not was_closed:
            messages.success(request, _("Campaign closed: its unspent budget is back in your funds."))
        return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)
    reserved = Reward.objects.filter(campaign=campaign, status__in=RESERVED_STATUSES).count()
    return _page(request, access, campaign, "portal/campaign_close.html", reserved=reserved)


@brand_view(BrandRole.ADMIN)
@require_http_methods(["GET", "POST"])
def campaign_release_view(request, access, campaign_id: int):
    """Move part of the unspent budget back to the brand's funds (never what rewards hold)."""
    campaign = _campaign(access, campaign_id)
    if request.method == "POST":
        form = ReleaseForm(request.POST)
        if not form.is_valid():
            return _page(request, access, campaign, "portal/campaign_release.html", status=400, form=form)
        try:
            campaign_budget_release(
                campaign=campaign,
                amount_minor=to_minor(form.cleaned_data["amount"], campaign.currency),
                actor=request.user,
                idempotency_key=f"portal:{campaign.pk}:release:{form.cleaned_data['idempotency_key']}",
            )
        except ApplicationError as exc:
            report(request, exc, form=form)
            return _page(request, access, campaign, "portal/campaign_release.html", status=exc.http_status, form=form)
        messages.success(request, _("Money moved back to your funds."))
        return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)
    form = ReleaseForm(initial={"idempotency_key": uuid.uuid4().hex})
    return _page(request, access, campaign, "portal/campaign_release.html", form=form)
