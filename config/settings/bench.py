"""Benchmarks: PostgreSQL from DATABASE_URL (default: the local `test` database), no debug."""

import os

import dj_database_url

from .base import *  # noqa: F403

DEBUG = False
SECRET_KEY = "bench-only-not-secret"
DATABASES = {  # noqa: F405
    "default": dj_database_url.parse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"))
}
LOGGING = {**LOGGING, "root": {"handlers": ["console"], "level": "WARNING"}}  # noqa: F405
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
