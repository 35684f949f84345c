"""Production: safe by default. Anything missing that would make it unsafe stops the start-up:
SECRET_KEY here, everything else in the system checks of ``core.checks`` (errors that say what
to set), which ``manage.py check --deploy``, ``migrate`` and the WSGI start-up all run."""

import os

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import env_bool, env_int, env_list

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
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)

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

# Who may read /metrics (core.health): no address by default; core.E141 refuses to start until
# METRICS_TOKEN or METRICS_ALLOWED_IPS says who.
METRICS_ALLOWED_IPS = env_list("METRICS_ALLOWED_IPS", "")
# Query counts and durations per database (django-prometheus's wrapper of Django's PostgreSQL
# backend, psycopg 3 included); METRICS_DB=false keeps Django's own.
if env_bool("METRICS_DB", True):
    for _database in DATABASES.values():  # noqa: F405 - the replica's too, labelled by its alias
        if _database["ENGINE"] == "django.db.backends.postgresql":
            _database["ENGINE"] = "django_prometheus.db.backends.postgresql"

# Errors to Sentry, scrubbed of personal data (core.error_reporting), once SENTRY_DSN is set.
SENTRY_DSN = os.environ.get("SENTRY_DSN", "")
if SENTRY_DSN:
    from core.error_reporting import error_reporting_init

    error_reporting_init(
        dsn=SENTRY_DSN,
        environment=os.environ.get("SENTRY_ENVIRONMENT", "production"),
        release=os.environ.get("SENTRY_RELEASE", ""),
        traces_sample_rate=float(os.environ.get("SENTRY_TRACES_SAMPLE_RATE", "0")),
    )
