"""PayPal Payouts (``/v1/payments/payouts``): payouts to a PayPal account named by its e-mail
address, paid from the platform's PayPal balance (ledger account ``platform:paypal:<currency>``).

Flow per payout, over HTTPS with an OAuth 2.0 client-credentials token
(``POST /v1/oauth2/token``, kept until shortly before it expires):

1. ``POST /v1/payments/payouts`` — a batch of one item. ``sender_batch_header.sender_batch_id``
   and the item's ``sender_item_id`` are the payout's ``end_to_end_id``, stored at creation,
   before any call; the ``PayPal-Request-Id`` header carries it too. PayPal pays a
   ``sender_batch_id`` once within 30 days: a repeat is refused with a link to the first batch,
   which the adapter follows (and checks is ours) and answers as the first submit did.
2. ``GET /v1/payments/payouts/{payout_batch_id}`` — the batch and its item; the item's
   ``transaction_status`` is the payout's state (``PAYPAL_STATUS_MAP``). The batch id is the
   rail reference; PayPal documents no look-up by ``sender_batch_id``, so a payout without one
   cannot be looked up (``Rail.finds_by_reference_only``): the engine submits it again instead
   (safe, as above) and never fails it blind.
3. An ``UNCLAIMED`` item (no PayPal account takes the address yet) has left our balance, so it
   counts as settled; once ``unclaimed_cancel_after_hours`` have passed the status look-up
   cancels it (``POST /v1/payments/payouts-item/{id}/cancel``, answered ``RETURNED``) so the
   money comes back and the person is asked for another destination, instead of PayPal's 30 days.
   Keep it below ``PAYOUT_RETURN_WATCH_HOURS``: settled payouts are polled that long.

Webhooks (``PAYMENT.PAYOUTS-ITEM.SUCCEEDED``, ``.UNCLAIMED``, ``.RETURNED``, ``.FAILED``,
``.BLOCKED``, ``.REFUNDED``, ``.REVERSED`` …, ``payouts.paypal_webhooks``) are verified offline
as PayPal documents: the ``PAYPAL-TRANSMISSION-SIG`` header is an RSA-SHA256 signature (``PAYPAL-
AUTH-ALGO`` ``SHA256withRSA``) over ``<transmission id>|<transmission time>|<our webhook id>|
<CRC32 of the raw body, decimal>``, checked with the public key of the certificate at
``PAYPAL-CERT-URL`` — fetched only over https from a PayPal API host (or from the configured
``base_url``'s host: the local fake), cached, refused once expired. A verified event is then not
trusted for its content: the handler asks the batch's status again (step 2) and moves the payout
by that answer, so a replayed or reordered event can only repeat what PayPal says now.

Errors: 5xx, 408, 429, 401/403 (our credentials, fixable by ops), timeouts, refused connections
and ``INSUFFICIENT_FUNDS`` (ops tops the balance up; the same batch id pays on retry) raise
``RetryableRailError``; other 4xx raise ``FinalRailError`` with an ISO reason code.
"""

import base64
import binascii
import hashlib
import json
import threading
import time
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from django.conf import settings
from django.core import checks
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured

from core.checks import production_checks_on
from core.http import HttpUnreachable, http_call
from core.money import minor_to_decimal
from payouts.rails.base import (
    Capabilities,
    FinalRailError,
    PayeeMatch,
    Rail,
    RailPayment,
    RailStatus,
    RetryableRailError,
    StatusResult,
    SubmitResult,
    SubmitStatus,
    VerifyPayeeResult,
    rail_http_call,
)
from recipients.normalise import PAYPAL

