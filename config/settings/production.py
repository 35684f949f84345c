"""Production: safe by default. Anything missing that would make it unsafe stops the start-up:
SECRET_KEY here, everything else in the system checks of ``core.checks`` (errors that say what
to set), which ``manage.py check --deploy``, ``migrate`` and the WSGI start-up all run."""

import os

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import env_bool, env_int

DEBUG = False
if not SECRET_KEY or len(SECRET_KEY) < 32:  # noqa: F405
    raise ImproperlyConfigured("SECRET_KEY must be set to at least 32 random characters")

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"

# Staff reach the admin only through allauth's login (which asks for the second factor) and only
# once they have TOTP set up (web.portal.middleware).
MIDDLEWARE = [*MIDDLEWARE, "web.portal.middleware.StaffTwoFactorMiddleware"]  # noqa: F405
ADMIN_REQUIRES_TWO_FACTOR = True

# Webhooks leave only over https and only for public addresses (campaigns.webhook_targets); the
# checks say the same (core.E130/E131) for settings changed after import.
if WEBHOOK_ALLOW_HTTP or WEBHOOK_ALLOW_PRIVATE_TARGETS:  # noqa: F405
    raise ImproperlyConfigured("Outgoing webhooks must use https to public addresses in production")

PRODUCTION_CHECKS = True
# The one way to run production settings without paying anyone (staging, a public demo): the
# value must be exactly "nobody-is-paid", and every check prints a warning while it is set.
SANDBOXED_DEPLOYMENT = os.environ.get("SANDBOXED_DEPLOYMENT", "")
# Without a Verification of Payee provider (VOP_BASE_URL) the checks refuse to start (core.E114)
# unless this says, by name, that names are paid unchecked: then they warn (core.W114).
PAYOUT_VOP_ACCEPT_UNCHECKED_NAMES = env_bool("PAYOUT_VOP_ACCEPT_UNCHECKED_NAMES", False)
