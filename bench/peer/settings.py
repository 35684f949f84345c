"""Minimal Django settings for the ledger benchmark's peer: django-hordak alone (and the django-mptt
its accounts tree needs) on a PostgreSQL database of its own, next to the project's benchmark
database on the same server.

``PEER_DATABASE_URL`` names that database; by default it is ``DATABASE_URL``'s database name with
``_hordak`` appended (``…/test`` → ``…/test_hordak``). Its hordak tables are truncated by each run.
"""

import os
from urllib.parse import urlsplit

import dj_database_url

from bench.common import with_database

_OURS = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
PEER_DATABASE_URL = os.environ.get("PEER_DATABASE_URL") or with_database(
    _OURS, urlsplit(_OURS).path.lstrip("/") + "_hordak"
)

DEBUG = False
SECRET_KEY = "peer-bench-only-not-secret"  # noqa: S105
USE_TZ = True
# contenttypes only because a hordak migration depends on it.
INSTALLED_APPS = ["django.contrib.contenttypes", "mptt", "hordak"]
DATABASES = {"default": dj_database_url.parse(PEER_DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# hordak's default currency for accounts and legs; the workloads move EUR only.
DEFAULT_CURRENCY = "EUR"
HORDAK_INTERNAL_CURRENCY = "EUR"
CURRENCIES = ["EUR"]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