PAYPAL_RAIL = "paypal"
# PayPal's item ``transaction_status`` values (``transaction_enum``) as the engine's states.
PAYPAL_STATUS_MAP: dict[str, RailStatus] = {
    "PENDING": RailStatus.SUBMITTED,
    "ONHOLD": RailStatus.SUBMITTED,
    "NEW": RailStatus.SUBMITTED,
    "SUCCESS": RailStatus.SETTLED,
    "UNCLAIMED": RailStatus.SETTLED,  # left our balance; claimable by the person at PayPal
    "FAILED": RailStatus.FAILED,
    "BLOCKED": RailStatus.FAILED,
    "DENIED": RailStatus.FAILED,
    "RETURNED": RailStatus.RETURNED,
    "REFUNDED": RailStatus.RETURNED,
    "REVERSED": RailStatus.RETURNED,
}
_ITEM_REASONS: dict[str, tuple[str, str]] = {
    "FAILED": ("MS03", "PayPal could not pay this e-mail address."),
    "BLOCKED": ("RR04", "PayPal blocked the payment."),
    "DENIED": ("RR04", "PayPal denied the payment."),
    "RETURNED": ("AC01", "Nobody claimed the PayPal payment: the e-mail address has no PayPal account."),
    "REFUNDED": ("MS02", "The receiver sent the PayPal payment back."),
    "REVERSED": ("FRAD", "PayPal reversed the payment."),
}
# PayPal's error names on an item or a refused request, as ISO 20022 codes.
PAYPAL_ERROR_CODES: dict[str, str] = {
    "RECEIVER_ACCOUNT_LOCKED": "AC06",
    "RECEIVER_UNCONFIRMED": "AC01",
    "RECEIVER_UNREGISTERED": "AC01",
    "RECEIVER_COUNTRY_NOT_ALLOWED": "AG01",
    "RECEIVER_STATE_RESTRICTED": "AG01",
    "CURRENCY_NOT_SUPPORTED_FOR_RECEIVER": "AG01",
    "REGULATORY_BLOCKED": "RR04",
    "REGULATORY_PENDING": "RR04",
    "RISK_DECLINE": "FRAD",
    "INSUFFICIENT_FUNDS": "AM04",
    "VALIDATION_ERROR": "FF01",
}
# The currencies PayPal Payouts pays in (PayPal's "currency codes" list for payouts).
PAYPAL_CURRENCIES = frozenset(
    {"AUD", "BRL", "CAD", "CHF", "CZK", "DKK", "EUR", "GBP", "HKD", "HUF", "ILS", "JPY", "MXN", "NOK", "NZD",
     "PHP", "PLN", "SEK", "SGD", "THB", "USD"}
)  # fmt: skip
# Where PayPal serves webhook certificates: never fetch one from a host the request names freely.
PAYPAL_CERT_HOSTS = frozenset(
    {"api.paypal.com", "api-m.paypal.com", "api.sandbox.paypal.com", "api-m.sandbox.paypal.com"}
)
_RETRYABLE_HTTP = {401, 403, 408, 429}
_TOKEN_MARGIN_SECONDS = 60
_tokens: dict[tuple[str, str], tuple[str, float]] = {}
_tokens_lock = threading.Lock()


