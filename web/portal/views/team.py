from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from campaigns.models import BrandInvitation, BrandMembership, BrandRole, InvitationStatus
from campaigns.services import brand_language_set
from core.exceptions import ApplicationError
from web.portal.access import brand_view
from web.portal.forms import BrandLanguageForm, InviteForm, RoleForm
from web.portal.services import invitation_create, invitation_revoke, membership_change
from web.portal.views.common import report


@brand_view()
def team(request, access):
    return render(
        request,
        "portal/team.html",
        {
            "access": access,
            "brand": access.brand,
            "members": BrandMembership.objects.filter(brand=access.brand).select_related("user").order_by("id"),
            "invitations": BrandInvitation.objects.filter(brand=access.brand, status=InvitationStatus.PENDING),
            "invite_form": InviteForm(),
            "roles": BrandRole.choices,
            "language_form": BrandLanguageForm(initial={"language": access.brand.language}),
        },
    )


@brand_view(BrandRole.ADMIN)
@require_POST
def team_language(request, access):
    """The language of the e-mails we send the team (budget alerts, automatic pauses): admins
    and owners change it for their own brand (and its test tenant), audited."""
    form = BrandLanguageForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Choose English or Italian."))
        return redirect("portal:team", brand_slug=access.brand.slug)
    try:
        brand_language_set(brand=access.brand, language=form.cleaned_data["language"], actor=request.user)
    except ApplicationError as exc:
        report(request, exc)
    else:
        messages.success(request, _("Saved. Our e-mails to your team are in this language from now on."))
    return redirect("portal:team", brand_slug=access.brand.slug)


@brand_view(BrandRole.OWNER)
@require_POST
def team_invite(request, access):
    form = InviteForm(request.POST)
    if form.is_valid():
        try:
            invitation_create(
                brand=access.brand,
                email=form.cleaned_data["email"],
                role=form.cleaned_data["role"],
                invited_by=request.user,
                accept_url_base=request.build_absolute_uri(reverse("portal:home") + "invitations"),
            )
        except ApplicationError as exc:
            report(request, exc)
        else:
            messages.success(request, _("Invitation sent to %(email)s.") % {"email": form.cleaned_data["email"]})
    else:
        messages.error(request, _("Enter an email address and a role."))
    return redirect("portal:team", brand_slug=access.brand.slug)


@brand_view(BrandRole.OWNER)
@require_POST
def team_invitation_revoke(request, access, invitation_id: int):
    invitation = get_object_or_404(BrandInvitation, pk=invitation_id, brand=access.brand)
    try:
        invitation_revoke(invitation=invitation)
    except ApplicationError as exc:
        report(request, exc)
    else:
        messages.success(request, _("Invitation revoked."))
    return redirect("portal:team", brand_slug=access.brand.slug)


@brand_view(BrandRole.OWNER)
@require_POST
def team_member_change(request, access, membership_id: int):
    membership = get_object_or_404(BrandMembership, pk=membership_id, brand=access.brand)
    role = None
    if "remove" not in request.POST:
        form = RoleForm(request.POST)
        if not form.is_valid():
            messages.error(request, _("Choose a role."))
            return redirect("portal:team", brand_slug=access.brand.slug)
        role = form.cleaned_data["role"]
    try:
        membership_change(membership=membership, role=role, actor=request.user)
    except ApplicationError as exc:
        report(request, exc)
    else:
        messages.success(request, _("Team updated."))
    return redirect("portal:team", brand_slug=access.brand.slug)
