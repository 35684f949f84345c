"""Verification of Payee through the EPC VOP scheme's API, for rails without a name check of
their own (the pain.001 file rail, the Adyen instant rail).

The EPC's "VOP Scheme Inter-PSP API Specifications" (October 2024, effective 5 October 2025)
define one call, which requesting-PSP services (ClearBank's ``/open-banking/vop/v1/payees/single``,
gateways such as Apicunia's) expose to their clients in the same shape::

    POST {base}/vop/v1/payee-verifications
    X-Request-ID: <uuid>          X-Request-Timestamp: <ISO 8601>
    {"party": {"name": ...}, "partyAccount": {"iban": ...},
     "partyAgent": {"financialInstitutionId": {"bicFi": <the payee's bank>}},
     "requestingAgent": {"financialInstitutionId": {"bicFi": <ours>}}}

    200  X-Request-ID: <the same uuid>
    {"partyNameMatch": "MTCH" | "CMTC" | "NMTC" | "NOAP", "matchedName": ...}

``matchedName`` is the account holder's name, given with a close match (CMTC). NOAP — the
responding bank cannot check (not reachable, no answer within the scheme's 5 seconds) — is not
a negative answer. ``settings.PAYOUT_VOP`` (``{"BACKEND": ..., "OPTIONS": {...}}``) configures
the provider; without it every check answers ``not_possible`` and the campaign's policy for that
answer decides.

Errors: our side unable to ask (refused connection, timeout, 5xx, 429, 401/403) raises
``RetryableRailError`` so the payout is checked again later; a request the service refuses as
malformed (400/404/422, e.g. no BIC can be derived) is ``not_possible``: the check cannot be made
with these details.
"""

import json
import uuid
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from core.exceptions import InvalidInput
from core.http import HttpUnreachable, http_call
from payouts.rails.base import PayeeMatch, RetryableRailError, VerifyPayeeResult
from recipients.normalise import iban_normalise

EPC_RESULTS: dict[str, PayeeMatch] = {
    "MTCH": PayeeMatch.MATCH,
    "CMTC": PayeeMatch.CLOSE_MATCH,
    "NMTC": PayeeMatch.NO_MATCH,
    "NOAP": PayeeMatch.NOT_POSSIBLE,
}
_RETRYABLE_HTTP = {401, 403, 408, 425, 429}


class VopProvider(ABC):
    """Asks the payee's bank whether ``name`` holds ``iban``."""

    configured: bool = True

    @abstractmethod
    def verify(self, *, name: str, iban: str) -> VerifyPayeeResult:
        """The check's outcome; raises ``RetryableRailError`` when it could not be asked."""


class NoVop(VopProvider):
    """No VoP service configured: no check can be made."""

    configured = False

    def verify(self, *, name: str, iban: str) -> VerifyPayeeResult:
        return VerifyPayeeResult(outcome=PayeeMatch.NOT_POSSIBLE)


class EpcVopClient(VopProvider):
    def __init__(
        self,
        *,
        base_url: str = "",
        requester_bic: str = "",
        api_token: str = "",
        timeout_seconds: float = 8.0,
        path: str = "/vop/v1/payee-verifications",
    ):
        if not (base_url and requester_bic):
            raise ImproperlyConfigured("PAYOUT_VOP['OPTIONS'] needs base_url and requester_bic.")
        self.url = base_url.rstrip("/") + path
        self.requester_bic = requester_bic.strip().upper()
        self.api_token = api_token
        # The scheme gives the responding bank 5 s; the rest is our side's margin.
        self.timeout = timeout_seconds

    def verify(self, *, name: str, iban: str) -> VerifyPayeeResult:
        try:
            bic = iban_normalise(iban).bic
        except InvalidInput:
            bic = ""
        if not bic or not name.strip():
            return VerifyPayeeResult(outcome=PayeeMatch.NOT_POSSIBLE)
        request_id = str(uuid.uuid4())
        body = {
            "party": {"name": name.strip()[:140]},
            "partyAccount": {"iban": iban},
            "partyAgent": {"financialInstitutionId": {"bicFi": bic}},
            "requestingAgent": {"financialInstitutionId": {"bicFi": self.requester_bic}},
        }
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "X-Request-ID": request_id,
            "X-Request-Timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }
        if self.api_token:
            headers["Authorization"] = f"Bearer {self.api_token}"
        try:
            answer = http_call(
                method="POST", url=self.url, body=json.dumps(body).encode(), headers=headers, timeout=self.timeout
            )
        except HttpUnreachable as exc:
            raise RetryableRailError(f"The VoP service could not be asked: {exc}.", rail_code="vop_connection") from exc
        if answer.status >= 400:
            if answer.status >= 500 or answer.status in _RETRYABLE_HTTP:
                raise RetryableRailError(
                    f"The VoP service answered {answer.status}.", rail_code=f"vop_http_{answer.status}"
                )
            return VerifyPayeeResult(outcome=PayeeMatch.NOT_POSSIBLE)
        echoed = answer.headers.get("X-Request-ID")
        try:
            result = json.loads(answer.body)
        except ValueError as exc:
            raise RetryableRailError(
                "The VoP service sent a body that is not JSON.", rail_code="vop_bad_response"
            ) from exc
        if echoed != request_id or not isinstance(result, dict) or result.get("partyNameMatch") not in EPC_RESULTS:
            raise RetryableRailError(
                "The VoP service sent an answer that is not for this request.", rail_code="vop_bad_response"
            )
        outcome = EPC_RESULTS[result["partyNameMatch"]]
        suggested = (result.get("matchedName") or "").strip() if outcome == PayeeMatch.CLOSE_MATCH else ""
        return VerifyPayeeResult(outcome=outcome, suggested_name=suggested[:140] or None)


@cache
def _provider_for(backend: str, options: tuple) -> VopProvider:
    return import_string(backend)(**dict(options))


def vop_provider() -> VopProvider:
    """The configured VoP provider (``settings.PAYOUT_VOP``), else ``NoVop``."""
    config = getattr(settings, "PAYOUT_VOP", None) or {}
    if not config.get("BACKEND"):
        return NoVop()
    return _provider_for(config["BACKEND"], tuple(sorted((config.get("OPTIONS") or {}).items())))


def payee_verify(*, name: str, iban: str) -> VerifyPayeeResult:
    """Verification of Payee for rails without a check of their own."""
    return vop_provider().verify(name=name, iban=iban)
