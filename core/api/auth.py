"""``Authorization: Bearer jbk_<prefix>_<secret>``: a brand's API key. The keys belong to campaigns,
which registers its look-up here at start-up (``api_key_lookup_register``): core imports no app.
"""

from collections.abc import Callable
from dataclasses import dataclass

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed


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
