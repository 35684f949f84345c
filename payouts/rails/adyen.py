"""The instant rail: SEPA Instant Credit Transfers through Adyen's Transfers API (v4), with
Adyen's own fallback to a standard SEPA credit transfer where the receiving bank takes no
instant payments.

Why Adyen: its public contract (the OpenAPI files in github.com/Adyen/adyen-openapi,
``TransferService-v4.json``) documents everything "never pay twice" needs — an
``Idempotency-Key`` header whose first answer is returned to every retry (keys kept at least 31
days), a ``priorities`` list tried in order ("if that's not possible, it moves on to the next"),
the priority actually used in the answer (``categoryData.priority``), a ``routingDetails`` list
explaining each refused priority, amounts in integer minor units, and a look-up of transfers by
our own ``reference``.

Flow per payout, over HTTPS with the ``X-API-Key`` header:

1. ``POST /transfers`` with ``Idempotency-Key`` = uuid5 of our ``end_to_end_id``, ``reference``
   = the end_to_end_id, ``priorities`` = ``["instant", "regular"]`` (or ``["instant"]`` with
   ``fallback=False``: then a bank unreachable for instant payments raises
   ``InstantUnreachableError`` and the route's fallback rail takes the payout). 202 answers the
   transfer with the priority Adyen chose.
2. An instant transfer is followed with ``GET /transfers/{id}`` for up to
   ``instant_wait_seconds`` (SCT Inst settles within 10 s): ``booked`` (the money left our balance
   account) is settled; a transfer still in flight is left to the poller.

Status: ``GET /transfers/{id}`` with the rail reference, else ``GET /transfers?reference=``.

Errors: 5xx, 408, 425, 429, 401/403 (our credentials, fixable by ops), timeouts and refused
connections raise ``RetryableRailError``; 400/404/422 with Adyen's problem body
(``errorCode``, ``title``, ``detail``, ``invalidFields``, ``routingDetails``) raise
``FinalRailError``. Verification of Payee goes through the configured EPC VoP provider
(``payouts.rails.vop``): Adyen's own name check is not in its public API definitions.
"""

import json
import logging
import time
import urllib.parse
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from payouts.rails.base import (
    SEPA_COUNTRIES,
    Capabilities,
    FinalRailError,
    InstantUnreachableError,
    Rail,
    RailError,
    RailPayment,
    RailStatus,
    RetryableRailError,
    ServiceLevel,
    StatusResult,
    SubmitResult,
    SubmitStatus,
    VerifyPayeeResult,
    rail_http_call,
    transfer_found,
)
from payouts.rails.sepa_file import sepa_text
from payouts.rails.vop import payee_verify, vop_provider

logger = logging.getLogger(__name__)

# Fixed namespace for the Idempotency-Key; changing it would break idempotency for payouts in
# flight, so it is a constant, not a setting.
IDEMPOTENCY_NAMESPACE = uuid.UUID("0d4c5a3e-8f61-5b0c-9a57-6a1f3c2e7b90")

# Adyen's transfer statuses for an outgoing bank transfer, as our rail statuses. ``booked``: the
# money left our balance account (what settles a payout in our books); anything not listed is a
# transfer Adyen holds, so it is in flight (never "unknown": that would allow a second submit).
ADYEN_STATUS_MAP: dict[str, RailStatus] = {
    "booked": RailStatus.SETTLED,
    "credited": RailStatus.SETTLED,
    "failed": RailStatus.FAILED,
    "refused": RailStatus.FAILED,
    "rejected": RailStatus.FAILED,
    "error": RailStatus.FAILED,
    "cancelled": RailStatus.FAILED,
    "expired": RailStatus.FAILED,
    "returned": RailStatus.RETURNED,
}

# Adyen's ``reason`` values as ISO 20022 codes (Adyen's own value is kept as rail_code).
ADYEN_REASON_CODES: dict[str, str] = {
    "counterpartyAccountClosed": "AC04",
    "counterpartyAccountNotFound": "AC01",
    "counterpartyAccountBlocked": "AC06",
    "invalidToAccount": "AC01",
    "counterpartyAddressRequired": "BE04",
    "counterpartyBankUnavailable": "CNOR",
    "routeNotFound": "CNOR",
    "unableToRouteTransaction": "CNOR",
    "notEnoughBalance": "AM04",
    "amountLimitExceeded": "AM02",
    "invalidAmount": "AM02",
    "refusedByCounterpartyBank": "MS02",
    "transactionNotPermitted": "AG01",
    "declinedByTransactionRule": "AG01",
    "fraud": "FRAD",
    "fraudCancelled": "FRAD",
    "cancelled": "DS02",
}
_RETRYABLE_HTTP = {401, 403, 408, 425, 429}
_PRIORITY_LEVEL = {"instant": ServiceLevel.INSTANT, "regular": ServiceLevel.STANDARD}
_BENEFICIARY_REFERENCE = 35  # Adyen: a-z A-Z 0-9 only, at most 35 characters to an IBAN


