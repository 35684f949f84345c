"""Abuse limits on the claim pages, counted in Django's cache: per client IP (a bot hammering the
form) and per campaign (a flood against one brand's budget). Fixed windows: cheap and good
enough to stop a script; the rule engine's caps and fraud signals do the fine-grained work."""

import time

from django.conf import settings
from django.core.cache import cache

IP_WINDOW_SECONDS = 600
CAMPAIGN_WINDOW_SECONDS = 60


def client_ip(request) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is typed by the client unless a trusted proxy rewrites it.
    return request.META.get("REMOTE_ADDR", "")


def _hit(key: str, window: int) -> int:
    bucket = f"{key}:{int(time.time()) // window}"
    if cache.add(bucket, 1, timeout=window + 5):
        return 1
    try:
        return cache.incr(bucket)
    except ValueError:  # expired between add and incr
        cache.add(bucket, 1, timeout=window + 5)
        return 1


def claim_rate_limited(request, *, campaign_id: int) -> bool:
    """Count one attempt; True when the IP or the campaign is over its limit."""
    over_ip = _hit(f"claim:ip:{client_ip(request)}", IP_WINDOW_SECONDS) > settings.CLAIM_RATE_LIMIT_PER_IP
    over_campaign = (
        _hit(f"claim:campaign:{campaign_id}", CAMPAIGN_WINDOW_SECONDS) > settings.CLAIM_RATE_LIMIT_PER_CAMPAIGN
    )
    return over_ip or over_campaign


def iban_check_limited(request) -> bool:
    """The live IBAN check runs as people type: a separate, larger allowance per IP."""
    return _hit(f"claim:iban:{client_ip(request)}", IP_WINDOW_SECONDS) > 10 * settings.CLAIM_RATE_LIMIT_PER_IP
