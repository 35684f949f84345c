"""WhatsApp Cloud API: the opt-in by one-time code.

The claim page shows a code (``whatsapp_optin_code_issue``, tied to the browser session that asked
for it); the person sends it from WhatsApp to
the brand's business number; Meta posts the message to our webhook, signed with
``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>``. A message carrying a valid
code proves the sender owns the number: ``whatsapp_optin_redeem`` resolves the person by that
number and ingests a ``whatsapp_optin`` event (source ``whatsapp``, external id ``wa:<message id>``,
so a redelivered message never pays twice). The browser that asked for the code then gets the
payout form of the reward, once (``whatsapp_optin_hand_over``): the code is spent.
"""

import hashlib
import hmac
import json
import logging
import re
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from campaigns.services import EventInput, event_ingest
from core.exceptions import InvalidInput
from core.models import InboundStatus
from core.webhooks_in import Rejected, Verified, body_digest
from payouts.links import PAYOUT_SALT, Link, link_make
from recipients.models_claims import WhatsAppOptInCode
from recipients.services import IdentityInput, person_resolve

logger = logging.getLogger(__name__)

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: people type these codes
CODE_PATTERN = re.compile(r"\bJB[A-HJKMNP-Z2-9]{6}\b", re.IGNORECASE)


# --- codes ---------------------------------------------------------------------------------------


def _starter_hash(starter: str) -> str:
    return hashlib.sha256(starter.encode()).hexdigest()


def whatsapp_optin_code_issue(
    *, campaign, starter: str = "", ttl: timedelta = timedelta(hours=24)
) -> WhatsAppOptInCode:
    """A fresh one-time code (``JB`` + 6 characters) for ``campaign``, valid for ``ttl``, that only
    the browser holding ``starter`` (a secret in its session) may follow to the payout form; with
    none (a code issued outside a browser) no page follows it."""
    now = timezone.now()
    for _ in range(5):
        code = "JB" + "".join(secrets.choice(CODE_ALPHABET) for _ in range(6))
        with transaction.atomic():
            if not WhatsAppOptInCode.objects.filter(code=code).exists():
                return WhatsAppOptInCode.objects.create(
                    code=code,
                    campaign=campaign,
                    created_at=now,
                    expires_at=now + ttl,
                    starter_hash=_starter_hash(starter) if starter else "",
                )
    raise InvalidInput("Could not draw a unique code.", code="code_exhausted")


def whatsapp_optin_started_by(row: WhatsAppOptInCode, *, starter: str) -> bool:
    """Did the browser holding ``starter`` ask for this code?"""
    return bool(starter and row.starter_hash) and hmac.compare_digest(row.starter_hash, _starter_hash(starter))


def whatsapp_optin_hand_over(*, row: WhatsAppOptInCode, starter: str, reward_id: int) -> Link | None:
    """Spend the redeemed ``row`` (a conditional UPDATE of ``spent_at``) and make the payout-form
    link of ``reward_id`` for the browser that started it, in one transaction: a code hands over
    one link, once. None when it was spent before or ``starter`` is not that browser's."""
    if not whatsapp_optin_started_by(row, starter=starter):
        return None
    now = timezone.now()
    with transaction.atomic():
        spent = WhatsAppOptInCode.objects.filter(
            pk=row.pk, used_at__isnull=False, spent_at__isnull=True, starter_hash=row.starter_hash
        ).update(spent_at=now)
        if spent != 1:
            return None
        return link_make(PAYOUT_SALT, reward_id)


def whatsapp_optin_redeem(*, code: str, wa_number: str, message_id: str, name: str = "", now: datetime | None = None):
    """Redeem ``code`` sent by ``wa_number`` in message ``message_id``: mark the code used by
    that person and message, then ingest the opt-in event. Returns the IngestResult, or None when
    the code is unknown, expired or used by another message.

    Idempotent per message: a redelivery finds the code used by the same message and ingests
    again, which replays the first outcome. Raises InvalidInput for an unusable number.
    Transactions: the claim (person + code) is one durable transaction; the ingestion another."""
    now = now or timezone.now()
    row = WhatsAppOptInCode.objects.select_related("campaign__brand").filter(code=code.upper()).first()
    if row is None:
        return None
    number = "+" + wa_number.lstrip("+")
    if row.used_at is None:
        if row.expires_at <= now:
            return None
        with transaction.atomic(durable=True):
            # The signed inbound message proves the number: it may find the brand's person.
            person = person_resolve(
                brand_id=row.campaign.brand_id,
                identity=IdentityInput(whatsapp=number, name=name, proven=frozenset({"whatsapp"})),
                source="whatsapp",
            )
            claimed = WhatsAppOptInCode.objects.filter(pk=row.pk, used_at__isnull=True, expires_at__gt=now).update(
                used_at=now, used_message_id=message_id, person=person
            )
        if claimed != 1:
            row.refresh_from_db()
    if row.used_at is not None and row.used_message_id != message_id:
        return None
    campaign = row.campaign
    return event_ingest(
        brand=campaign.brand,
        payload=EventInput(
            external_id=f"wa:{message_id}",
            campaign=campaign.slug,
            type="whatsapp_optin",
            source="whatsapp",
            whatsapp=number,
            name=name,
            evidence={"message_id": message_id, "code": row.code},
        ),
    )


# --- the webhook ---------------------------------------------------------------------------------


def _messages(payload: dict):
    """(message, sender name) for every inbound message in a Cloud API notification."""
    for entry in payload.get("entry") or []:
        for change in entry.get("changes") or []:
            value = change.get("value") or {}
            names = {c.get("wa_id"): (c.get("profile") or {}).get("name", "") for c in value.get("contacts") or []}
            for message in value.get("messages") or []:
                yield message, names.get(message.get("from"), "")


class WhatsAppHandler:
    provider = "whatsapp"

    def verify(self, *, body: bytes, headers) -> Verified | Rejected:
        secret = settings.WHATSAPP_APP_SECRET
        if not secret:
            return Rejected("WHATSAPP_APP_SECRET is not configured")
        header = headers.get("X-Hub-Signature-256", "")
        if not header.startswith("sha256="):
            return Rejected("no X-Hub-Signature-256")
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, header[len("sha256=") :].strip().lower()):
            return Rejected("bad X-Hub-Signature-256")
        try:
            ids = sorted(str(m.get("id")) for m, _ in _messages(json.loads(body)))
        except (ValueError, AttributeError, TypeError):
            ids = []
        key = "msg:" + ",".join(ids) if ids else body_digest(body)
        return Verified(dedupe_key=key if len(key) <= 255 else body_digest(body))

    def process(self, webhook) -> str:
        try:
            payload = json.loads(bytes(webhook.body))
        except ValueError:
            raise InvalidInput("The body is not JSON.", code="webhook_invalid")
        if not isinstance(payload, dict):
            raise InvalidInput("The body is not a notification.", code="webhook_invalid")
        redeemed = 0
        for message, name in _messages(payload):
            if message.get("type") != "text":
                continue
            text = (message.get("text") or {}).get("body", "")
            for code in CODE_PATTERN.findall(text):
                result = whatsapp_optin_redeem(
                    code=code, wa_number=str(message.get("from", "")), message_id=str(message.get("id", "")), name=name
                )
                if result is not None:
                    redeemed += 1
                    break
        return InboundStatus.PROCESSED if redeemed else InboundStatus.IGNORED


handler = WhatsAppHandler()


__all__ = [
    "handler",
    "whatsapp_optin_code_issue",
    "whatsapp_optin_hand_over",
    "whatsapp_optin_redeem",
    "whatsapp_optin_started_by",
]
