"""Abuse limits on the claim pages, counted in Django's cache. Fixed windows: cheap and good enough
to stop a script; the rule engine's caps and fraud signals do the fine-grained work.

* Per client IP, every attempt counts, refused ones included: form posts
  (``CLAIM_RATE_LIMIT_PER_IP``), and every request to a page that takes a secret — a link's
  token, a code — GETs too (``CLAIM_RATE_LIMIT_SECRET_PER_IP``, larger: waiting pages poll).
* Per campaign (a flood against one brand's budget), only accepted work counts: a form that
  passed and reached the engine, a code issued. A refused request (a bad token or code, an
  invalid form) costs its client alone, so one client cannot close a campaign's pages for
  everyone."""

import time

from django.conf import settings
from django.core.cache import cache

IP_WINDOW_SECONDS = 600
CAMPAIGN_WINDOW_SECONDS = 60


def client_ip(request) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is typed by the client unless a trusted proxy rewrites it.
    return request.META.get("REMOTE_ADDR", "")


def _bucket(key: str, window: int) -> str:
    return f"{key}:{int(time.time()) // window}"


def _hit(key: str, window: int) -> int:
    bucket = _bucket(key, window)
    if cache.add(bucket, 1, timeout=window + 5):
        return 1
    try:
        return cache.incr(bucket)
    except ValueError:  # expired between add and incr
        cache.add(bucket, 1, timeout=window + 5)
        return 1


def client_limited(request) -> bool:
    """Count one form post of this client; True when it is over its limit."""
    return _hit(f"claim:ip:{client_ip(request)}", IP_WINDOW_SECONDS) > settings.CLAIM_RATE_LIMIT_PER_IP


def secret_limited(request) -> bool:
    """Count one request of this client to a page that takes a secret; True when over."""
    return _hit(f"claim:secret:{client_ip(request)}", IP_WINDOW_SECONDS) > settings.CLAIM_RATE_LIMIT_SECRET_PER_IP


def campaign_busy(*, campaign_id: int) -> bool:
    """Has the campaign taken its limit of accepted work this minute? Counts nothing."""
    count = cache.get(_bucket(f"claim:campaign:{campaign_id}", CAMPAIGN_WINDOW_SECONDS)) or 0
    return count >= settings.CLAIM_RATE_LIMIT_PER_CAMPAIGN


def campaign_work_count(*, campaign_id: int) -> None:
    """Count one piece of accepted work for the campaign (call it once the request passed)."""
    _hit(f"claim:campaign:{campaign_id}", CAMPAIGN_WINDOW_SECONDS)


def iban_check_limited(request) -> bool:
    """The live IBAN check runs as people type: a separate, larger allowance per IP."""
    return _hit(f"claim:iban:{client_ip(request)}", IP_WINDOW_SECONDS) > 10 * settings.CLAIM_RATE_LIMIT_PER_IP
