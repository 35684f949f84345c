"""Developer machine and the `make run` demo: debug on, console email, a throwaway secret."""

from .base import *  # noqa: F403
from .base import env_bool

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = SECRET_KEY or "local-dev-only-not-secret"  # noqa: F405
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
