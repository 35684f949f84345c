"""Per-key rate limit: a fixed one-minute window counted in the Django cache (LocMem by default,
so per process; set CACHE_URL to a Redis server to share it between workers and web nodes)."""

import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

WINDOW_SECONDS = 60


class ApiKeyRateThrottle(BaseThrottle):
    def allow_request(self, request, view) -> bool:
        client = request.user
        if not getattr(client, "is_authenticated", False):
            return True
        limit = settings.API_RATE_LIMIT_PER_MINUTE
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        cache_key = f"api-rate:{client.key.prefix}:{window}"
        if cache.add(cache_key, 1, timeout=WINDOW_SECONDS + 5):
            count = 1
        else:
            try:
                count = cache.incr(cache_key)
            except ValueError:  # expired between add and incr
                cache.set(cache_key, 1, timeout=WINDOW_SECONDS + 5)
                count = 1
        self._wait = (window + 1) * WINDOW_SECONDS - now
        return count <= limit

    def wait(self) -> float:
        return self._wait
