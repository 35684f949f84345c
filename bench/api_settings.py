"""Settings of the gunicorn workers ``bench.api`` starts: the bench settings, persistent database
connections, and a rate limit the load generator cannot reach."""

from config.settings.bench import *  # noqa: F403

DATABASES["default"]["CONN_MAX_AGE"] = 600  # noqa: F405
API_RATE_LIMIT_PER_MINUTE = 10**9
