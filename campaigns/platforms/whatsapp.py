"""WhatsApp, one ``Platform``: the opt-in by one-time code (the identity proof), the Cloud API's
signed webhook, and the production checks of its inbound and outbound settings.

The claim page shows a code (``whatsapp_optin_code_issue``, tied to the browser session that asked
for it); the person sends it from WhatsApp to the brand's business number (a click-to-chat link,
``recipients.whatsapp_link``); Meta posts the message to our webhook, signed with
``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>``. A message carrying a valid
code proves the sender owns the number: ``whatsapp_optin_redeem`` resolves the person by that
number and ingests a ``whatsapp_optin`` event (source ``whatsapp``, external id ``wa:<message id>``,
so a redelivered message never pays twice). The browser that asked for the code then gets the
payout form of the reward, once (the claim pages hand it over).

A person withdraws the opt-in by sending a stop word (``STOP``, ``ARRET`` …: the whole message)
to the same number: ``whatsapp_optin_withdraw`` records it and voids the pending opt-in rewards
of that number (``campaigns.services.undone``); it is the one entry point for a withdrawal, whichever
door it comes through.

Outbound notices (approved templates through the Cloud API) are sent by
``recipients.whatsapp_cloud``, below this app, since the notice outbox lives there; their checks
are here with the rest of WhatsApp's. The fakes: ``FakeWhatsAppSender`` for outbound messages and,
in the demo (``FAKE_WHATSAPP_ENABLED``), a button on the claim page that plays the inbound message.
Settings: ``WHATSAPP_*``, ``PAYOUT_WHATSAPP_SENDER``, ``FAKE_WHATSAPP_ENABLED``.
"""

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core import checks
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from campaigns.models import UndoneReason
from campaigns.platforms.base import ActionCheck, InboundEvent, Platform, json_object
from campaigns.selectors import action_withdrawn_since
from campaigns.services import EventInput, event_ingest
from campaigns.services.undone import WithdrawOutcome, action_withdraw
from campaigns.triggers import trigger_evidence
from core.exceptions import InvalidInput
from core.models import InboundStatus
from core.webhooks_in import Rejected, Verified, body_digest
from recipients.models_claims import WhatsAppOptInCode
from recipients.services import IdentityInput, person_resolve
from recipients.services.consent import consents_withdraw_by_whatsapp

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: people type these codes
CODE_PATTERN = re.compile(r"\bJB[A-HJKMNP-Z2-9]{6}\b", re.IGNORECASE)
# A message that is only one of these words withdraws the opt-in (WhatsApp's own opt-out words
# and their Italian and French kin; case and a trailing "." or "!" ignored).
STOP_WORDS = frozenset({"stop", "stopp", "arret", "arrêt", "unsubscribe", "disiscriviti"})


# --- the opt-in code -----------------------------------------------------------------------------


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
            evidence=trigger_evidence("whatsapp_optin", message_id=message_id, code=row.code),
        ),
    )


# --- withdrawing the opt-in ---------------------------------------------------------------------


def _number(wa_number: str) -> str:
    return "+" + wa_number.strip().lstrip("+")


def whatsapp_is_stop(text: str) -> bool:
    """Is the whole message a stop word?"""
    return text.strip().strip(".!").casefold() in STOP_WORDS


def whatsapp_optin_withdraw(*, wa_number: str, ref: str, at: datetime | None = None) -> WithdrawOutcome:
    """The person behind ``wa_number`` withdrew their WhatsApp opt-in at ``at`` (a STOP message,
    ``ref`` its message id; or any other withdrawal of consent to WhatsApp contact, with a
    reference of its own): record it and void the pending ``whatsapp_optin`` rewards of that number
    earned before it, in every campaign whose undo settings say so; a reward already payable or
    paid is noted, not voided. Idempotent per ``ref``. See ``campaigns.services.undone.action_withdraw``."""
    return action_withdraw(
        platform="whatsapp",
        uid=_number(wa_number),
        kind=UndoneReason.OPTIN_WITHDRAWN,
        occurred_at=at or timezone.now(),
        ref=ref,
    )


def whatsapp_action_recheck(*, action: ActionCheck) -> list[str]:
    """An opt-in stands until the number withdraws it (a STOP recorded since): Meta has no API to
    ask, so what the number told us is the answer."""
    if action.uid and action_withdrawn_since(
        platform="whatsapp", uid=_number(action.uid), kind=UndoneReason.OPTIN_WITHDRAWN, since=action.occurred_at
    ):
        return [UndoneReason.OPTIN_WITHDRAWN]
    return []


# --- the webhook ---------------------------------------------------------------------------------


def _messages(payload: dict):
    """(message, sender name) for every inbound message in a Cloud API notification."""
    for entry in payload.get("entry") or []:
        for change in entry.get("changes") or []:
            value = change.get("value") or {}
            names = {c.get("wa_id"): (c.get("profile") or {}).get("name", "") for c in value.get("contacts") or []}
            for message in value.get("messages") or []:
                yield message, names.get(message.get("from"), "")


def whatsapp_webhook_verify(*, body: bytes, headers: Mapping[str, str]) -> Verified | Rejected:
    """The app secret's signature over the raw body; the dedupe key names the messages it carries
    (Meta may redeliver them in another notification)."""
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


