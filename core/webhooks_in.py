"""Inbound webhooks (WhatsApp, TikTok, the PSP): verify, store raw, acknowledge, process later.

The view verifies the provider's signature over the raw body *before* anything is written: a
forged or stale delivery gets 401 and leaves only a line on the ``security`` logger. A verified
one is stored (``InboundWebhook``: headers, raw body) and acknowledged at once; a task processes
it (``inbound_webhook_process``) with the provider's handler. ``(provider, dedupe_key)`` is unique,
so a redelivery is acknowledged without a second processing.

The handler registry. Each provider's app registers its handler in its ``AppConfig.ready``
(``inbound_handler_register``: the social platforms, TikTok and WhatsApp, by campaigns; Wise and
PayPal by payouts), an object with ``verify(body=, headers=) -> Verified | Rejected``,
``process(webhook) -> str`` (the final status: processed or ignored), the ``headers`` worth
keeping with the body (its signature and delivery-id headers) and ``challenge(params=)`` for a
provider's subscription check (a GET; None refuses). One door serves them all,
``/api/webhooks/<provider>/`` (``InboundWebhookView``): a provider is reachable once its handler
is registered, and a name nobody registered is a 404. The stored rows name their provider by the
same string.
"""

import hashlib
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from core.exceptions import ApplicationError
from core.models import InboundStatus, InboundWebhook
from core.queue import enqueue

security_logger = logging.getLogger("security")
logger = logging.getLogger(__name__)

# Headers kept with every body, besides each handler's own (signatures, delivery ids); never
# cookies or authorisation.
KEPT_HEADERS = ("content-type", "user-agent")
MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class Verified:
    dedupe_key: str


@dataclass(frozen=True)
class Rejected:
    reason: str


class WebhookHandler(Protocol):
    headers: tuple[str, ...]  # lower-case names kept with the body, as the processing reads them

    def verify(self, *, body: bytes, headers) -> Verified | Rejected: ...

    def process(self, webhook: InboundWebhook) -> str: ...

    def challenge(self, *, params) -> str | None: ...


_HANDLERS: dict[str, WebhookHandler] = {}


def inbound_handler_register(provider: str, handler: WebhookHandler) -> None:
    """Route ``provider``'s deliveries to ``handler`` (its app's ``AppConfig.ready``)."""
    _HANDLERS[provider] = handler


def _handler(provider: str) -> WebhookHandler:
    return _HANDLERS[provider]


def inbound_providers() -> list[str]:
    """Every provider with a registered handler (the admin's filter, the door's 404)."""
    return sorted(_HANDLERS)


def body_digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _problem(status: int, code: str, detail: str) -> JsonResponse:
    return JsonResponse(
        {
            "type": f"urn:joyback:problem:{code}",
            "title": code.replace("_", " ").capitalize(),
            "status": status,
            "detail": detail,
            "code": code,
        },  # fmt: skip
        status=status,
        content_type="application/problem+json",
    )


def inbound_webhook_store(*, provider: str, dedupe_key: str, headers: dict, body: bytes) -> tuple[InboundWebhook, bool]:
    """Store a verified delivery and enqueue its processing with it. Returns (row, created);
    a duplicate (same provider and dedupe key) returns the first row and enqueues nothing."""
    try:
        with transaction.atomic():
            webhook = InboundWebhook.objects.create(
                provider=provider, dedupe_key=dedupe_key[:255], headers=headers, body=body, received_at=timezone.now()
            )
            enqueue("core.tasks.inbound_webhook_process_task", webhook.pk)
    except IntegrityError:
        return InboundWebhook.objects.get(provider=provider, dedupe_key=dedupe_key[:255]), False
    return webhook, True


