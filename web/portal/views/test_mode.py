"""Test mode and going live, through ``campaigns.services.test_mode``: open the test tenant, add test
money by a simulated bank transfer, reset test data, and the go-live checklist of the live brand.

Every test-mode page works on the test tenant's own slug (``/portal/<slug>-test/…``); the portal's
other pages work there unchanged, since the test tenant is a tenant like any other
(``web.portal.access``). The Live/Test switch and the TEST MODE banner are in ``portal/base.html``.
"""

import uuid

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from campaigns.models import BrandRole
from campaigns.services.test_mode import (
    TRIAL_BALANCE_MINOR,
    TRIAL_FUNDS_MAX_MINOR,
    TRIAL_TOPUP_MAX_MINOR,
    brand_company_details_set,
    brand_terms_accept,
    golive_checklist,
    trial_tenant_active,
    trial_tenant_open,
    trial_tenant_reset,
    trial_topup_simulate,
)
from core.exceptions import ApplicationError
from core.money import to_minor
from recipients.models import Notice
from recipients.selectors import person_root
from recipients.services.notices import notice_text
from web.portal.access import brand_view
from web.portal.forms import MONEY
from web.portal.selectors import brand_unallocated_minor, test_inbox
from web.portal.views.common import report

RESET_WORD = "RESET"


class TestTransferForm(forms.Form):
    amount = forms.DecimalField(label=gettext_lazy("Amount"), **MONEY)
    # One click is one transfer: the key travels with the form, so a double submit adds nothing twice.
    key = forms.CharField(widget=forms.HiddenInput, max_length=64)


class ResetForm(forms.Form):
    confirm = forms.CharField(
        label=gettext_lazy("Type RESET to confirm"), max_length=10, help_text=gettext_lazy("This cannot be undone.")
    )

    def clean_confirm(self):
        if self.cleaned_data["confirm"].strip().upper() != RESET_WORD:
            raise forms.ValidationError(_("Type RESET to confirm."))
        return RESET_WORD


class CompanyForm(forms.Form):
    legal_name = forms.CharField(label=gettext_lazy("Company legal name"), max_length=200)
    address = forms.CharField(label=gettext_lazy("Registered address"), max_length=300)
    vat_number = forms.CharField(label=gettext_lazy("VAT number"), max_length=30, required=False)


def _limits(currency: str) -> dict:
    return {
        "balance_minor": TRIAL_BALANCE_MINOR,
        "topup_max_minor": TRIAL_TOPUP_MAX_MINOR,
        "funds_max_minor": TRIAL_FUNDS_MAX_MINOR,
        "currency": currency,
    }


@brand_view()
@require_http_methods(["GET", "POST"])
def test_mode(request, access):
    """The test mode page. On the live brand's slug: open test mode (POST, an admin) or go to it;
    on the test tenant's: its balance, the trial's limits, a simulated transfer and the reset."""
    live = access.live_brand
    tenant = access.brand if not access.brand.livemode else trial_tenant_active(brand=live)
    if access.brand.livemode:
        if request.method == "POST" and access.can_edit:
            try:
                tenant = trial_tenant_open(brand=live)
            except ApplicationError as exc:
                report(request, exc)
                return redirect("portal:test_mode", brand_slug=live.slug)
        if tenant is not None:
            return redirect("portal:test_mode", brand_slug=tenant.slug)
        return render(
            request, "portal/test_mode.html", {"access": access, "brand": live, **_limits(live.default_currency)}
        )
    return render(
        request,
        "portal/test_mode.html",
        {
            "access": access,
            "brand": tenant,
            "transfer_form": TestTransferForm(initial={"key": uuid.uuid4().hex}),
            "reset_form": ResetForm(),
            "test_funds_minor": brand_unallocated_minor(brand=tenant, currency=tenant.default_currency),
            "inbox": test_inbox(tenant=tenant),
            **_limits(tenant.default_currency),
        },
    )


@brand_view(BrandRole.ADMIN)
@require_POST
def test_transfer(request, access):
    """Simulate a bank transfer into the test tenant's funds."""
    tenant = access.brand
    form = TestTransferForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Enter a positive amount."))
        return redirect("portal:test_mode", brand_slug=tenant.slug)
    try:
        amount_minor = to_minor(form.cleaned_data["amount"], tenant.default_currency)
        trial_topup_simulate(tenant=tenant, amount_minor=amount_minor, idempotency_key=form.cleaned_data["key"])
    except ApplicationError as exc:
        report(request, exc)
    else:
        messages.success(request, _("Test transfer received: the test money is in your unallocated test funds."))
    return redirect("portal:test_mode", brand_slug=tenant.slug)


@brand_view(BrandRole.ADMIN)
@require_POST
def test_reset(request, access):
    """Retire the test tenant and start test mode afresh, after typing RESET."""
    form = ResetForm(request.POST)
    if access.brand.livemode or not form.is_valid():
        messages.error(request, _("Type RESET to confirm."))
        return redirect("portal:test_mode", brand_slug=access.brand.slug)
    fresh = trial_tenant_reset(brand=access.live_brand)
    messages.success(request, _("Test data reset: a fresh test mode with a new free test balance."))
    return redirect("portal:test_mode", brand_slug=fresh.slug)


@brand_view()
@require_http_methods(["GET"])
def test_inbox_message(request, access, notice_id: int):
    """A message to a test person as they would have read it (in their language), with its link:
    the way a tester follows the person's side of the flow. Only the test tenant's own."""
    if access.brand.livemode:
        return redirect("portal:test_mode", brand_slug=access.brand.slug)
    notice = get_object_or_404(Notice, pk=notice_id, person__brand=access.brand)
    person = person_root(person=notice.person)
    with translation.override(person.preferred_language or None):
        text = notice_text(notice, person)
    return render(
        request,
        "portal/test_inbox_message.html",
        {"access": access, "brand": access.brand, "notice": notice, "text": text},
    )


@brand_view()
@require_http_methods(["GET", "POST"])
def go_live(request, access):
    """The live brand's go-live checklist: company details, terms, first top-up."""
    brand = access.live_brand
    if not access.brand.livemode:
        return redirect("portal:go_live", brand_slug=brand.slug)
    form = CompanyForm(
        None if request.POST.get("step") != "company" else request.POST,
        initial={
            "legal_name": brand.company_legal_name,
            "address": brand.company_address,
            "vat_number": brand.company_vat_number,
        },
    )
    if request.method == "POST" and access.can_edit:
        step = request.POST.get("step")
        try:
            if step == "company" and form.is_valid():
                brand_company_details_set(brand=brand, **form.cleaned_data)
                messages.success(request, _("Company details saved."))
                return redirect("portal:go_live", brand_slug=brand.slug)
            if step == "terms":
                if request.POST.get("accept") != "on":
                    messages.error(request, _("Tick the box to accept the terms."))
                else:
                    brand_terms_accept(brand=brand)
                    messages.success(request, _("Terms accepted."))
                return redirect("portal:go_live", brand_slug=brand.slug)
        except ApplicationError as exc:
            report(request, exc)
    steps = golive_checklist(brand=brand)
    return render(
        request,
        "portal/go_live.html",
        {
            "access": access,
            "brand": brand,
            "form": form,
            "steps": {s.key: s.done for s in steps},
            "complete": all(s.done for s in steps) or brand.live_since is not None,
        },
    )
