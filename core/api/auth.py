"""Who may call the partner API, and how often: the key (``Authorization: Bearer
jbk_<prefix>_<secret>``, a brand's API key), its scopes and its rate.

The keys belong to campaigns, which registers its look-up here at start-up
(``api_key_lookup_register``): core imports no app. Scopes: ``read`` for GET, ``write`` for
changes, ``events`` for sending trigger events; a view says which scope each method needs in
``required_scopes``. The rate limit is a fixed one-minute window per key counted in the Django
cache (LocMem by default, so per process; set CACHE_URL to a Redis server to share it between
workers and web nodes).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.throttling import BaseThrottle


@dataclass(frozen=True)
class ApiClient:
    """``request.user`` of an API request: the key's brand and scopes."""

    key: object  # campaigns.models.ApiKey

    is_authenticated = True
    is_anonymous = False

    @property
    def brand(self):
        return self.key.brand

    @property
    def scopes(self) -> list[str]:
        return self.key.scopes

    @property
    def actor(self):
        """The person who created the key: recorded as the actor of decisions made with it."""
        return self.key.created_by


_lookup: Callable | None = None


def api_key_lookup_register(lookup: Callable) -> None:
    """``lookup(token=...)`` returns the live key a token names, or None."""
    global _lookup
    _lookup = lookup


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.encode():
            return None
        if len(header) != 2:
            raise AuthenticationFailed("Send 'Authorization: Bearer <API key>'.", code="invalid_api_key")
        try:
            token = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed("The API key is not valid.", code="invalid_api_key")
        key = _lookup(token=token)
        if key is None:
            raise AuthenticationFailed("The API key is not valid or was revoked.", code="invalid_api_key")
        return ApiClient(key=key), key

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


DEFAULT_SCOPES = {
    "GET": "read",
    "HEAD": "read",
    "OPTIONS": "read",
    "POST": "write",
    "PATCH": "write",
    "DELETE": "write",
}


class HasScope(BasePermission):
    code = "insufficient_scope"

    def has_permission(self, request, view) -> bool:
        client = request.user
        if not getattr(client, "is_authenticated", False):
            return False
        needed = {**DEFAULT_SCOPES, **getattr(view, "required_scopes", {})}.get(request.method, "write")
        if needed in client.scopes:
            return True
        self.message = f"This API key lacks the '{needed}' scope."
        return False


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
