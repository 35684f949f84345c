"""TikTok webhooks (Login Kit / Content Posting / Display API events).

TikTok signs each delivery with ``TikTok-Signature: t=<unix seconds>,s=<hex>`` where ``s`` is
HMAC-SHA256 of ``"<t>.<raw body>"`` keyed with the app's client secret. We refuse a signature
older or newer than ``TIKTOK_SIGNATURE_TOLERANCE_SECONDS`` (a replayed capture), store the
delivery and acknowledge it. Processing records what it was: the events TikTok sends
(``authorization.removed``, ``video.publish.complete`` …) do not change money by themselves —
view-count rewards are verified through the Display API when a person claims them.
"""

import hashlib
import hmac
import json
import logging
import time

from django.conf import settings

from core.exceptions import InvalidInput
from core.models import InboundStatus
from core.webhooks_in import Rejected, Verified, body_digest

logger = logging.getLogger(__name__)


def parse_signature(header: str) -> tuple[int, str] | None:
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        return int(parts["t"]), parts["s"].strip().lower()
    except (KeyError, ValueError):
        return None


class TikTokHandler:
    provider = "tiktok"

    def verify(self, *, body: bytes, headers, now: float | None = None) -> Verified | Rejected:
        secret = settings.TIKTOK_CLIENT_SECRET
        if not secret:
            return Rejected("TIKTOK_CLIENT_SECRET is not configured")
        parsed = parse_signature(headers.get("TikTok-Signature", ""))
        if parsed is None:
            return Rejected("no TikTok-Signature")
        timestamp, given = parsed
        expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, given):
            return Rejected("bad TikTok-Signature")
        if abs((now or time.time()) - timestamp) > settings.TIKTOK_SIGNATURE_TOLERANCE_SECONDS:
            return Rejected("stale TikTok-Signature")
        return Verified(dedupe_key=body_digest(body))

    def process(self, webhook) -> str:
        try:
            payload = json.loads(bytes(webhook.body))
            event, client_key = payload["event"], payload.get("client_key", "")
        except (ValueError, KeyError, TypeError):
            raise InvalidInput("The body is not a TikTok event.", code="webhook_invalid")
        if settings.TIKTOK_CLIENT_KEY and client_key != settings.TIKTOK_CLIENT_KEY:
            logger.warning("TikTok webhook %s for another app (%s)", webhook.pk, client_key)
            return InboundStatus.IGNORED
        # The open_id names a person and no pattern can mask it in the log: the webhook id finds it.
        logger.info("TikTok webhook %s: %s", webhook.pk, event)
        return InboundStatus.PROCESSED if event == "authorization.removed" else InboundStatus.IGNORED


handler = TikTokHandler()
