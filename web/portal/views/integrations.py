"""API keys and webhook endpoints, through the partner API's own services (campaigns.api_keys,
campaigns.webhooks). Secrets are shown once, on the page that created them, and never again."""

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods, require_POST

from campaigns.api_keys import api_key_create, api_key_revoke
from campaigns.models import WEBHOOK_EVENT_TYPES, ApiKey, ApiScope, BrandRole, WebhookDelivery, WebhookEndpoint
from campaigns.webhooks import (
    webhook_delivery_redeliver,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_enable,
    webhook_endpoint_rotate_secret,
)
from core.exceptions import ApplicationError
from web.portal.access import brand_view
from web.portal.views.common import report


class ApiKeyForm(forms.Form):
    name = forms.CharField(
        label=gettext_lazy("Name"),
        max_length=100,
        help_text=gettext_lazy("Where the key is used, e.g. 'Shop backend'."),
    )
    scopes = forms.MultipleChoiceField(
        label=gettext_lazy("Scopes"),
        choices=ApiScope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[ApiScope.values[0]],
    )


class WebhookForm(forms.Form):
    url = forms.URLField(max_length=500, label=gettext_lazy("URL (https)"), assume_scheme="https")
    description = forms.CharField(label=gettext_lazy("Description"), max_length=200, required=False)
    event_types = forms.MultipleChoiceField(
        label=gettext_lazy("Event types"),
        choices=[(t, t) for t in WEBHOOK_EVENT_TYPES],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text=gettext_lazy("None ticked: every event."),
    )


@brand_view()
@require_http_methods(["GET", "POST"])
def api_keys(request, access):
    form = ApiKeyForm(request.POST or None)
    created = None
    if request.method == "POST":
        if not access.can_edit:
            return redirect("portal:api_keys", brand_slug=access.brand.slug)
        if form.is_valid():
            try:
                created = api_key_create(
                    brand=access.brand,
                    name=form.cleaned_data["name"],
                    scopes=form.cleaned_data["scopes"],
                    created_by=request.user,
                )
            except ApplicationError as exc:
                report(request, exc, form=form)
            else:
                form = ApiKeyForm()
    keys = ApiKey.objects.filter(brand=access.brand).order_by("-created_at")
    return render(
        request,
        "portal/api_keys.html",
        {"access": access, "brand": access.brand, "form": form, "keys": keys, "created": created},
    )


@brand_view(BrandRole.ADMIN)
@require_POST
def api_key_revoke_view(request, access, key_id: int):
    key = get_object_or_404(ApiKey, pk=key_id, brand=access.brand)
    api_key_revoke(key=key)
    messages.success(request, _("Key %(name)s revoked: requests with it fail from now on.") % {"name": key.name})
    return redirect("portal:api_keys", brand_slug=access.brand.slug)


@brand_view()
@require_http_methods(["GET", "POST"])
def webhooks(request, access):
    form = WebhookForm(request.POST or None)
    created = None
    if request.method == "POST":
        if not access.can_edit:
            return redirect("portal:webhooks", brand_slug=access.brand.slug)
        if form.is_valid():
            try:
                created = webhook_endpoint_create(brand=access.brand, **form.cleaned_data)
            except ApplicationError as exc:
                report(request, exc)
            else:
                form = WebhookForm()
    endpoints = WebhookEndpoint.objects.filter(brand=access.brand, deleted_at__isnull=True).order_by("-created_at")
    return render(
        request,
        "portal/webhooks.html",
        {"access": access, "brand": access.brand, "form": form, "endpoints": endpoints, "created": created},
    )


def _endpoint(access, endpoint_id: int) -> WebhookEndpoint:
    return get_object_or_404(WebhookEndpoint, pk=endpoint_id, brand=access.brand, deleted_at__isnull=True)


@brand_view()
def webhook_detail(request, access, endpoint_id: int):
    endpoint = _endpoint(access, endpoint_id)
    deliveries = WebhookDelivery.objects.filter(endpoint=endpoint).select_related("event").order_by("-id")
    page = Paginator(deliveries, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "portal/webhook_detail.html",
        {
            "access": access,
            "brand": access.brand,
            "endpoint": endpoint,
            "page": page,
            "query": request.GET.copy(),
            "retry_hours": settings.WEBHOOK_RETRY_HOURS,
        },
    )


@brand_view(BrandRole.ADMIN)
@require_POST
def webhook_action(request, access, endpoint_id: int, action: str):
    endpoint = _endpoint(access, endpoint_id)
    try:
        if action == "rotate":
            rotated = webhook_endpoint_rotate_secret(endpoint=endpoint)
            return render(
                request,
                "portal/webhook_secret.html",
                {"access": access, "brand": access.brand, "endpoint": endpoint, "secret": rotated.secret},
            )
        if action == "delete":
            webhook_endpoint_delete(endpoint=endpoint)
            messages.success(request, _("Endpoint deleted: nothing more is sent to it."))
            return redirect("portal:webhooks", brand_slug=access.brand.slug)
        if action == "enable":
            enabled = webhook_endpoint_enable(endpoint=endpoint, channel="portal", actor=request.user)
            messages.success(
                request,
                ngettext(
                    "Endpoint enabled again: %(count)s delivery of the last %(hours)s hours is being sent again.",
                    "Endpoint enabled again: %(count)s deliveries of the last %(hours)s hours are being sent again.",
                    enabled.requeued,
                )
                % {"count": enabled.requeued, "hours": settings.WEBHOOK_RETRY_HOURS}
                if enabled.requeued or enabled.expired
                else _("The endpoint is active."),
            )
        if action == "redeliver":
            delivery = get_object_or_404(WebhookDelivery, pk=request.POST.get("delivery"), endpoint=endpoint)
            webhook_delivery_redeliver(delivery=delivery)
            messages.success(request, _("Delivery queued to be sent again."))
    except ApplicationError as exc:
        report(request, exc)
    return redirect("portal:webhook", brand_slug=access.brand.slug, endpoint_id=endpoint.pk)
