"""Developer machine and the `make run` demo: debug on, console email, a throwaway secret."""

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