def inbound_webhook_process(*, webhook_id: int) -> str:
    """Process one stored delivery with its provider's handler. Claimed by a conditional UPDATE
    (received or failed → processing), so two workers never process it at once. Returns the final
    status. A handler's ApplicationError (bad content) is final; any other error is recorded and
    the sweep retries it up to MAX_ATTEMPTS times."""
    claimed = InboundWebhook.objects.filter(
        pk=webhook_id, status__in=(InboundStatus.RECEIVED, InboundStatus.FAILED), attempts__lt=MAX_ATTEMPTS
    ).update(status=InboundStatus.PROCESSING, attempts=F("attempts") + 1)
    if claimed != 1:
        return "skipped"
    webhook = InboundWebhook.objects.get(pk=webhook_id)
    try:
        status = _handler(webhook.provider).process(webhook)
        error = ""
    except ApplicationError as exc:
        status, error = InboundStatus.FAILED, f"{exc.code}: {exc.message}"
        InboundWebhook.objects.filter(pk=webhook_id).update(attempts=MAX_ATTEMPTS)
    except Exception as exc:
        logger.exception("inbound %s webhook %s failed", webhook.provider, webhook_id)
        status, error = InboundStatus.FAILED, f"{type(exc).__name__}: {exc}"
    InboundWebhook.objects.filter(pk=webhook_id).update(status=status, processed_at=timezone.now(), error=error[:2000])
    return status


def inbound_webhooks_retry(*, now=None, limit: int = 200) -> int:
    """Re-enqueue failed deliveries that may still succeed and ones stuck in processing."""
    now = now or timezone.now()
    InboundWebhook.objects.filter(
        status=InboundStatus.PROCESSING, received_at__lt=now - timedelta(minutes=10), attempts__lt=MAX_ATTEMPTS
    ).update(status=InboundStatus.FAILED)
    ids = list(
        InboundWebhook.objects.filter(
            status__in=(InboundStatus.RECEIVED, InboundStatus.FAILED),
            attempts__lt=MAX_ATTEMPTS,
            received_at__lt=now - timedelta(minutes=1),
        ).values_list("id", flat=True)[:limit]
    )
    for webhook_id in ids:
        enqueue("core.tasks.inbound_webhook_process_task", webhook_id)
    return len(ids)


@method_decorator(csrf_exempt, name="dispatch")
class InboundWebhookView(View):
    """The door of every provider (``/api/webhooks/<provider>/``). POST: verify, store,
    acknowledge. GET: the provider's subscription check, when it has one (WhatsApp's)."""

    http_method_names = ["get", "post"]

    def dispatch(self, request, *args, provider: str = "", **kwargs):
        if provider not in _HANDLERS:
            return _problem(404, "not_found", "No such webhook.")
        return super().dispatch(request, *args, provider=provider, **kwargs)

    def get(self, request, *, provider: str):
        answer = _handler(provider).challenge(params=request.GET)
        if answer is None:
            security_logger.warning(
                "inbound %s subscription check refused (mode %r)", provider, request.GET.get("hub.mode", "")
            )
            return HttpResponse(status=403)
        return HttpResponse(answer, content_type="text/plain")

    def post(self, request, *, provider: str):
        length = request.META.get("CONTENT_LENGTH") or "0"
        if length.isdigit() and int(length) > settings.WEBHOOK_IN_MAX_BYTES:
            return _problem(413, "payload_too_large", "The body is too large.")
        body = request.body
        handler = _handler(provider)
        verdict = handler.verify(body=body, headers=request.headers)
        if isinstance(verdict, Rejected):
            security_logger.warning(
                "inbound %s webhook rejected (%s) from %s, %d bytes",
                provider,
                verdict.reason,
                request.META.get("REMOTE_ADDR", "?"),
                len(body),
            )
            return _problem(401, "invalid_signature", "The signature is missing, wrong or too old.")
        kept = (*KEPT_HEADERS, *handler.headers)
        headers = {k: v for k, v in request.headers.items() if k.lower() in kept}
        webhook, created = inbound_webhook_store(
            provider=provider, dedupe_key=verdict.dedupe_key, headers=headers, body=body
        )
        return JsonResponse({"received": True, "duplicate": not created, "id": webhook.pk})

    def http_method_not_allowed(self, request, *args, **kwargs):
        # Under /api/ every answer is problem+json, a refused method too.
        allowed = ", ".join(m.upper() for m in self._allowed_methods())
        response = _problem(405, "method_not_allowed", f"{request.method} is not allowed here; use {allowed}.")
        response["Allow"] = allowed
        return response
