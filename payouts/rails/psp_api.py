"""An adapter for Wise's public payouts API: EUR over SEPA (IBAN recipients), GBP to UK sort code
accounts (Faster Payments) and USD to ABA routing accounts (ACH / wire), paid from a Wise
balance in the same currency unless ``source_currency`` says otherwise.

Flow per payout, all over HTTPS with a bearer token (endpoint versions as Wise documents them):

1. ``POST /v1/accounts``                           recipient account (iban, or a local type)
2. ``POST /v3/profiles/{profileId}/quotes``        quote for the exact target amount
3. ``POST /v1/transfers``                          transfer with ``customerTransactionId``
4. ``POST /v3/profiles/{profileId}/transfers/{id}/payments``  ``{"type": "BALANCE"}`` funds it

Never twice: ``customerTransactionId`` is a UUID derived (uuid5) from our ``end_to_end_id``, so
every retry of one payout carries the same key and Wise answers a repeated create with the
transfer it already has. Funding an already funded transfer answers 422
``transfer.invalid-state``, which the adapter reads as "funded before" and confirms with a GET.

Account requirements (``recipients.accounts``): ``GET /v1/account-requirements`` lists the account
types and fields a recipient in a currency needs, ``POST`` refines them for a chosen country, and
a field's ``validationAsync`` URL checks a value (the UK modulus check).

Status: ``GET /v1/transfers/{id}`` with the rail reference; without it the adapter pages through
``GET /v1/transfers?profile=...`` looking for our ``customerTransactionId`` (Wise documents no
look-up by that key), and answers ``unknown`` if it is not there. Webhooks
(``transfers#state-change``) are verified with Wise's RSA public key (``X-Signature-SHA256``).

Errors: 5xx, 408, 409, 429, 401/403 (our credentials, fixable by ops), timeouts and refused
connections raise ``RetryableRailError``; 400/404/422 with Wise's ``{"errors": [{"code",
"message", "path"}]}`` body raise ``FinalRailError`` with an ISO reason code and Wise's message.
"""

import base64
import binascii
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from django.core.exceptions import ImproperlyConfigured

from core.exceptions import InvalidInput
from core.money import minor_to_decimal
from payouts.rails import get_rail
from payouts.rails.base import (
    SEPA_COUNTRIES,
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
    transfer_found,
)

PSP_RAIL = "psp_api"
# Fixed namespace for deriving customerTransactionId; changing it would break idempotency for
# payouts in flight, so it is a constant, not a setting.
CUSTOMER_TRANSACTION_NAMESPACE = uuid.UUID("7b0e3c1e-4c55-5a8e-9b1e-2f6b1c0f9a41")

WISE_STATUS_MAP: dict[str, RailStatus] = {
    "incoming_payment_waiting": RailStatus.PENDING,
    "incoming_payment_initiated": RailStatus.PENDING,
    "waiting_recipient_input_to_proceed": RailStatus.PENDING,
    "processing": RailStatus.SUBMITTED,
    "funds_converted": RailStatus.SUBMITTED,
    "outgoing_payment_sent": RailStatus.SETTLED,
    "bounced_back": RailStatus.RETURNED,
    "charged_back": RailStatus.RETURNED,
    # Wise's problem path after a bounce ends in cancelled / funds_refunded too: a payout we had
    # already seen settled and that now reports "failed" was returned (the engine decides).
    "cancelled": RailStatus.FAILED,
    "funds_refunded": RailStatus.FAILED,
}
_FAILED_TEXT = {
    "bounced_back": "Wise: the receiving bank sent the payment back.",
    "charged_back": "Wise: the payment was charged back.",
    "cancelled": "Wise: the transfer was cancelled.",
    "funds_refunded": "Wise: the transfer was refunded to the sender.",
}
_RETRYABLE_HTTP = {401, 403, 408, 409, 425, 429}
# The reference length Wise's partner banks carry per currency (Wise's help centre, "the
# recipient needs a specific reference"); a longer one is refused, so it is cut. 35 elsewhere.
_REFERENCE_LIMITS = {"GBP": 18, "USD": 10, "INR": 16, "SEK": 12, "AUD": 18, "NZD": 12, "NGN": 14, "ZAR": 18}
_SUPPORTED_CURRENCIES = frozenset({"EUR", "GBP", "USD"})


