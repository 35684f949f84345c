"""Developer machine and the `make run` demo: debug on, console email, a throwaway secret."""

import os

from .base import *  # noqa: F403
from .base import env_bool

# Where `make run` serves (HOST/PORT): links in e-mails and the fake TikTok's server-side URL
# follow it, so the demo works on any port. A wildcard bind is reached on loopback.
_HOST = os.environ.get("HOST", "127.0.0.1")
_ORIGIN = "http://{}:{}".format(
    "127.0.0.1" if _HOST in {"", "0.0.0.0", "::"} else _HOST,  # noqa: S104 - a bind address, compared
    os.environ.get("PORT", "8000"),
)
if _HOST not in ALLOWED_HOSTS and _HOST not in {"", "0.0.0.0", "::"}:  # noqa: F405, S104
    ALLOWED_HOSTS = [*ALLOWED_HOSTS, _HOST]  # noqa: F405

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = SECRET_KEY or "local-dev-only-not-secret"  # noqa: F405
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
# Serve static files straight from the apps in the demo, without a collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
# The demo's web process and worker share one sandbox bank.
SANDBOX_STORE_PATH = SANDBOX_STORE_PATH or str(BASE_DIR / "sandbox-bank.sqlite3")  # noqa: F405
# The demo's TikTok is the local fake mounted at /fake/tiktok/ (campaigns.platforms.tiktok_fake).
FAKE_TIKTOK_ENABLED = True
# The reconciliation dashboard offers a statement of the demo bank (web.demo_bank).
DEMO_BANK_ENABLED = True
FAKE_WHATSAPP_ENABLED = True
TIKTOK_AUTH_BASE_URL = os.environ.get("TIKTOK_AUTH_BASE_URL", "/fake/tiktok")
TIKTOK_API_BASE_URL = os.environ.get("TIKTOK_API_BASE_URL", f"{_ORIGIN}/fake/tiktok")
CLAIM_BASE_URL = os.environ.get("CLAIM_BASE_URL", _ORIGIN)
# The demo may deliver webhooks to a receiver on this machine (the guard stays on in production).
WEBHOOK_ALLOW_PRIVATE_TARGETS = env_bool("WEBHOOK_ALLOW_PRIVATE_TARGETS", True)
# ... over plain http, as a local receiver speaks (e.g. the demo's own /fake/webhooks/).
WEBHOOK_ALLOW_HTTP = env_bool("WEBHOOK_ALLOW_HTTP", True)
# The worker's own INFO lines (every task, every process stopping) drown the demo's e-mails.
LOGGING = {  # noqa: F405
    **LOGGING,  # noqa: F405
    "loggers": {**LOGGING["loggers"], "django-q": {"handlers": ["console"], "level": "WARNING", "propagate": False}},  # noqa: F405
}
