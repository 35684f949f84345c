"""A fake of Adyen's Transfers API v4 (``/btl/v4``) on 127.0.0.1, for the instant rail's tests and
bench-payouts. It follows the public contract (github.com/Adyen/adyen-openapi,
``TransferService-v4.json``; docs.adyen.com "API idempotency" and "fallback priorities"):

- ``X-API-Key`` authentication (401 ``ServiceError`` otherwise);
- ``Idempotency-Key`` (at most 64 characters): the first answer to a key is returned to every
  later request with it, with the key echoed in the ``idempotency-key`` header;
- ``POST /transfers`` (category ``bank``, IBAN counterparty, amounts in minor units) tries the
  ``priorities`` in order; a priority it cannot route is explained in ``routingDetails``, and
  when none can be routed the answer is 422 ``TransferServiceRestServiceError``; a routed
  transfer is answered 202 with ``status`` ``authorised`` and the priority used in
  ``categoryData.priority``; not enough balance answers 202 ``refused`` / ``notEnoughBalance``;
- ``GET /transfers/{id}`` (``TransferData``) and ``GET /transfers`` (``createdSince`` and
  ``createdUntil`` required; filters ``balanceAccountId``, ``reference``, ``category``).

Progress: an instant transfer is ``booked`` (tracking ``confirmation`` / ``credited``)
``instant_settle_seconds`` after it was created; a regular one waits for ``book()``. Per-IBAN
behaviours: ``instant_unreachable`` (the bank takes no SCT Inst), ``closed`` (an instant transfer
fails, ``counterpartyAccountClosed``), ``slow`` (an instant transfer waits for ``book()``).
"""

import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime

from schwifty import IBAN
from schwifty.exceptions import SchwiftyException

from tests.fakes.json_server import ApiProblem, FakeJsonServer, Request

PRIORITIES = {"crossBorder", "fast", "instant", "internal", "regular", "wire"}
SEPA_IBAN_COUNTRIES = {
    "AD", "AT", "BE", "BG", "CH", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GB", "GI", "GR", "HR", "HU",
    "IE", "IS", "IT", "LI", "LT", "LU", "LV", "MC", "MT", "NL", "NO", "PL", "PT", "RO", "SE", "SI", "SK", "SM", "VA",
}  # fmt: skip
_BENEFICIARY_REFERENCE = re.compile(r"[A-Za-z0-9]{0,35}")


def _now() -> datetime:
    return datetime.now(UTC)


def _problem(status: int, error_code: str, title: str, detail: str, **extra) -> ApiProblem:
    return ApiProblem(
        status,
        {
            "type": "https://docs.adyen.com/errors/validation",
            "errorCode": error_code,
            "title": title,
            "detail": detail,
            "status": status,
            "requestId": secrets.token_hex(8).upper(),
            **extra,
        },
    )


def _invalid(name: str, message: str, value=None) -> ApiProblem:
    return _problem(
        422,
        "30_002",
        "Invalid transfer information provided",
        f"{name}: {message}",
        invalidFields=[{"name": name, "message": message, "value": "" if value is None else str(value)}],
    )


@dataclass
class FakeAdyenState:
    balance_minor: int
    transfers: dict[str, dict] = field(default_factory=dict)
    created: dict[str, datetime] = field(default_factory=dict)
    by_key: dict[str, tuple[int, dict]] = field(default_factory=dict)
    behaviours: dict[str, str] = field(default_factory=dict)


