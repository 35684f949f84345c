"""Benchmarks: PostgreSQL from DATABASE_URL (default: the local `test` database), no debug."""

import os

from .base import *  # noqa: F403

DEBUG = False
SECRET_KEY = "bench-only-not-secret"
DATABASES = {  # noqa: F405
    "default": database_from_url(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"))  # noqa: F405
}
LOGGING = {**LOGGING, "root": {"handlers": ["console"], "level": "WARNING"}}  # noqa: F405
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
