"""Production only: staff reach the Django admin through allauth's login (which asks for the
second factor) and only after setting up TOTP."""

from allauth.mfa.utils import is_mfa_enabled
from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _


class StaffTwoFactorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if getattr(settings, "ADMIN_REQUIRES_TWO_FACTOR", False) and request.path.startswith("/admin/"):
            user = request.user
            if not user.is_authenticated:
                # The admin's own login form has no second factor: send everyone through allauth.
                return redirect(f"{reverse('account_login')}?{urlencode({'next': request.get_full_path()})}")
            if user.is_staff and not is_mfa_enabled(user, types=["totp"]):
                messages.warning(request, _("Set up two-factor authentication before using the admin."))
                return redirect("mfa_activate_totp")
        return self.get_response(request)
