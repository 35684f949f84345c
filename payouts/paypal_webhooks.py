"""PayPal's payout item webhooks (``PAYMENT.PAYOUTS-ITEM.SUCCEEDED``, ``.UNCLAIMED``,
``.RETURNED``, ``.FAILED``, ``.BLOCKED``, ``.REFUNDED``, ``.REVERSED``, ``.CANCELED``, ``.HELD``
…): move the payout the item belongs to (the door is ``/api/webhooks/paypal/``, the one of
``core.webhooks_in``; the work is ``payouts.services.paypal_item_event_apply``).

Verified before anything is stored with PayPal's offline signature check
(``PayPalPayoutsRail.webhook_verify``: RSA-SHA256 over the transmission id and time, our webhook
id and the body's CRC32, with PayPal's certificate); de-duplicated by the event's ``id`` (PayPal
redelivers an event up to 25 times over 3 days with the same id).
"""

import json

from core.exceptions import InvalidInput
from core.models import InboundStatus
from core.webhooks_in import Rejected, Verified, body_digest
from payouts.rails.paypal import PAYPAL_RAIL
from payouts.services.paypal import paypal_item_event_apply, paypal_rail


class PayPalHandler:
    provider = "paypal"
    headers = (
        "paypal-transmission-id",
        "paypal-transmission-time",
        "paypal-transmission-sig",
        "paypal-cert-url",
        "paypal-auth-algo",
    )

    def verify(self, *, body: bytes, headers) -> Verified | Rejected:
        rail = paypal_rail()
        if rail is None or not rail.webhook_id:
            return Rejected("no PayPal rail or webhook id configured")
        if not rail.webhook_verify(body=body, headers=headers):
            return Rejected("bad PAYPAL-TRANSMISSION-SIG")
        try:
            event_id = str(json.loads(body).get("id") or "")
        except (ValueError, AttributeError):
            event_id = ""
        return Verified(dedupe_key=event_id or body_digest(body))

    def challenge(self, *, params) -> str | None:
        return None  # PayPal makes no subscription check

    def process(self, webhook) -> str:
        try:
            event = json.loads(bytes(webhook.body))
            kind = str(event["event_type"])
            resource = event["resource"]
            batch_id = str(resource["payout_batch_id"])
            sender_item_id = str(resource["payout_item"]["sender_item_id"])
        except (ValueError, KeyError, TypeError):
            raise InvalidInput("The body is not a payouts item event.", code="webhook_invalid")
        if not kind.startswith("PAYMENT.PAYOUTS-ITEM."):
            return InboundStatus.IGNORED
        changed = paypal_item_event_apply(rail=PAYPAL_RAIL, sender_item_id=sender_item_id, batch_id=batch_id)
        return InboundStatus.PROCESSED if changed else InboundStatus.IGNORED


handler = PayPalHandler()