class FakeAdyen(FakeJsonServer):
    name = "adyen"
    prefix = "/btl/v4"

    def __init__(
        self,
        *,
        api_key: str = "test-adyen-key",
        balance_account_id: str = "BA00000000000000000000001",
        balance_minor: int = 10**12,
        instant_settle_seconds: float = 0.05,
    ):
        super().__init__()
        self.api_key = api_key
        self.balance_account_id = balance_account_id
        self.instant_settle_seconds = instant_settle_seconds
        self.state = FakeAdyenState(balance_minor=balance_minor)
        self.routes = [
            ("POST", re.compile(rf"{self.prefix}/transfers"), self._create),
            ("GET", re.compile(rf"{self.prefix}/transfers"), self._list),
            ("GET", re.compile(rf"{self.prefix}/transfers/([A-Za-z0-9_-]+)"), self._get),
        ]

    @property
    def api_url(self) -> str:
        return self.base_url + self.prefix

    # --- test controls -------------------------------------------------------------------------

    def behave(self, iban: str, behaviour: str) -> None:
        with self.lock:
            self.state.behaviours[iban.replace(" ", "").upper()] = behaviour

    def transfers_for(self, reference: str) -> list[dict]:
        with self.lock:
            return [dict(t) for t in self.state.transfers.values() if t["reference"] == reference]

    def book(self, transfer_id: str) -> None:
        with self.lock:
            self._book(self.state.transfers[transfer_id])

    def return_transfer(self, transfer_id: str, reason: str = "counterpartyAccountClosed") -> None:
        with self.lock:
            transfer = self.state.transfers[transfer_id]
            transfer.update(status="returned", reason=reason)
            self.state.balance_minor += transfer["amount"]["value"]

    # --- the API -------------------------------------------------------------------------------

    def authenticate(self, request: Request) -> None:
        if request.headers.get("x-api-key") != self.api_key:
            raise ApiProblem(
                401,
                {
                    "status": 401,
                    "errorCode": "000",
                    "message": "HTTP Status Response - Unauthorized",
                    "errorType": "security",
                },
            )

    def _create(self, request: Request):
        key = request.headers.get("idempotency-key", "")
        if len(key) > 64:
            raise _invalid("Idempotency-Key", "At most 64 characters.", key)
        with self.lock:
            if key and key in self.state.by_key:
                status, body = self.state.by_key[key]
                return status, body, {"idempotency-key": key}
            try:
                status, body = 202, self._transfer(request.json())
            except ApiProblem as exc:
                status, body = exc.status, exc.body
            if key:
                self.state.by_key[key] = (status, body)
        headers = {"idempotency-key": key} if key else {}
        if status >= 400:
            raise ApiProblem(status, body, headers)
        return status, body, headers

    def _transfer(self, body: dict) -> dict:
        if body.get("category") != "bank":
            raise _invalid("category", "Only bank transfers are supported here.", body.get("category"))
        if body.get("balanceAccountId") != self.balance_account_id:
            raise _invalid("balanceAccountId", "Balance account not found.", body.get("balanceAccountId"))
        amount = body.get("amount") or {}
        value = amount.get("value")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise _invalid("amount.value", "A positive amount in minor units is required.", value)
        if amount.get("currency") != "EUR":
            raise _invalid("amount.currency", "The balance account holds EUR.", amount.get("currency"))
        account = ((body.get("counterparty") or {}).get("bankAccount")) or {}
        identification = account.get("accountIdentification") or {}
        if identification.get("type") != "iban":
            raise _invalid("counterparty.bankAccount.accountIdentification.type", "Expected iban.")
        try:
            iban = IBAN(identification.get("iban") or "")
        except SchwiftyException:
            raise _invalid(
                "counterparty.bankAccount.accountIdentification.iban", "Invalid IBAN.", identification.get("iban")
            ) from None
        if not ((account.get("accountHolder") or {}).get("fullName") or "").strip():
            raise _invalid("counterparty.bankAccount.accountHolder.fullName", "Required.")
        reference = body.get("reference") or ""
        if len(reference) > 80:
            raise _invalid("reference", "At most 80 characters.", reference)
        if not _BENEFICIARY_REFERENCE.fullmatch(body.get("referenceForBeneficiary") or ""):
            raise _invalid("referenceForBeneficiary", "Only a-z, A-Z, 0-9; at most 35 to an IBAN.")
        if len(body.get("description") or "") > 140:
            raise _invalid("description", "At most 140 characters.")
        priorities = body.get("priorities") or ([body["priority"]] if body.get("priority") else [])
        if not priorities or any(p not in PRIORITIES for p in priorities):
            raise _invalid("priorities", "Required for transfers with category bank.", priorities)
        chosen, refused = self._route(str(iban.compact), iban.country_code, priorities)
        if chosen is None:
            raise _problem(
                422, "30_112", "Transfer not routable", "None of the requested priorities can be routed.",
                routingDetails=refused,
            )  # fmt: skip
        transfer = {
            "id": secrets.token_hex(8).upper(),
            "accountHolder": {"id": "AH00000000000000000000001"},
            "amount": {"value": value, "currency": "EUR"},
            "balanceAccount": {"id": self.balance_account_id},
            "category": "bank",
            "categoryData": {"type": "bank", "priority": chosen},
            "counterparty": {"bankAccount": account},
            "createdAt": _now().isoformat(),
            "description": body.get("description") or "",
            "direction": "outgoing",
            "reason": "approved",
            "reference": reference or secrets.token_hex(8),
            "referenceForBeneficiary": body.get("referenceForBeneficiary") or "",
            "status": "authorised",
            "type": "bankTransfer",
            "sequenceNumber": 1,
        }
        if value > self.state.balance_minor:
            transfer.update(status="refused", reason="notEnoughBalance")
        self.state.transfers[transfer["id"]] = transfer
        self.state.created[transfer["id"]] = _now()
        return dict(transfer)

    def _route(self, iban: str, country: str, priorities: list[str]) -> tuple[str | None, list[dict]]:
        refused = []
        for priority in priorities:
            if priority == "instant" and self.state.behaviours.get(iban) == "instant_unreachable":
                refused.append(
                    {
                        "priority": "instant",
                        "errorCode": "30_113",
                        "title": "Counterparty bank unavailable",
                        "detail": "The counterparty's bank does not accept instant transfers.",
                    }
                )
                continue
            if priority in ("instant", "regular") and country in SEPA_IBAN_COUNTRIES:
                return priority, refused
            refused.append(
                {"priority": priority, "errorCode": "30_114", "title": "Route not found", "detail": "Not offered."}
            )
        return None, refused

    def _book(self, transfer: dict) -> None:
        if transfer["status"] != "authorised":
            return
        self.state.balance_minor -= transfer["amount"]["value"]
        transfer.update(status="booked", sequenceNumber=transfer["sequenceNumber"] + 1)
        if transfer["categoryData"]["priority"] == "instant":
            transfer["tracking"] = {"type": "confirmation", "status": "credited"}

    def _advance(self, transfer: dict) -> None:
        """An instant transfer settles (or is refused) ``instant_settle_seconds`` after creation."""
        if transfer["status"] != "authorised" or transfer["categoryData"]["priority"] != "instant":
            return
        if (_now() - self.state.created[transfer["id"]]).total_seconds() < self.instant_settle_seconds:
            return
        iban = transfer["counterparty"]["bankAccount"]["accountIdentification"]["iban"].upper()
        behaviour = self.state.behaviours.get(iban)
        if behaviour == "closed":
            transfer.update(status="failed", reason="counterpartyAccountClosed")
        elif behaviour != "slow":
            self._book(transfer)

    def _view(self, transfer: dict) -> dict:
        self._advance(transfer)
        return {**transfer, "balancePlatform": "YOUR_BALANCE_PLATFORM"}

    def _get(self, request: Request, transfer_id: str):
        with self.lock:
            transfer = self.state.transfers.get(transfer_id)
            if transfer is None:
                raise _problem(404, "00_404", "Not found", f"Transfer {transfer_id} does not exist.")
            return 200, self._view(transfer)

    def _list(self, request: Request):
        query = {k: v[0] for k, v in request.query.items()}
        for required in ("createdSince", "createdUntil"):
            if not query.get(required):
                raise _invalid(required, "Required.")
        since, until = (
            datetime.fromisoformat(query[k].replace("Z", "+00:00")) for k in ("createdSince", "createdUntil")
        )
        with self.lock:
            found = [
                self._view(t)
                for tid, t in self.state.transfers.items()
                if since <= self.state.created[tid] <= until
                and query.get("reference") in (None, t["reference"])
                and query.get("balanceAccountId") in (None, t["balanceAccount"]["id"])
                and query.get("category") in (None, t["category"])
            ]
        limit = int(query.get("limit") or 10)
        return 200, {"data": found[:limit], "_links": {}}
