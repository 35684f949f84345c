"""Production's rule for the admin: through allauth's login (second factor), and only with TOTP."""

import pytest
from allauth.mfa.models import Authenticator
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def production_admin(settings):
    settings.ADMIN_REQUIRES_TWO_FACTOR = True
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "web.portal.middleware.StaffTwoFactorMiddleware"]


def test_anonymous_admin_visit_goes_through_allauth_login(production_admin):
    response = Client().get("/admin/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=%2Fadmin%2F"


def test_staff_without_totp_is_sent_to_set_it_up(production_admin):
    staff = get_user_model().objects.create_user("ops", email="ops@example.com", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    response = client.get("/admin/")
    assert response.status_code == 302 and response["Location"] == "/accounts/2fa/totp/activate/"


def test_staff_with_totp_reaches_the_admin(production_admin):
    staff = get_user_model().objects.create_user("ops", email="ops@example.com", password="x", is_staff=True)
    Authenticator.objects.create(user=staff, type=Authenticator.Type.TOTP, data={"secret": "x"})
    client = Client()
    client.force_login(staff)
    assert client.get("/admin/").status_code == 200