def whatsapp_webhook_events(*, body: bytes) -> list[InboundEvent]:
    """Every inbound message of a notification (``kind`` is the message type). Raises InvalidInput
    for a body that is not a notification."""
    payload = json_object(body, what="a notification")
    return [
        InboundEvent(
            kind=str(message.get("type", "")),
            uid=str(message.get("from", "")),
            ref=str(message.get("id", "")),
            name=name,
            text=(message.get("text") or {}).get("body", "") if message.get("type") == "text" else "",
            data={"timestamp": str(message["timestamp"])} if message.get("timestamp") else {},
        )
        for message, name in _messages(payload)
    ]


def whatsapp_webhook_handle(*, webhook_id: int, events: list[InboundEvent]) -> str:
    """Withdraw the opt-in of a number whose text message is a stop word; redeem the first valid
    opt-in code of each other text message: processed when either happened."""
    redeemed = 0
    for event in events:
        if event.kind != "text":
            continue
        if whatsapp_is_stop(event.text):
            stamp = event.data.get("timestamp", "")
            at = datetime.fromtimestamp(int(stamp), UTC) if stamp.isdigit() else None
            whatsapp_optin_withdraw(wa_number=event.uid, ref=event.ref, at=at)
            # The number is ours: a STOP also ends every marketing consent given through it, from
            # now (the message's own time is to the second: a consent given in that second, or a
            # delayed STOP, must still end — the safe side).
            consents_withdraw_by_whatsapp(number=_number(event.uid))
            redeemed += 1
            continue
        for code in CODE_PATTERN.findall(event.text):
            result = whatsapp_optin_redeem(code=code, wa_number=event.uid, message_id=event.ref, name=event.name)
            if result is not None:
                redeemed += 1
                break
    return InboundStatus.PROCESSED if redeemed else InboundStatus.IGNORED


def whatsapp_webhook_challenge(*, params: Mapping[str, str]) -> str | None:
    """Meta's subscription check: ``hub.challenge`` when the verify token matches, else None."""
    token = settings.WHATSAPP_VERIFY_TOKEN
    mode, given = params.get("hub.mode", ""), params.get("hub.verify_token", "")
    if token and mode == "subscribe" and hmac.compare_digest(given.encode(), token.encode()):
        return params.get("hub.challenge", "")
    return None


# --- production checks ---------------------------------------------------------------------------

FAKE_WHATSAPP_SENDER = "recipients.whatsapp_cloud.FakeWhatsAppSender"
CLOUD_API_WHATSAPP_SENDER = "recipients.whatsapp_cloud.CloudApiSender"


def _importable(path: str) -> bool:
    try:
        import_string(path)
    except ImportError:
        return False
    return True


def _cloud_api_settings() -> list[checks.CheckMessage]:
    missing = [
        name for name in ("WHATSAPP_PHONE_NUMBER_ID", "WHATSAPP_ACCESS_TOKEN") if not getattr(settings, name, "")
    ]
    if not str(getattr(settings, "WHATSAPP_API_BASE_URL", "")).startswith("https://"):
        missing.append("WHATSAPP_API_BASE_URL (https)")
    if not missing:
        return []
    return [
        checks.Error(
            "The WhatsApp Cloud API sender is missing its settings: people would never hear of their money.",
            hint=f"Set {', '.join(missing)}.",
            id="core.E123",
        )
    ]


def whatsapp_production_checks() -> list[checks.CheckMessage]:
    problems = []
    sender = getattr(settings, "PAYOUT_WHATSAPP_SENDER", FAKE_WHATSAPP_SENDER)
    if sender == FAKE_WHATSAPP_SENDER or not _importable(sender):
        problems.append(
            checks.Error(
                f"WhatsApp messages go to {sender!r}: the in-memory fake, or nothing that can be imported.",
                hint="Set WHATSAPP_PHONE_NUMBER_ID and WHATSAPP_ACCESS_TOKEN (the Cloud API sender).",
                id="core.E120",
            )
        )
    elif sender == CLOUD_API_WHATSAPP_SENDER:
        problems += _cloud_api_settings()
    if settings.FAKE_WHATSAPP_ENABLED:
        problems.append(
            checks.Error(
                "FAKE_WHATSAPP_ENABLED is on: anyone can play an opt-in message on the claim page.",
                hint="Unset FAKE_WHATSAPP_ENABLED.",
                id="core.E121",
            )
        )
    return problems


# --- the platform --------------------------------------------------------------------------------


class WhatsAppPlatform(Platform):
    name = "whatsapp"
    webhook_headers = ("x-hub-signature-256",)
    label = "WhatsApp"
    proof = "inbound_code"

    def action_recheck(self, *, action: ActionCheck) -> list[str]:
        return whatsapp_action_recheck(action=action)

    def webhook_verify(self, *, body: bytes, headers: Mapping[str, str]) -> Verified | Rejected:
        return whatsapp_webhook_verify(body=body, headers=headers)

    def webhook_events(self, *, body: bytes) -> list[InboundEvent]:
        return whatsapp_webhook_events(body=body)

    def webhook_handle(self, *, webhook_id: int, events: list[InboundEvent]) -> str:
        return whatsapp_webhook_handle(webhook_id=webhook_id, events=events)

    def webhook_challenge(self, *, params: Mapping[str, str]) -> str | None:
        return whatsapp_webhook_challenge(params=params)

    def production_checks(self) -> list[checks.CheckMessage]:
        return whatsapp_production_checks()
