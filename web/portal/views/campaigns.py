"""Campaigns: list, create, edit, rules (with the preview), launch / pause / resume / end, and
moving money from the brand's funds to a campaign."""

import uuid

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from campaigns.entitlements import entitlement_default_trigger
from campaigns.models import UNDO_POLICY_FIELDS, BrandRole, Campaign, CampaignStatus, RewardRule
from campaigns.selectors import campaign_budget
from campaigns.services import (
    campaign_allocate,
    campaign_create,
    campaign_end,
    campaign_launch,
    campaign_pause,
    campaign_resume,
    rule_create,
)
from core.exceptions import ApplicationError
from core.money import to_minor
from web.portal.access import brand_view
from web.portal.forms import AllocateForm, CampaignForm, RuleForm, aware
from web.portal.history import campaign_history
from web.portal.preview import rule_preview
from web.portal.selectors import brand_campaigns, brand_unallocated_minor, cost_per_action_minor
from web.portal.services import campaign_update, rule_replace, rule_retire
from web.portal.views.common import report

TRANSITIONS = {
    "launch": (campaign_launch, gettext_lazy("Campaign launched: the claim page is live.")),
    "pause": (campaign_pause, gettext_lazy("Campaign paused: no new rewards until you resume it.")),
    "resume": (campaign_resume, gettext_lazy("Campaign resumed.")),
    "end": (campaign_end, gettext_lazy("Campaign ended: no new rewards; reserved ones still mature.")),
}


def _campaign(access, campaign_id: int) -> Campaign:
    return get_object_or_404(Campaign.objects.select_related("brand"), pk=campaign_id, brand=access.brand)


@brand_view()
def campaign_list(request, access):
    campaigns = list(brand_campaigns(brand=access.brand))
    for c in campaigns:
        c.cpa_minor = cost_per_action_minor(c)
    return render(
        request, "portal/campaign_list.html", {"access": access, "brand": access.brand, "campaigns": campaigns}
    )


def _campaign_fields(form: CampaignForm) -> dict:
    data = form.cleaned_data
    return {
        "name": data["name"],
        "slug": data["slug"],
        "mode": data["mode"],
        "currency": data["currency"],
        "starts_at": aware(data["starts_at"]),
        "ends_at": aware(data.get("ends_at")),
        "timezone": data["timezone"],
        "payout_mode": data["payout_mode"],
        "aggregate_minutes": data["aggregate_minutes"],
        "vop_no_match": data["vop_no_match"],
        "vop_close_match": data["vop_close_match"],
        "vop_not_possible": data["vop_not_possible"],
        "claim_window_days": data.get("claim_window_days"),
        "buyer_claim_links": bool(data.get("buyer_claim_links")),
        **{name: bool(data.get(name)) for name in UNDO_POLICY_FIELDS},
    }


@brand_view(BrandRole.ADMIN)
@require_http_methods(["GET", "POST"])
def campaign_new(request, access):
    form = CampaignForm(request.POST or None, initial={"currency": access.brand.default_currency})
    if request.method == "POST" and form.is_valid():
        try:
            campaign = campaign_create(brand=access.brand, actor=request.user, **_campaign_fields(form))
        except ApplicationError as exc:
            messages_by_field = {k: v for k, v in (exc.details or {}).items() if isinstance(v, list)}
            if messages_by_field:
                report(request, exc)
            else:
                report(request, exc, form=form)
            for field, errors in messages_by_field.items():
                for error in errors:
                    form.add_error(field if field in form.fields else None, error)
        else:
            messages.success(request, _("Campaign created as a draft. Add a reward rule next."))
            return redirect("portal:rule_new", brand_slug=access.brand.slug, campaign_id=campaign.pk)
    return render(request, "portal/campaign_form.html", {"access": access, "brand": access.brand, "form": form})


@brand_view(BrandRole.ADMIN)
@require_http_methods(["GET", "POST"])
def campaign_edit(request, access, campaign_id: int):
    campaign = _campaign(access, campaign_id)
    live = campaign.status != CampaignStatus.DRAFT
    initial = {f: getattr(campaign, f) for f in CampaignForm.base_fields}
    form = CampaignForm(request.POST or None, initial=initial, live=live)
    if request.method == "POST" and form.is_valid():
        try:
            campaign_update(campaign=campaign, actor=request.user, **_campaign_fields(form))
        except ApplicationError as exc:
            report(request, exc)
        else:
            messages.success(request, _("Campaign saved."))
            return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)
    return render(
        request,
        "portal/campaign_form.html",
        {"access": access, "brand": access.brand, "form": form, "campaign": campaign},
    )


