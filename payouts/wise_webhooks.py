"""Wise ``transfers#state-change`` webhooks: move the payout the transfer belongs to.

Verified with Wise's RSA public key (``payouts.rails.psp_api.verify_webhook_signature``) before
anything is stored; de-duplicated by Wise's ``X-Delivery-Id``. Processing maps Wise's state like a
status poll would (``WiseRail.status_from_state``) and drives the payout there with
``payout_rail_status_apply`` — the same state machine and ledger entries as the poller, so a
webhook and a poll that both report "settled" settle once.
"""

import json
import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.exceptions import InvalidInput, InvalidTransition
from core.models import InboundStatus
from core.webhooks_in import Rejected, Verified, body_digest
from payouts.models import Payout, PayoutStatus
from payouts.rails.base import RailStatus, StatusResult
from payouts.rails.psp_api import WiseRail, verify_webhook_signature
from payouts.services.states import drive, payout_lock

logger = logging.getLogger(__name__)

RAIL = "psp_api"
_TARGET = {
    RailStatus.SUBMITTED: PayoutStatus.SUBMITTED,
    RailStatus.SETTLED: PayoutStatus.SETTLED,
    RailStatus.FAILED: PayoutStatus.FAILED,
    RailStatus.RETURNED: PayoutStatus.RETURNED,
}


def _public_key() -> str:
    return ((getattr(settings, "PAYOUT_RAILS", {}).get(RAIL) or {}).get("OPTIONS") or {}).get(
        "webhook_public_key_pem", ""
    )


def payout_rail_status_apply(*, rail: str, known: StatusResult, via: str = "webhook") -> bool:
    """Move the payout whose rail reference is ``known.rail_reference`` to what the rail says.
    Returns True when it changed. Unknown transfers, pending states and moves the state machine
    refuses (e.g. settled → submitted) change nothing. One durable transaction, payout row locked."""
    target = _TARGET.get(known.status)
    payout_id = (
        Payout.objects.filter(rail=rail, rail_reference=known.rail_reference).values_list("id", flat=True).first()
    )
    if target is None or payout_id is None:
        return False
    with transaction.atomic(durable=True):
        payout = payout_lock(payout_id)
        try:
            return drive(
                payout,
                target=target,
                now=timezone.now(),
                via=via,
                reason_code=known.reason_code or "",
                reason_text=known.reason_text or "",
                rail_reference=known.rail_reference or "",
            )
        except InvalidTransition:
            logger.warning("payout %s: Wise says %s, which does not follow %s", payout_id, known.status, payout.status)
            return False


class WiseHandler:
    provider = "wise"
    headers = ("x-signature-sha256", "x-delivery-id", "x-test-notification")

    def verify(self, *, body: bytes, headers) -> Verified | Rejected:
        key = _public_key()
        if not key:
            return Rejected("no Wise webhook public key configured")
        if not verify_webhook_signature(body=body, signature=headers.get("X-Signature-SHA256", ""), public_key_pem=key):
            return Rejected("bad X-Signature-SHA256")
        return Verified(dedupe_key=headers.get("X-Delivery-Id") or body_digest(body))

    def challenge(self, *, params) -> str | None:
        return None  # Wise checks a subscription by a signed test delivery (POST)

    def process(self, webhook) -> str:
        try:
            data = json.loads(bytes(webhook.body))["data"]
            transfer_id, state = str(int(data["resource"]["id"])), str(data["current_state"])
        except (ValueError, KeyError, TypeError):
            raise InvalidInput("The body is not a transfer state change.", code="webhook_invalid")
        changed = payout_rail_status_apply(rail=RAIL, known=WiseRail.status_from_state(transfer_id, state))
        return InboundStatus.PROCESSED if changed else InboundStatus.IGNORED


handler = WiseHandler()