def idempotency_key(end_to_end_id: str) -> str:
    """The Idempotency-Key Adyen sees for one payout: same end_to_end_id, same key, forever."""
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, end_to_end_id))


def _reason_code(reason: str | None) -> str:
    return ADYEN_REASON_CODES.get(reason or "", "MS03")


def _problem(body: bytes) -> dict:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class AdyenTransfersRail(Rail):
    name = "psp_instant"

    def __init__(
        self,
        *,
        base_url: str = "",
        api_key: str = "",
        balance_account_id: str = "",
        fallback: bool = True,
        timeout_seconds: float = 10.0,
        instant_wait_seconds: float = 10.0,
        poll_interval_seconds: float = 0.05,
        max_amount_minor: int | None = None,
        status_lookback_days: int = 180,
    ):
        if not (base_url and api_key and balance_account_id):
            raise ImproperlyConfigured(
                "PAYOUT_RAILS['psp_instant']['OPTIONS'] needs base_url, api_key and balance_account_id."
            )
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.balance_account_id = balance_account_id
        self.priorities = ["instant", "regular"] if fallback else ["instant"]
        self.timeout = timeout_seconds
        self.instant_wait = instant_wait_seconds
        self.poll_interval = poll_interval_seconds
        self.max_amount_minor = max_amount_minor
        self.status_lookback = timedelta(days=min(status_lookback_days, 180))

    # --- HTTP ----------------------------------------------------------------------------------

    def _request(self, method: str, path: str, payload: dict | None = None, *, key: str = "") -> Any:
        headers = {"X-API-Key": self.api_key, "Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Idempotency-Key"] = key
        answer = rail_http_call(
            provider="Adyen",
            method=method,
            base_url=self.base_url,
            path=path,
            body=json.dumps(payload).encode() if payload is not None else None,
            headers=headers,
            timeout=self.timeout,
        )
        if answer.status >= 400:
            self._raise_for_status(answer.status, answer.body, method, path)
        try:
            return json.loads(answer.body) if answer.body else None
        except ValueError as exc:
            raise RetryableRailError(
                f"Adyen sent a body that is not JSON on {method} {path}.", rail_code="bad_response"
            ) from exc

    def _raise_for_status(self, status: int, body: bytes, method: str, path: str):
        problem = _problem(body)
        code = str(problem.get("errorCode") or f"http_{status}")
        message = problem.get("detail") or problem.get("message") or problem.get("title") or f"HTTP {status}"
        details = {"http_status": status, "problem": problem}
        if status >= 500 or status in _RETRYABLE_HTTP:
            raise RetryableRailError(
                f"Adyen answered {status} on {method} {path}: {message}.", rail_code=code, details=details
            )
        routing = [r for r in problem.get("routingDetails") or [] if isinstance(r, dict)]
        if routing and {r.get("priority") for r in routing} == {"instant"}:
            raise InstantUnreachableError(
                f"Adyen cannot send this payment as an instant transfer: {message}.",
                reason_text=f"Adyen: {routing[0].get('detail') or routing[0].get('title') or message}",
                rail_code=code,
                details=details,
            )
        fields = " ".join(str(f.get("name", "")) for f in problem.get("invalidFields") or [] if isinstance(f, dict))
        raise FinalRailError(
            f"Adyen refused {method} {path}: {message}.",
            reason_code="AC01" if "iban" in fields.lower() else ("CNOR" if routing else "MS03"),
            reason_text=f"Adyen: {message}",
            rail_code=code,
            details=details,
        )

    # --- the rail ------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        return Capabilities(
            currencies=frozenset({"EUR"}),
            countries=SEPA_COUNTRIES,
            instant=True,
            max_amount_minor=self.max_amount_minor,
            verify_payee=vop_provider().configured,
            file_based=False,
        )

    def verify_payee(self, *, name: str, iban: str) -> VerifyPayeeResult:
        return payee_verify(name=name, iban=iban)

    def _transfer_body(self, payment: RailPayment) -> dict:
        return {
            "amount": {"value": payment.amount_minor, "currency": payment.currency},
            "balanceAccountId": self.balance_account_id,
            "category": "bank",
            "counterparty": {
                "bankAccount": {
                    "accountHolder": {"fullName": payment.creditor_name.strip()},
                    "accountIdentification": {"type": "iban", "iban": payment.creditor_iban},
                }
            },
            "priorities": self.priorities,
            "reference": payment.end_to_end_id,
            "referenceForBeneficiary": "".join(ch for ch in payment.end_to_end_id if ch.isalnum())[
                :_BENEFICIARY_REFERENCE
            ],
            "description": sepa_text(payment.remittance, 140) or payment.end_to_end_id,
        }

    def submit(self, payment: RailPayment) -> SubmitResult:
        if (
            not self.capabilities().supports(
                currency=payment.currency, country=payment.creditor_country, amount_minor=payment.amount_minor
            )
            or not payment.creditor_iban
        ):
            raise FinalRailError(
                f"The instant rail does not carry {payment.currency} to {payment.creditor_country}.",
                reason_code="AG01",
                rail_code="unsupported_route",
            )
        transfer = self._request(
            "POST", "/transfers", self._transfer_body(payment), key=idempotency_key(payment.end_to_end_id)
        )
        known = self.status_from_transfer(transfer)
        if known.status == RailStatus.SUBMITTED and known.service_level == ServiceLevel.INSTANT:
            transfer = self._await_instant(transfer)
            known = self.status_from_transfer(transfer)
        if known.status in (RailStatus.FAILED, RailStatus.RETURNED):
            raise FinalRailError(
                f"Adyen transfer {known.rail_reference} is {transfer.get('status')}.",
                reason_code=known.reason_code or "MS03",
                reason_text=known.reason_text,
                rail_code=str(transfer.get("reason") or transfer.get("status")),
            )
        settled = known.status == RailStatus.SETTLED
        return SubmitResult(
            status=SubmitStatus.SETTLED if settled else SubmitStatus.ACCEPTED,
            rail_reference=known.rail_reference,
            service_level=known.service_level,
        )

    def _await_instant(self, transfer: dict) -> dict:
        """Follow an instant transfer until it is booked or refused, at most ``instant_wait``
        seconds; what is still in flight then is the poller's."""
        deadline = time.monotonic() + self.instant_wait
        path = f"/transfers/{urllib.parse.quote(str(transfer['id']))}"
        pause = self.poll_interval
        while self.status_from_transfer(transfer).status == RailStatus.SUBMITTED and time.monotonic() < deadline:
            time.sleep(pause)
            # Most instant transfers book within a second or two: ask often at first, then less.
            pause = min(pause * 2, 1.0)
            try:
                transfer = self._request("GET", path)
            except RailError:
                # Adyen holds the transfer already: an error asking after it must never fail the
                # payout (its rewards would be paid again under a new id). The poller asks later.
                logger.warning("Adyen transfer %s: its status could not be read after the submit", transfer["id"])
                return transfer
        return transfer

    @staticmethod
    def status_from_transfer(transfer: dict) -> StatusResult:
        status = ADYEN_STATUS_MAP.get(str(transfer.get("status") or ""), RailStatus.SUBMITTED)
        priority = (transfer.get("categoryData") or {}).get("priority")
        reason = transfer.get("reason")
        failed = status in (RailStatus.FAILED, RailStatus.RETURNED)
        return StatusResult(
            status=status,
            rail_reference=str(transfer["id"]),
            reason_code=_reason_code(reason) if failed else None,
            reason_text=f"Adyen: the transfer is {transfer.get('status')} ({reason or 'no reason given'})."
            if failed
            else None,
            service_level=_PRIORITY_LEVEL.get(priority or ""),
        )

    def status(self, end_to_end_id: str, *, rail_reference: str | None = None) -> StatusResult:
        transfer = transfer_found(
            provider="Adyen",
            rail_reference=rail_reference,
            fetch=lambda reference: self._request("GET", f"/transfers/{urllib.parse.quote(reference)}"),
            find=lambda: self._find_by_reference(end_to_end_id),
            belongs=lambda found: found.get("reference") == end_to_end_id,
        )
        if transfer is None:
            return StatusResult(status=RailStatus.UNKNOWN)
        return self.status_from_transfer(transfer)

    def _find_by_reference(self, end_to_end_id: str) -> dict | None:
        until = datetime.now(UTC) + timedelta(days=1)
        query = urllib.parse.urlencode(
            {
                "balanceAccountId": self.balance_account_id,
                "reference": end_to_end_id,
                "category": "bank",
                "createdSince": (until - self.status_lookback).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "createdUntil": until.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "limit": 100,
            }
        )
        found = self._request("GET", f"/transfers?{query}") or {}
        return next((t for t in found.get("data") or [] if t.get("reference") == end_to_end_id), None)
