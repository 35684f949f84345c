"""Social platforms behind one interface (``campaigns.platforms.base.Platform``) and the registry
that builds them.

``settings.PLATFORMS`` maps a platform name to a dotted class path; entries there override or
extend the built-in names below (a test may put a fake in place of a platform). The name is also
the event source of the platform's first-party events and the ``platform`` of its triggers
(``campaigns.triggers``).
"""

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from campaigns.platforms.base import (
    AccessTokenRefused,
    ActionCheck,
    AuthorizationRefused,
    Content,
    FakeRequest,
    FakeResponse,
    InboundEvent,
    Platform,
    PlatformUnavailable,
    ProvenIdentity,
    TokenGrant,
)
from core.exceptions import InvalidInput
from core.webhooks_in import Rejected, Verified

BUILTIN_PLATFORMS: dict[str, str] = {
    "tiktok": "campaigns.platforms.tiktok.TikTokPlatform",
    "whatsapp": "campaigns.platforms.whatsapp.WhatsAppPlatform",
}


def platform_names() -> list[str]:
    return sorted({**BUILTIN_PLATFORMS, **getattr(settings, "PLATFORMS", {})})


def platform_get(name: str) -> Platform:
    """The platform called ``name``. Raises InvalidInput (``unknown_platform``) for another name."""
    path = getattr(settings, "PLATFORMS", {}).get(name) or BUILTIN_PLATFORMS.get(name)
    if path is None:
        raise InvalidInput(
            f"No platform called {name!r}.", code="unknown_platform", details={"known": platform_names()}
        )
    return import_string(path)()


def platforms_production_checks() -> list[checks.CheckMessage]:
    """Every platform's production checks (``core.checks`` runs them; registered from
    ``CampaignsConfig.ready``)."""
    return [message for name in platform_names() for message in platform_get(name).production_checks()]


class PlatformWebhooks:
    """The handler ``core.webhooks_in`` calls for a platform's deliveries (registered from
    ``CampaignsConfig.ready``): the signature check, then parse and handle, by the platform the
    registry names at each call."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def headers(self) -> tuple[str, ...]:
        return platform_get(self.name).webhook_headers

    def challenge(self, *, params) -> str | None:
        return platform_get(self.name).webhook_challenge(params=params)

    def verify(self, *, body: bytes, headers) -> Verified | Rejected:
        return platform_get(self.name).webhook_verify(body=body, headers=headers)

    def process(self, webhook) -> str:
        platform = platform_get(self.name)
        return platform.webhook_handle(webhook_id=webhook.pk, events=platform.webhook_events(body=bytes(webhook.body)))


__all__ = [
    "AccessTokenRefused",
    "ActionCheck",
    "AuthorizationRefused",
    "BUILTIN_PLATFORMS",
    "Content",
    "FakeRequest",
    "FakeResponse",
    "InboundEvent",
    "Platform",
    "PlatformUnavailable",
    "PlatformWebhooks",
    "ProvenIdentity",
    "TokenGrant",
    "platform_get",
    "platform_names",
]
