"""Outbound WhatsApp: template messages through the WhatsApp Cloud API, and a fake.

A business may start a conversation only with an approved template, so every notice is one:
``POST {WHATSAPP_API_BASE_URL}/{WHATSAPP_API_VERSION}/{WHATSAPP_PHONE_NUMBER_ID}/messages`` with
``Authorization: Bearer {WHATSAPP_ACCESS_TOKEN}`` and::

    {"messaging_product": "whatsapp", "recipient_type": "individual", "to": "<digits>",
     "type": "template", "template": {"name": ..., "language": {"code": "en" | "it"},
       "components": [{"type": "body", "parameters": [{"type": "text", "text": ...}, ...]},
                      {"type": "button", "sub_type": "url", "index": "0",
                       "parameters": [{"type": "text", "text": "<link suffix>"}]}]}}

The answer carries ``{"messages": [{"id": "wamid…"}]}``; an error ``{"error": {"code", "message",
"type", "error_data", "fbtrace_id"}}``, to be handled by its ``code`` (Meta's advice: titles and
HTTP statuses change). Which codes are worth another try is ``RETRYABLE_CODES``: throttling, Meta's
own outages, and our own set-up (an expired token, a locked account, an unpaid bill — the message
is fine and goes once an operator fixes it). Every other code is about this message or this
person (undeliverable, not on WhatsApp, template or parameter errors): final.

The Cloud API takes no idempotency key, so a call whose answer is lost may have been delivered:
the notice outbox retries it (at least once), never the sender.
"""

import json
import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from core.http import HttpUnreachable, http_call

logger = logging.getLogger(__name__)

# Throttling (4 app calls, 80007 account, 130429 throughput, 131048 spam rate, 131056 pair rate)
# and Meta's outages (1, 2, 131000, 131016, 133004).
TRANSIENT_CODES = frozenset({1, 2, 4, 80007, 130429, 131000, 131016, 131048, 131056, 133004})
# Our set-up: auth (0, 190), permissions (3, 10, 200-299), a temporary policy block (368), the
# account locked or unpaid (131031, 131042).
SETUP_CODES = frozenset({0, 3, 10, 190, 368, 131031, 131042} | set(range(200, 300)))
RETRYABLE_CODES = TRANSIENT_CODES | SETUP_CODES


@dataclass(frozen=True)
class TemplateMessage:
    to: str  # E.164, with or without the +
    template: str
    language: str  # "en" | "it"
    parameters: tuple[str, ...]  # the body's {{1}}, {{2}} … in order
    button_suffix: str = ""  # the URL button's dynamic part; "" for a template without one


class WhatsAppSendError(Exception):
    """The message was not accepted. ``retryable``: another try may succeed; else final."""

    def __init__(self, message: str, *, code: str, retryable: bool):
        super().__init__(message)
        self.code = code
        self.retryable = retryable


class WhatsAppSender(Protocol):
    def send_template(self, message: TemplateMessage) -> str:
        """Send an approved template message; return the provider's message id.
        Raises WhatsAppSendError."""


def whatsapp_sender() -> WhatsAppSender:
    """The configured sender (``PAYOUT_WHATSAPP_SENDER``, a dotted path)."""
    return import_string(settings.PAYOUT_WHATSAPP_SENDER)()


def message_body(message: TemplateMessage) -> dict:
    components = [{"type": "body", "parameters": [{"type": "text", "text": p} for p in message.parameters]}]
    if message.button_suffix:
        components.append(
            {
                "type": "button",
                "sub_type": "url",
                "index": "0",
                "parameters": [{"type": "text", "text": message.button_suffix}],
            }
        )
    return {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "".join(ch for ch in message.to if ch.isdigit()),
        "type": "template",
        "template": {"name": message.template, "language": {"code": message.language}, "components": components},
    }


class CloudApiSender:
    """The WhatsApp Cloud API (settings ``WHATSAPP_*``; raises ImproperlyConfigured without a
    token or a phone number id)."""

    def __init__(self) -> None:
        self.base_url = settings.WHATSAPP_API_BASE_URL.rstrip("/")
        self.version = settings.WHATSAPP_API_VERSION
        self.phone_number_id = settings.WHATSAPP_PHONE_NUMBER_ID
        self.token = settings.WHATSAPP_ACCESS_TOKEN
        self.timeout = settings.WHATSAPP_TIMEOUT_SECONDS
        if not (self.token and self.phone_number_id):
            raise ImproperlyConfigured("Set WHATSAPP_ACCESS_TOKEN and WHATSAPP_PHONE_NUMBER_ID to send WhatsApp.")

    def send_template(self, message: TemplateMessage) -> str:
        try:
            answer = http_call(
                method="POST",
                url=f"{self.base_url}/{self.version}/{self.phone_number_id}/messages",
                body=json.dumps(message_body(message)).encode(),
                headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
                timeout=self.timeout,
            )
        except HttpUnreachable as exc:
            raise WhatsAppSendError(f"WhatsApp unreachable: {exc}", code="connection", retryable=True) from exc
        if answer.status >= 400:
            raise _error(answer.status, answer.body)
        raw = answer.body
        try:
            return str(json.loads(raw)["messages"][0]["id"])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            # Accepted (2xx) but unreadable: the message may be out; a retry is the outbox's call.
            raise WhatsAppSendError(
                "WhatsApp answered 2xx without a message id.", code="bad_response", retryable=True
            ) from exc


def _error(status: int, raw: bytes) -> WhatsAppSendError:
    try:
        error = json.loads(raw)["error"]
        code = int(error["code"])
    except (ValueError, KeyError, TypeError):
        return WhatsAppSendError(f"WhatsApp HTTP {status}", code=f"http_{status}", retryable=status >= 500)
    title = str(error.get("message", ""))[:150]
    if code in SETUP_CODES:
        # Every message waits until an operator fixes the set-up: say so loudly, once per refusal.
        logger.error("WhatsApp refuses our requests (code %s): %s", code, title)
    retryable = code in RETRYABLE_CODES or status >= 500
    return WhatsAppSendError(title or f"WhatsApp error {code}", code=str(code), retryable=retryable)


class FakeWhatsAppSender:
    """Tests and the demo: records messages in memory (class-wide, so tests read what tasks
    sent) and logs the template of each (the number masked, as every log line)."""

    sent: list[TemplateMessage] = []
    _lock = threading.Lock()

    def send_template(self, message: TemplateMessage) -> str:
        with self._lock:
            self.sent.append(message)
            number = len(self.sent)
        logger.info("fake WhatsApp: template %s (%s) to %s", message.template, message.language, message.to)
        return f"fake-wamid-{number}"

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls.sent.clear()