def _error_body(body: bytes) -> dict:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class PayPalPayoutsRail(Rail):
    name = PAYPAL_RAIL
    destination_kinds = frozenset({PAYPAL})
    funding_account_code_format = "platform:paypal:{currency}"
    finds_by_reference_only = True

    def __init__(
        self,
        *,
        base_url: str = "",
        client_id: str = "",
        client_secret: str = "",
        webhook_id: str = "",
        timeout_seconds: float = 10.0,
        unclaimed_cancel_after_hours: float = 24.0,
        max_amount_minor: int | None = None,
        email_subject: str = "You have a payout from JoyBack",
    ):
        if not (base_url and client_id and client_secret):
            raise ImproperlyConfigured("PAYOUT_RAILS['paypal']['OPTIONS'] needs base_url, client_id and client_secret.")
        self.base_url = base_url.rstrip("/")
        self.client_id = client_id
        self.client_secret = client_secret
        self.webhook_id = webhook_id
        self.timeout = timeout_seconds
        self.unclaimed_cancel_after = timedelta(hours=unclaimed_cancel_after_hours)
        self.max_amount_minor = max_amount_minor
        self.email_subject = email_subject

    # --- HTTP ----------------------------------------------------------------------------------

    def _token(self) -> str:
        """A client-credentials access token, reused until shortly before it expires."""
        key = (self.base_url, self.client_id)
        with _tokens_lock:
            token, expires = _tokens.get(key, ("", 0.0))
        if token and expires > time.monotonic():
            return token
        basic = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        answer = rail_http_call(
            provider="PayPal",
            method="POST",
            base_url=self.base_url,
            path="/v1/oauth2/token",
            body=b"grant_type=client_credentials",
            headers={
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            timeout=self.timeout,
        )
        if answer.status >= 400:
            raise RetryableRailError(
                f"PayPal refused our client credentials (HTTP {answer.status}).", rail_code="oauth_refused"
            )
        granted = _error_body(answer.body)
        if not granted.get("access_token"):
            raise RetryableRailError("PayPal sent no access token.", rail_code="bad_response")
        lifetime = float(granted.get("expires_in") or 0) - _TOKEN_MARGIN_SECONDS
        with _tokens_lock:
            _tokens[key] = (granted["access_token"], time.monotonic() + max(lifetime, 0))
        return granted["access_token"]

    def _request(self, method: str, path: str, payload: dict | None = None, *, request_id: str = "") -> Any:
        headers = {
            "Authorization": f"Bearer {self._token()}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        if request_id:
            headers["PayPal-Request-Id"] = request_id
        answer = rail_http_call(
            provider="PayPal",
            method=method,
            base_url=self.base_url,
            path=path,
            body=json.dumps(payload).encode() if payload is not None else None,
            headers=headers,
            timeout=self.timeout,
        )
        if answer.status == 401:
            with _tokens_lock:
                _tokens.pop((self.base_url, self.client_id), None)  # expired early: a new one next time
        if answer.status >= 400:
            self._raise_for_status(answer.status, answer.body, method, path)
        try:
            return json.loads(answer.body) if answer.body else None
        except ValueError as exc:
            raise RetryableRailError(
                f"PayPal sent a body that is not JSON on {method} {path}.", rail_code="bad_response"
            ) from exc

    @staticmethod
    def _raise_for_status(status: int, body: bytes, method: str, path: str):
        problem = _error_body(body)
        name = str(problem.get("name") or f"http_{status}")
        message = str(problem.get("message") or f"HTTP {status}")
        details = {"http_status": status, "name": name, "links": problem.get("links") or []}
        if status >= 500 or status in _RETRYABLE_HTTP or name == "INSUFFICIENT_FUNDS":
            raise RetryableRailError(
                f"PayPal answered {status} on {method} {path}: {message}.",
                reason_code=PAYPAL_ERROR_CODES.get(name),
                rail_code=name,
                details=details,
            )
        raise FinalRailError(
            f"PayPal refused {method} {path}: {message}.",
            reason_code=PAYPAL_ERROR_CODES.get(name, "MS03"),
            reason_text=f"PayPal: {message}",
            rail_code=name,
            details=details,
        )

    # --- the rail ------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        return Capabilities(
            currencies=PAYPAL_CURRENCIES,
            countries=None,  # an e-mail address has no country; PayPal applies its own rules
            instant=False,
            max_amount_minor=self.max_amount_minor,
            verify_payee=False,
            file_based=False,
            account_types=frozenset({PAYPAL}),
        )

    def verify_payee(self, *, name: str, iban: str) -> VerifyPayeeResult:
        # Verification of Payee is the EU's name-against-IBAN check: a PayPal account has none.
        return VerifyPayeeResult(outcome=PayeeMatch.NOT_POSSIBLE)

    def submit(self, payment: RailPayment) -> SubmitResult:
        if payment.creditor_email is None or not self.capabilities().supports(
            currency=payment.currency, country="", amount_minor=payment.amount_minor, account_type=payment.account_type
        ):
            raise FinalRailError(
                f"PayPal rail does not carry {payment.account_type} in {payment.currency}.",
                reason_code="AG01",
                rail_code="unsupported_route",
            )
        body = {
            "sender_batch_header": {
                "sender_batch_id": payment.end_to_end_id,
                "recipient_type": "EMAIL",
                "email_subject": self.email_subject,
            },
            "items": [
                {
                    "recipient_type": "EMAIL",
                    "recipient_wallet": "PAYPAL",
                    "amount": {
                        "value": str(minor_to_decimal(payment.amount_minor, payment.currency)),
                        "currency": payment.currency,
                    },
                    "receiver": payment.creditor_email,
                    "sender_item_id": payment.end_to_end_id,
                    "note": payment.remittance[:1000],
                }
            ],
        }
        try:
            created = self._request("POST", "/v1/payments/payouts", body, request_id=payment.end_to_end_id)
        except FinalRailError as exc:
            first = self._first_batch(exc, payment.end_to_end_id)
            if first is None:
                raise
            return self._submit_result(first, payment.end_to_end_id)
        return self._submit_result(created, payment.end_to_end_id)

    def _first_batch(self, exc: FinalRailError, sender_batch_id: str) -> dict | None:
        """The batch an earlier submit created, when PayPal refused this one as its repeat: the
        refusal links to it; it counts only if its ``sender_batch_id`` is ours."""
        for link in (exc.details or {}).get("links") or []:
            href = str((link or {}).get("href") or "")
            path = urlsplit(href).path
            if not path.startswith("/v1/payments/payouts/"):
                continue
            batch = self._request("GET", path)
            if self._batch_sender_id(batch) == sender_batch_id:
                return batch
        return None

    @staticmethod
    def _batch_sender_id(batch: dict | None) -> str:
        return str((((batch or {}).get("batch_header") or {}).get("sender_batch_header") or {}).get("sender_batch_id"))

    def _submit_result(self, batch: dict, sender_batch_id: str) -> SubmitResult:
        known = self._status_of(batch, sender_batch_id)
        if known.status == RailStatus.FAILED:
            raise FinalRailError(
                f"PayPal refused payout batch {known.rail_reference}.",
                reason_code=known.reason_code or "MS03",
                reason_text=known.reason_text,
                rail_code="batch_denied",
            )
        status = SubmitStatus.SETTLED if known.status == RailStatus.SETTLED else SubmitStatus.ACCEPTED
        return SubmitResult(status=status, rail_reference=known.rail_reference or "")

    def status(self, end_to_end_id: str, *, rail_reference: str | None = None) -> StatusResult:
        if not rail_reference:
            return StatusResult(status=RailStatus.UNKNOWN)
        try:
            batch = self._request("GET", f"/v1/payments/payouts/{rail_reference}")
        except FinalRailError as exc:
            if (exc.details or {}).get("http_status") == 404:
                return StatusResult(status=RailStatus.UNKNOWN)
            raise
        if self._batch_sender_id(batch) != end_to_end_id:
            raise FinalRailError(
                f"PayPal batch {rail_reference} belongs to another payout.",
                reason_code="MS03",
                rail_code="reference_mismatch",
            )
        known = self._status_of(batch, end_to_end_id)
        if known.status == RailStatus.SETTLED and self._unclaimed_too_long(batch, end_to_end_id):
            return self._unclaimed_cancel(batch, end_to_end_id)
        return known

    def _item(self, batch: dict, sender_item_id: str) -> dict | None:
        for item in batch.get("items") or []:
            if ((item or {}).get("payout_item") or {}).get("sender_item_id") == sender_item_id:
                return item
        return None

    def _status_of(self, batch: dict, sender_item_id: str) -> StatusResult:
        header = batch.get("batch_header") or {}
        reference = str(header.get("payout_batch_id") or "")
        if not reference:
            raise RetryableRailError("PayPal answered without a payout_batch_id.", rail_code="bad_response")
        if header.get("batch_status") in ("DENIED", "CANCELED"):
            return StatusResult(
                status=RailStatus.FAILED,
                rail_reference=reference,
                reason_code="MS03",
                reason_text=f"PayPal: the payout batch was {str(header['batch_status']).lower()}.",
            )
        item = self._item(batch, sender_item_id)
        if item is None:  # PayPal has not split the batch into items yet
            return StatusResult(status=RailStatus.SUBMITTED, rail_reference=reference)
        state = str(item.get("transaction_status") or "")
        status = PAYPAL_STATUS_MAP.get(state, RailStatus.SUBMITTED)
        if status in (RailStatus.FAILED, RailStatus.RETURNED):
            code, text = _ITEM_REASONS.get(state, ("MS03", f"PayPal: {state}"))
            error = str((item.get("errors") or {}).get("name") or "")
            return StatusResult(
                status=status,
                rail_reference=reference,
                reason_code=PAYPAL_ERROR_CODES.get(error, code),
                reason_text=text,
            )
        return StatusResult(status=status, rail_reference=reference)

    def _unclaimed_too_long(self, batch: dict, sender_item_id: str) -> bool:
        item = self._item(batch, sender_item_id) or {}
        if item.get("transaction_status") != "UNCLAIMED":
            return False
        since = item.get("time_processed") or (batch.get("batch_header") or {}).get("time_created")
        try:
            processed = datetime.fromisoformat(str(since).replace("Z", "+00:00"))
        except ValueError:
            return False
        return datetime.now(UTC) - processed >= self.unclaimed_cancel_after

    def _unclaimed_cancel(self, batch: dict, sender_item_id: str) -> StatusResult:
        """Cancel an unclaimed item so its money comes back to our balance now; PayPal answers
        the item ``RETURNED``. Cancelling one claimed meanwhile is refused: its status decides."""
        item = self._item(batch, sender_item_id) or {}
        reference = str((batch.get("batch_header") or {}).get("payout_batch_id") or "")
        try:
            cancelled = self._request("POST", f"/v1/payments/payouts-item/{item['payout_item_id']}/cancel")
        except FinalRailError:
            fresh = self._request("GET", f"/v1/payments/payouts/{reference}")
            return self._status_of(fresh, sender_item_id)
        return self._status_of({"batch_header": batch.get("batch_header"), "items": [cancelled]}, sender_item_id)

    # --- webhooks ------------------------------------------------------------------------------

    def webhook_verify(self, *, body: bytes, headers) -> bool:
        """PayPal's offline check of a webhook delivery (see the module docstring). False for a
        missing header, an unknown algorithm, a certificate from anywhere but PayPal (or our
        configured host), an expired certificate or a signature that does not verify."""
        if not self.webhook_id:
            return False
        transmission_id = headers.get("PAYPAL-TRANSMISSION-ID", "")
        transmission_time = headers.get("PAYPAL-TRANSMISSION-TIME", "")
        signature = headers.get("PAYPAL-TRANSMISSION-SIG", "")
        cert_url = headers.get("PAYPAL-CERT-URL", "")
        if headers.get("PAYPAL-AUTH-ALGO", "") != "SHA256withRSA" or not (transmission_id and transmission_time):
            return False
        certificate = self._certificate(cert_url)
        if certificate is None:
            return False
        message = f"{transmission_id}|{transmission_time}|{self.webhook_id}|{zlib.crc32(body)}".encode()
        key = certificate.public_key()
        if not isinstance(key, rsa.RSAPublicKey):
            return False
        try:
            key.verify(base64.b64decode(signature, validate=True), message, padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, binascii.Error, ValueError):
            return False
        return True

    def _certificate(self, url: str) -> x509.Certificate | None:
        try:
            parts = urlsplit(url)
            parts.hostname  # noqa: B018 - a malformed host (``https://[x``) raises here, from the sender's header
        except ValueError:
            return None
        ours = urlsplit(self.base_url)
        trusted = (parts.scheme == "https" and parts.hostname in PAYPAL_CERT_HOSTS) or (parts.scheme, parts.netloc) == (
            ours.scheme,
            ours.netloc,
        )
        if not trusted:
            return None
        key = "paypal-cert:" + hashlib.sha256(url.encode()).hexdigest()
        pem = cache.get(key)
        if pem is None:
            try:
                answer = http_call(method="GET", url=url, body=None, headers={}, timeout=self.timeout)
            except HttpUnreachable:
                return None
            if answer.status != 200:
                return None
            pem = answer.body
            cache.set(key, pem, 86_400)
        try:
            certificate = x509.load_pem_x509_certificate(pem)
        except ValueError:
            return None
        now = datetime.now(UTC)
        if not certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc:
            return None
        return certificate


def production_checks(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """In production (``core.checks.production_checks_on``), a configured PayPal rail must have
    its credentials, its webhook id (or no event could be verified, and every payout would wait
    for the poller) and an https ``base_url``. Registered by ``payouts.apps``."""
    rail = (getattr(settings, "PAYOUT_RAILS", {}).get(PAYPAL_RAIL) or {}).get("OPTIONS")
    if not production_checks_on() or rail is None:
        return []
    missing = [
        env
        for env, key in (
            ("PAYPAL_CLIENT_ID", "client_id"),
            ("PAYPAL_CLIENT_SECRET", "client_secret"),
            ("PAYPAL_WEBHOOK_ID", "webhook_id"),
        )
        if not rail.get(key)
    ]
    if not str(rail.get("base_url", "")).startswith("https://"):
        missing.append("PAYPAL_BASE_URL (https)")
    if not missing:
        return []
    return [
        checks.Error("The paypal rail is missing credentials.", hint=f"Set {', '.join(missing)}.", id="payouts.E140")
    ]