def customer_transaction_id(end_to_end_id: str) -> str:
    """The idempotency UUID Wise sees for one payout: same end_to_end_id, same UUID, forever."""
    return str(uuid.uuid5(CUSTOMER_TRANSACTION_NAMESPACE, end_to_end_id))


def _json_dumps(payload: dict[str, Any]) -> bytes:
    """JSON with Decimal amounts written as exact JSON numbers (no float on the way)."""
    marks: dict[str, str] = {}

    def default(value):
        if isinstance(value, Decimal):
            key = f"__decimal_{len(marks)}__"
            marks[key] = format(value, "f")
            return key
        raise TypeError(f"{type(value).__name__} is not JSON serialisable")

    text = json.dumps(payload, default=default)
    for key, number in marks.items():
        text = text.replace(f'"{key}"', number)
    return text.encode()


def _iso_reason(errors: list[dict]) -> str:
    """Our best ISO 20022 code for Wise's validation errors (Wise's own code is kept as rail_code)."""
    where = " ".join(f"{e.get('path') or ''} {e.get('code') or ''}" for e in errors).lower()
    if "insufficient" in where:
        return "AM04"
    if any(key in where for key in ("iban", "accountnumber", "sortcode", "abartn", "routing")):
        return "AC01"
    if "bic" in where or "swift" in where:
        return "RC01"
    if "address" in where:
        return "BE04"
    if "accountholdername" in where or "name" in where:
        return "RR03"
    if "amount" in where:
        return "AM02"
    return "MS03"


def _errors_from(body: bytes) -> list[dict]:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return []
    if isinstance(parsed, dict) and isinstance(parsed.get("errors"), list):
        return [e for e in parsed["errors"] if isinstance(e, dict)]
    if isinstance(parsed, dict) and parsed.get("error"):  # OAuth-style {"error", "error_description"}
        return [{"code": parsed.get("error"), "message": parsed.get("error_description") or parsed.get("error")}]
    return []


@dataclass(frozen=True)
class TransferStateChange:
    """A verified ``transfers#state-change`` webhook."""

    transfer_id: str
    wise_state: str
    status: RailStatus
    occurred_at: str | None


