"""Landing after sign-in: the user's brands, or a form to create the first one; invitations."""

from allauth.account.models import EmailAddress
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from campaigns.models import BrandInvitation, BrandMembership, InvitationStatus
from core.exceptions import ApplicationError
from web.portal.forms import BrandForm
from web.portal.services import brand_register, invitation_accept
from web.portal.views.common import report


@login_required
@require_http_methods(["GET", "POST"])
def portal_home(request):
    memberships = list(
        BrandMembership.objects.filter(user=request.user).select_related("brand").order_by("brand__name")
    )
    form = BrandForm(request.POST or None, initial={"default_currency": "EUR"})
    if request.method == "POST" and form.is_valid():
        try:
            brand = brand_register(user=request.user, **form.cleaned_data)
        except ApplicationError as exc:
            report(request, exc)
        else:
            messages.success(request, _("%(brand)s is ready. Create your first campaign.") % {"brand": brand.name})
            return redirect("portal:dashboard", brand_slug=brand.slug)
    invitations = _invitations_for(request.user)
    if request.method == "GET" and len(memberships) == 1 and not invitations and "all" not in request.GET:
        return redirect("portal:dashboard", brand_slug=memberships[0].brand.slug)
    return render(request, "portal/home.html", {"memberships": memberships, "invitations": invitations, "form": form})


def _invitations_for(user) -> list[BrandInvitation]:
    """Pending invitations to the user's verified addresses: shown on the home page, so one is
    not lost when the invitee signs up and the e-mail confirmation brings them here instead."""
    addresses = EmailAddress.objects.filter(user=user, verified=True).values_list("email", flat=True)
    to_them = Q(pk__in=[])
    for address in addresses:
        to_them |= Q(email__iexact=address)
    return list(
        BrandInvitation.objects.filter(to_them, status=InvitationStatus.PENDING, expires_at__gt=timezone.now())
        .select_related("brand")
        .order_by("id")
    )


@login_required
@require_http_methods(["GET", "POST"])
def invitation_accept_view(request, token: str):
    if request.method == "POST":
        try:
            membership = invitation_accept(token=token, user=request.user)
        except ApplicationError as exc:
            report(request, exc)
            return redirect("portal:home")
        messages.success(request, _("You joined %(brand)s.") % {"brand": membership.brand.name})
        return redirect("portal:dashboard", brand_slug=membership.brand.slug)
    return render(request, "portal/invitation_accept.html", {"token": token})