@brand_view()
def campaign_detail(request, access, campaign_id: int):
    campaign = _campaign(access, campaign_id)
    rules = list(RewardRule.objects.filter(campaign=campaign).order_by("-is_active", "id"))
    for rule in rules:
        rule.preview = rule_preview(
            rule=rule, brand=access.brand, currency=campaign.currency, payout_mode=campaign.payout_mode
        )
    claim_url = request.build_absolute_uri(
        reverse("claim:campaign", kwargs={"brand_slug": access.brand.slug, "campaign_slug": campaign.slug})
    )
    return render(
        request,
        "portal/campaign_detail.html",
        {
            "access": access,
            "brand": access.brand,
            "campaign": campaign,
            "budget": campaign_budget(campaign=campaign),
            "unallocated_minor": brand_unallocated_minor(brand=access.brand, currency=campaign.currency),
            "rules": rules,
            "claim_url": claim_url,
            "allocate_form": AllocateForm(),
            "allocate_key": uuid.uuid4().hex,
            "history": campaign_history(campaign=campaign),
        },
    )


@brand_view(BrandRole.ADMIN)
@require_http_methods(["GET", "POST"])
def campaign_transition(request, access, campaign_id: int, action: str):
    campaign = _campaign(access, campaign_id)
    if action not in TRANSITIONS:
        return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)
    if request.method == "GET":
        # Ending cannot be undone: it asks first. The others are one click (and undone by another).
        if action != "end":
            return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)
        return render(
            request, "portal/campaign_end.html", {"access": access, "brand": access.brand, "campaign": campaign}
        )
    service, message = TRANSITIONS[action]
    try:
        service(campaign=campaign, actor=request.user)
    except ApplicationError as exc:
        report(request, exc)
    else:
        messages.success(request, str(message))
    return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)


@brand_view(BrandRole.ADMIN)
@require_POST
def campaign_allocate_view(request, access, campaign_id: int):
    campaign = _campaign(access, campaign_id)
    form = AllocateForm(request.POST)
    # The form carries a key drawn when the page was rendered: a double submit allocates once.
    key = request.POST.get("idempotency_key", "")[:64]
    if form.is_valid() and key:
        try:
            amount = to_minor(form.cleaned_data["amount"], campaign.currency)
            campaign_allocate(
                campaign=campaign,
                amount_minor=amount,
                actor=request.user,
                idempotency_key=f"portal:{campaign.pk}:{key}",
            )
        except ApplicationError as exc:
            report(request, exc)
        else:
            messages.success(request, _("Money moved to the campaign budget."))
    else:
        messages.error(request, _("Enter a positive amount."))
    return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)


def _rule_page(request, access, campaign, form, rule=None):
    preview = None
    if form.is_bound and form.is_valid():
        preview = rule_preview(
            rule=RewardRule(**form.cleaned_fields),
            brand=access.brand,
            currency=campaign.currency,
            payout_mode=campaign.payout_mode,
        )
    trigger = form.data.get("trigger") if form.is_bound else form.initial.get("trigger")
    terms_warning = RewardRule(trigger=trigger or "").terms_warning
    return render(
        request,
        "portal/rule_form.html",
        {
            "access": access,
            "brand": access.brand,
            "campaign": campaign,
            "form": form,
            "rule": rule,
            "preview": preview,
            "terms_warning": terms_warning,
        },
    )


@brand_view(BrandRole.ADMIN)
@require_http_methods(["GET", "POST"])
def rule_new(request, access, campaign_id: int):
    campaign = _campaign(access, campaign_id)
    trigger = entitlement_default_trigger(brand=access.brand, mode=campaign.mode)
    form = RuleForm(request.POST or None, initial={"trigger": trigger}, currency=campaign.currency)
    if request.method == "POST" and "save" in request.POST and form.is_valid():
        try:
            rule_create(campaign=campaign, **form.cleaned_fields)
        except ApplicationError as exc:
            report(request, exc, form=form)
        else:
            messages.success(request, _("Rule saved."))
            return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)
    return _rule_page(request, access, campaign, form)


@brand_view(BrandRole.ADMIN)
@require_http_methods(["GET", "POST"])
def rule_edit(request, access, campaign_id: int, rule_id: int):
    campaign = _campaign(access, campaign_id)
    rule = get_object_or_404(RewardRule, pk=rule_id, campaign=campaign, is_active=True)
    form = RuleForm(request.POST or None, initial=RuleForm.initial_from(rule), currency=campaign.currency)
    if request.method == "POST" and "save" in request.POST and form.is_valid():
        try:
            rule_replace(rule=rule, actor=request.user, **form.cleaned_fields)
        except ApplicationError as exc:
            report(request, exc, form=form)
        else:
            messages.success(request, _("Rule saved."))
            return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)
    return _rule_page(request, access, campaign, form, rule=rule)


@brand_view(BrandRole.ADMIN)
@require_POST
def rule_retire_view(request, access, campaign_id: int, rule_id: int):
    campaign = _campaign(access, campaign_id)
    rule = get_object_or_404(RewardRule, pk=rule_id, campaign=campaign)
    try:
        rule_retire(rule=rule, actor=request.user)
    except ApplicationError as exc:
        report(request, exc)
    else:
        messages.success(request, _("Rule retired: it pays no new rewards."))
    return redirect("portal:campaign", brand_slug=access.brand.slug, campaign_id=campaign.pk)