def verify_webhook_signature(*, body: bytes, signature: str, public_key_pem: bytes | str) -> bool:
    """True when ``signature`` (the base64 ``X-Signature-SHA256`` header) is Wise's RSA-SHA256
    (PKCS#1 v1.5) signature of the raw request ``body`` under ``public_key_pem``."""
    key = serialization.load_pem_public_key(
        public_key_pem.encode() if isinstance(public_key_pem, str) else public_key_pem
    )
    if not isinstance(key, rsa.RSAPublicKey):
        raise ImproperlyConfigured("The Wise webhook key must be an RSA public key.")
    try:
        raw = base64.b64decode(signature or "", validate=True)
        key.verify(raw, body, padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


class WiseRail(Rail):
    name = PSP_RAIL

    def __init__(
        self,
        *,
        base_url: str = "",
        api_token: str = "",
        profile_id: int | str = "",
        source_currency: str | None = None,
        timeout_seconds: float = 10.0,
        webhook_public_key_pem: str | None = None,
        max_amount_minor: int | None = None,
        status_scan_pages: int = 10,
    ):
        if not (base_url and api_token and profile_id):
            raise ImproperlyConfigured("PAYOUT_RAILS['psp_api']['OPTIONS'] needs base_url, api_token and profile_id.")
        self.base_url = base_url.rstrip("/")
        self.api_token = api_token
        self.profile_id = int(profile_id)
        self.source_currency = source_currency
        self.timeout = timeout_seconds
        self.webhook_public_key_pem = webhook_public_key_pem
        self.max_amount_minor = max_amount_minor
        self.status_scan_pages = status_scan_pages

    # --- HTTP ----------------------------------------------------------------------------------

    def _request(self, method: str, path: str, payload: dict | None = None) -> Any:
        answer = rail_http_call(
            provider="Wise",
            method=method,
            base_url=self.base_url,
            path=path,
            body=_json_dumps(payload) if payload is not None else None,
            headers={
                "Authorization": f"Bearer {self.api_token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
            timeout=self.timeout,
        )
        if answer.status >= 400:
            self._raise_for_status(answer.status, answer.body, method, path)
        try:
            return json.loads(answer.body, parse_float=Decimal) if answer.body else None
        except ValueError as exc:
            raise RetryableRailError(
                f"Wise sent a body that is not JSON on {method} {path}.", rail_code="bad_response"
            ) from exc

    @staticmethod
    def _raise_for_status(status: int, body: bytes, method: str, path: str):
        errors = _errors_from(body)
        wise_code = errors[0].get("code", "") if errors else f"http_{status}"
        message = (
            "; ".join(
                f"{e.get('message') or e.get('code')}" + (f" ({e['path']})" if e.get("path") else "") for e in errors
            )
            or f"HTTP {status}"
        )
        if status >= 500 or status in _RETRYABLE_HTTP:
            raise RetryableRailError(
                f"Wise answered {status} on {method} {path}: {message}.",
                rail_code=wise_code,
                details={"http_status": status, "errors": errors},
            )
        raise FinalRailError(
            f"Wise refused {method} {path}: {message}.",
            reason_code=_iso_reason(errors),
            reason_text=f"Wise: {message}",
            rail_code=wise_code,
            details={"http_status": status, "errors": errors},
        )

    # --- the rail ------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        return Capabilities(
            currencies=_SUPPORTED_CURRENCIES,
            countries=SEPA_COUNTRIES | {"GB", "US"},
            instant=False,
            max_amount_minor=self.max_amount_minor,
            verify_payee=False,
            file_based=False,
            account_types=None,  # every type Wise's account requirements list
        )

    def verify_payee(self, *, name: str, iban: str) -> VerifyPayeeResult:
        return VerifyPayeeResult(outcome=PayeeMatch.NOT_POSSIBLE)

    def _recipient_body(self, payment: RailPayment) -> dict:
        body: dict[str, Any] = {
            "profile": self.profile_id,
            "accountHolderName": payment.creditor_name,
            "currency": payment.currency,
        }
        if payment.creditor_iban:
            details = {"legalType": "PRIVATE", "iban": payment.creditor_iban}
            if payment.creditor_bic:
                details["BIC"] = payment.creditor_bic
            return body | {"type": "iban", "details": details}
        # A local account travels under the keys of Wise's own account-requirements contract;
        # a dotted key ("address.city") is a nested object in the recipient's details.
        fields = dict(payment.creditor_account)
        kind = fields.pop("type")
        return body | {"type": kind, "details": {"legalType": "PRIVATE", **self._recipient_body_details(fields)}}

    # --- account requirements (recipients.accounts.RequirementsSource) ---------------------------

    def account_requirements(self, *, currency: str, kind: str = "", details: Mapping[str, str] | None = None) -> list:
        """Wise's account requirements for paying ``currency`` from our balance (the same
        currency unless ``source_currency`` says otherwise): ``GET /v1/account-requirements``, or
        with ``details`` of a ``kind`` of account (the fields marked
        ``refreshRequirementsOnChange``) the ``POST`` that refines them. The amount is nominal:
        the fields do not depend on it for private payees. Raises RailError."""
        source = self.source_currency or currency
        query = urlencode({"source": source, "target": currency, "sourceAmount": 100})
        path = f"/v1/account-requirements?{query}"
        if not details:
            return self._request("GET", path) or []
        nested = {"legalType": "PRIVATE", **self._recipient_body_details(details)}
        return self._request("POST", path, {"type": kind, "currency": currency, "details": nested}) or []

    def account_field_check(self, *, url: str, params: Mapping[str, str]) -> str:
        """Run one field's ``validationAsync`` check: "" when Wise answers that it passed, else
        Wise's message. Only URLs on our Wise host are called: the contract comes from outside."""
        target = urlsplit(url)
        ours = urlsplit(self.base_url)
        if (target.scheme, target.netloc) != (ours.scheme, ours.netloc):
            raise RetryableRailError(f"Refused a validation URL outside {ours.netloc}.", rail_code="foreign_url")
        try:
            self._request("GET", f"{target.path}?{urlencode(dict(params))}")
        except FinalRailError as exc:
            errors = (exc.details or {}).get("errors") or []
            return "; ".join(str(e.get("message") or e.get("code")) for e in errors) or "This value is not valid."
        return ""

    @staticmethod
    def _recipient_body_details(fields: Mapping[str, str]) -> dict:
        details: dict[str, Any] = {}
        for key, value in sorted(fields.items()):
            *parents, leaf = key.split(".")
            node = details
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = value
        return details

    def submit(self, payment: RailPayment) -> SubmitResult:
        if not self.capabilities().supports(
            currency=payment.currency,
            country=payment.creditor_country,
            amount_minor=payment.amount_minor,
            account_type=payment.account_type,
        ):
            raise FinalRailError(
                f"Wise rail does not carry {payment.currency} to {payment.creditor_country}.",
                reason_code="AG01",
                rail_code="unsupported_route",
            )
        recipient = self._request("POST", "/v1/accounts", self._recipient_body(payment))
        quote = self._request(
            "POST",
            f"/v3/profiles/{self.profile_id}/quotes",
            {
                "sourceCurrency": self.source_currency or payment.currency,
                "targetCurrency": payment.currency,
                "targetAmount": minor_to_decimal(payment.amount_minor, payment.currency),
                "targetAccount": recipient["id"],
            },
        )
        reference = (payment.remittance or payment.end_to_end_id)[: _REFERENCE_LIMITS.get(payment.currency, 35)]
        transfer = self._request(
            "POST",
            "/v1/transfers",
            {
                "targetAccount": recipient["id"],
                "quoteUuid": quote["id"],
                "customerTransactionId": customer_transaction_id(payment.end_to_end_id),
                "details": {"reference": reference},
            },
        )
        if transfer.get("status") == "incoming_payment_waiting":
            transfer = self._fund(transfer)
        return self._submit_result(transfer)

    def _fund(self, transfer: dict) -> dict:
        path = f"/v3/profiles/{self.profile_id}/transfers/{transfer['id']}/payments"
        try:
            payment = self._request("POST", path, {"type": "BALANCE"})
        except FinalRailError as exc:
            if exc.rail_code != "transfer.invalid-state":
                raise
            # Funded by an earlier attempt whose answer we never saw: Wise says so with this code.
            return self._request("GET", f"/v1/transfers/{transfer['id']}")
        if (payment or {}).get("status") != "COMPLETED":
            error = (payment or {}).get("errorCode") or "unknown"
            if "insufficient" in error:
                # Our Wise balance is short: ops tops it up, the same transfer is funded on retry.
                raise RetryableRailError(
                    "Wise balance too low to fund the transfer.", reason_code="AM04", rail_code=error
                )
            raise FinalRailError(
                f"Wise refused to fund transfer {transfer['id']}: {error}.",
                reason_code="MS03",
                reason_text=f"Wise: funding refused ({error})",
                rail_code=error,
            )
        return self._request("GET", f"/v1/transfers/{transfer['id']}")

    @staticmethod
    def _submit_result(transfer: dict) -> SubmitResult:
        state = transfer.get("status", "")
        reference = str(transfer["id"])
        if WISE_STATUS_MAP.get(state) is RailStatus.FAILED:
            raise FinalRailError(
                f"Wise transfer {reference} is {state}.",
                reason_code="MS03",
                reason_text=_FAILED_TEXT[state],
                rail_code=state,
            )
        if WISE_STATUS_MAP.get(state) is RailStatus.SETTLED:
            return SubmitResult(status=SubmitStatus.SETTLED, rail_reference=reference)
        return SubmitResult(status=SubmitStatus.ACCEPTED, rail_reference=reference)

    def status(self, end_to_end_id: str, *, rail_reference: str | None = None) -> StatusResult:
        wanted = customer_transaction_id(end_to_end_id)
        transfer = transfer_found(
            provider="Wise",
            rail_reference=rail_reference,
            fetch=lambda reference: self._request("GET", f"/v1/transfers/{int(reference)}"),
            find=lambda: self._find_by_customer_transaction_id(wanted),
            belongs=lambda found: found.get("customerTransactionId") == wanted,
        )
        if transfer is None:
            return StatusResult(status=RailStatus.UNKNOWN)
        return self.status_from_state(str(transfer["id"]), transfer.get("status", ""))

    @staticmethod
    def status_from_state(transfer_id: str, state: str) -> StatusResult:
        status = WISE_STATUS_MAP.get(state, RailStatus.UNKNOWN)
        if status in (RailStatus.FAILED, RailStatus.RETURNED):
            return StatusResult(
                status=status, rail_reference=transfer_id, reason_code="MS03", reason_text=_FAILED_TEXT[state]
            )
        return StatusResult(status=status, rail_reference=transfer_id)

    def _find_by_customer_transaction_id(self, wanted: str) -> dict | None:
        page_size = 100
        for page in range(self.status_scan_pages):
            transfers = self._request(
                "GET", f"/v1/transfers?profile={self.profile_id}&limit={page_size}&offset={page * page_size}"
            )
            for transfer in transfers or []:
                if transfer.get("customerTransactionId") == wanted:
                    return transfer
            if len(transfers or []) < page_size:
                return None
        return None

    # --- webhooks ------------------------------------------------------------------------------

    def parse_webhook(self, *, body: bytes, signature: str) -> TransferStateChange:
        """Verify and read a ``transfers#state-change`` delivery. Raises ``InvalidInput`` with code
        ``webhook_signature_invalid`` for a forged or unsigned body, ``webhook_invalid`` for a body
        that is not a transfer state change."""
        if not self.webhook_public_key_pem:
            raise ImproperlyConfigured("PAYOUT_RAILS['psp_api']['OPTIONS'] needs webhook_public_key_pem.")
        if not verify_webhook_signature(body=body, signature=signature, public_key_pem=self.webhook_public_key_pem):
            raise InvalidInput("Webhook signature does not verify.", code="webhook_signature_invalid")
        try:
            event = json.loads(body)
            data = event["data"]
            transfer_id = str(int(data["resource"]["id"]))
            state = str(data["current_state"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInput("Webhook body is not a transfer state change.", code="webhook_invalid") from exc
        return TransferStateChange(
            transfer_id=transfer_id,
            wise_state=state,
            status=WISE_STATUS_MAP.get(state, RailStatus.UNKNOWN),
            occurred_at=data.get("occurred_at"),
        )


def requirements_source() -> WiseRail | None:
    """The configured PSP rail as the source of account requirements (``recipients.accounts``);
    None while it is not configured, so the built-in requirements answer."""
    try:
        rail = get_rail(PSP_RAIL)
    except ImproperlyConfigured:
        return None
    return rail if isinstance(rail, WiseRail) else None
