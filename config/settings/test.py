"""pytest settings: the database comes from DATABASE_URL (CI points it at PostgreSQL)."""

from .base import *  # noqa: F403

DEBUG = False
SECRET_KEY = "test-only-not-secret"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
Q_CLUSTER = {**Q_CLUSTER, "sync": True}  # noqa: F405
STORAGES = {  # noqa: F405
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
LOGGING = {**LOGGING, "root": {"handlers": ["console"], "level": "WARNING"}}  # noqa: F405
# Tests deliver webhooks to fake receivers on 127.0.0.1; tests of the guard switch this off.
WEBHOOK_ALLOW_PRIVATE_TARGETS = True
# Tasks run inline here: a collection after every commit would run inside unrelated tests.
WEBHOOK_COLLECT_ON_COMMIT = False
