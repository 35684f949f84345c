"""Developer machine and the `make run` demo: debug on, console email, a throwaway secret."""

import os

from .base import *  # noqa: F403
from .base import env_bool

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
FAKE_WHATSAPP_ENABLED = True
TIKTOK_AUTH_BASE_URL = os.environ.get("TIKTOK_AUTH_BASE_URL", "/fake/tiktok")
TIKTOK_API_BASE_URL = os.environ.get("TIKTOK_API_BASE_URL", "http://127.0.0.1:8000/fake/tiktok")
# The demo may deliver webhooks to a receiver on this machine (the guard stays on in production).
WEBHOOK_ALLOW_PRIVATE_TARGETS = env_bool("WEBHOOK_ALLOW_PRIVATE_TARGETS", True)
