"""A fake Wise API on 127.0.0.1 for the psp_api rail's tests.

It follows the documented contract closely enough to prove the adapter: bearer-token auth,
account requirements (``GET``/``POST /v1/account-requirements``: the account types per currency
with their fields, ``address.country`` refreshing to ask a US state, and ``validationAsync``
checks at ``/v1/validators/…``), recipient accounts (iban / sort_code / aba with validation errors
in Wise's ``{"errors": [{"code", "message", "path"}]}`` shape), quotes, transfers with
``customerTransactionId`` idempotency (a repeat answers the existing transfer) and one transfer
per quote, funding from a balance (``transfer.invalid-state`` when funded twice), GET and list
of transfers, and signed ``transfers#state-change`` webhooks.

Fault injection: ``fail_next`` answers a status (5xx, 422 ...) instead of processing;
``delay_next`` sleeps before or *after* processing a request, so a client timeout can hit a
request the fake did carry out (the case idempotency exists for). Exchange rates are 1:1; the
fake does not convert money. Its UK modulus check is one standard modulus-11 rule for every sort
code (``uk_modulus_ok``), not Pay.UK's table: enough to tell a good number from a bad one.
"""

import base64
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from schwifty import IBAN
from schwifty.exceptions import SchwiftyException

SUPPORTED = {"EUR", "GBP", "USD"}
US_STATES = {"NY": "New York", "CA": "California", "TX": "Texas"}
_UK_WEIGHTS = (0, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1)


def uk_modulus_ok(sort_code: str, account_number: str) -> bool:
    """The fake bank's modulus check: sort code and account number weighted, summed, mod 11 = 0."""
    digits = [int(d) for d in sort_code + account_number]
    return len(digits) == 14 and sum(w * d for w, d in zip(_UK_WEIGHTS, digits, strict=True)) % 11 == 0


def uk_account_number(sort_code: str, n: int) -> str:
    """The n-th account number (from 1) the fake's modulus check accepts at ``sort_code``."""
    found = 0
    for candidate in range(10_000_000, 100_000_000):
        if uk_modulus_ok(sort_code, str(candidate)):
            found += 1
            if found == n:
                return str(candidate)
    raise ValueError(n)


def _aba_ok(number: str) -> bool:
    digits = [int(d) for d in number]
    return len(digits) == 9 and sum(w * d for w, d in zip((3, 7, 1) * 3, digits, strict=True)) % 10 == 0


REFERENCE_LIMITS = {"GBP": 18, "EUR": 35, "USD": 10}  # Wise's help centre, per currency


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, path: str | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.path = status, code, message, path

    def body(self) -> dict:
        return {"errors": [{"code": self.code, "message": self.message, "path": self.path, "arguments": []}]}


@dataclass
class _Rule:
    method: str
    path_prefix: str
    times: int
    status: int = 0
    body: dict | None = None
    delay: float = 0.0
    after_processing: bool = True


@dataclass
class FakeWiseState:
    accounts: dict[int, dict] = field(default_factory=dict)
    quotes: dict[str, dict] = field(default_factory=dict)
    transfers: dict[int, dict] = field(default_factory=dict)
    by_customer_transaction_id: dict[str, int] = field(default_factory=dict)
    balances: dict[str, Decimal] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    next_id: int = 1000


class FakeWise:
    def __init__(
        self,
        *,
        token: str = "test-token",  # noqa: S107 - a fake's token
        profile_id: int = 4242,
        balance: Decimal = Decimal("1000000"),
        private_key: rsa.RSAPrivateKey | None = None,
    ):
        self.token = token
        self.profile_id = profile_id
        self.state = FakeWiseState(balances={currency: balance for currency in SUPPORTED})
        self.lock = threading.Lock()
        self.rules: list[_Rule] = []
        self.stopping = threading.Event()
        self.private_key = private_key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.server: ThreadingHTTPServer | None = None
        self.auto_settle = False  # funded transfers go straight to outgoing_payment_sent
        self.modulus_check = False  # recipient creation refuses UK numbers failing uk_modulus_ok

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> "FakeWise":
        fake = self

        class Handler(_Handler):
            wise = fake

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-wise", daemon=True
        ).start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers sleeping in a delay
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def public_key_pem(self) -> str:
        return (
            self.private_key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )

    # --- test controls -------------------------------------------------------------------------

    def fail_next(
        self, method: str, path_prefix: str, *, status: int, body: dict | None = None, times: int = 1
    ) -> None:
        with self.lock:
            self.rules.append(_Rule(method, path_prefix, times, status=status, body=body))

    def delay_next(
        self, method: str, path_prefix: str, *, seconds: float, after_processing: bool = True, times: int = 1
    ) -> None:
        with self.lock:
            self.rules.append(_Rule(method, path_prefix, times, delay=seconds, after_processing=after_processing))

    def transfers_for(self, customer_transaction_id: str) -> list[dict]:
        with self.lock:
            return [t for t in self.state.transfers.values() if t["customerTransactionId"] == customer_transaction_id]

    def set_transfer_status(self, transfer_id: int | str, status: str) -> None:
        with self.lock:
            self.state.transfers[int(transfer_id)]["status"] = status

    def signed_state_change(self, transfer_id: int | str, *, state: str | None = None) -> tuple[bytes, str]:
        """A ``transfers#state-change`` delivery body and its X-Signature-SHA256 header value."""
        with self.lock:
            transfer = self.state.transfers[int(transfer_id)]
            body = json.dumps(
                {
                    "data": {
                        "resource": {
                            "type": "transfer",
                            "id": transfer["id"],
                            "profile_id": self.profile_id,
                            "account_id": transfer["targetAccount"],
                        },
                        "current_state": state or transfer["status"],
                        "previous_state": "processing",
                        "occurred_at": "2025-01-02T10:00:00Z",
                    },
                    "subscription_id": str(uuid.uuid4()),
                    "event_type": "transfers#state-change",
                    "schema_version": "2.0.0",
                    "sent_at": "2025-01-02T10:00:01Z",
                }
            ).encode()
        signature = self.private_key.sign(body, padding.PKCS1v15(), hashes.SHA256())
        return body, base64.b64encode(signature).decode()

    def _take_rule(self, method: str, path: str) -> _Rule | None:
        with self.lock:
            for rule in self.rules:
                if rule.times > 0 and rule.method == method and path.startswith(rule.path_prefix):
                    rule.times -= 1
                    return rule
        return None

    # --- the API -------------------------------------------------------------------------------

    def _new_id(self) -> int:
        self.state.next_id += 1
        return self.state.next_id

    def handle(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, object]:
        with self.lock:
            self.state.requests.append((method, path))
            for pattern, route_method, handler in _ROUTES:
                match = pattern.fullmatch(path)
                if match and route_method == method:
                    return handler(self, body or {}, query, *match.groups())
        raise ApiError(404, "not.found", f"No route {method} {path}")

    def _create_account(self, body, query):
        if body.get("profile") != self.profile_id:
            raise ApiError(403, "profile.not-accessible", "Profile not accessible", "profile")
        name = (body.get("accountHolderName") or "").strip()
        if len(name.split()) < 2:
            raise ApiError(422, "NOT_VALID", "Please enter the recipient's first and last name.", "accountHolderName")
        currency, kind, details = body.get("currency"), body.get("type"), body.get("details") or {}
        if currency not in SUPPORTED:
            raise ApiError(422, "NOT_VALID", f"Currency {currency} is not supported.", "currency")
        if kind == "iban":
            try:
                country = IBAN(details.get("iban") or "").country_code
            except SchwiftyException:
                raise ApiError(422, "NOT_VALID", "Please specify a valid IBAN.", "iban")
        elif kind == "sort_code":
            if not re.fullmatch(r"\d{6}", details.get("sortCode") or ""):
                raise ApiError(422, "NOT_VALID", "Please specify a valid sort code.", "sortCode")
            if not re.fullmatch(r"\d{8}", details.get("accountNumber") or ""):
                raise ApiError(422, "NOT_VALID", "Please specify a valid account number.", "accountNumber")
            if self.modulus_check and not uk_modulus_ok(details["sortCode"], details["accountNumber"]):
                raise ApiError(422, "NOT_VALID", "Please specify a valid account number.", "accountNumber")
            country = "GB"
        elif kind == "aba":
            if not re.fullmatch(r"\d{9}", details.get("abartn") or ""):
                raise ApiError(422, "NOT_VALID", "Please specify a valid ACH routing number.", "abartn")
            if not re.fullmatch(r"\d{4,17}", details.get("accountNumber") or ""):
                raise ApiError(422, "NOT_VALID", "Please specify a valid account number.", "accountNumber")
            if details.get("accountType") not in {"CHECKING", "SAVINGS"}:
                raise ApiError(422, "NOT_VALID", "Please choose an account type.", "accountType")
            address = details.get("address") or {}
            for key in ("country", "city", "postCode", "firstLine"):
                if not address.get(key):
                    raise ApiError(422, "NOT_VALID", f"Recipient address {key} is required.", f"address.{key}")
            country = "US"
        else:
            raise ApiError(422, "NOT_VALID", f"Unknown recipient type {kind}.", "type")
        account = {
            "id": self._new_id(),
            "profile": self.profile_id,
            "accountHolderName": name,
            "currency": currency,
            "country": country,
            "type": kind,
            "details": details,
            "active": True,
        }
        self.state.accounts[account["id"]] = account
        return 200, account

    def _create_quote(self, body, query, profile_id):
        if int(profile_id) != self.profile_id:
            raise ApiError(403, "profile.not-accessible", "Profile not accessible")
        source, target = body.get("sourceCurrency"), body.get("targetCurrency")
        for key, value in (("sourceCurrency", source), ("targetCurrency", target)):
            if value not in SUPPORTED:
                raise ApiError(422, "NOT_VALID", f"{key} {value} is not supported.", key)
        if ("sourceAmount" in body) == ("targetAmount" in body):
            raise ApiError(422, "NOT_VALID", "Provide either sourceAmount or targetAmount.", "targetAmount")
        amount = body.get("targetAmount", body.get("sourceAmount"))
        if not isinstance(amount, Decimal | int) or amount <= 0:
            raise ApiError(422, "NOT_VALID", "Amount must be a positive number.", "targetAmount")
        if body.get("targetAccount") is not None and body["targetAccount"] not in self.state.accounts:
            raise ApiError(422, "NOT_VALID", "Unknown recipient account.", "targetAccount")
        quote = {
            "id": str(uuid.uuid4()),
            "sourceCurrency": source,
            "targetCurrency": target,
            "sourceAmount": Decimal(amount),
            "targetAmount": Decimal(amount),
            "rate": 1,
            "profile": self.profile_id,
            "payOut": "BANK_TRANSFER",
            "status": "PENDING",
            "targetAccount": body.get("targetAccount"),
            "rateType": "FIXED",
        }
        self.state.quotes[quote["id"]] = quote
        return 200, quote

    def _create_transfer(self, body, query):
        ctid = body.get("customerTransactionId") or ""
        try:
            uuid.UUID(ctid)
        except ValueError:
            raise ApiError(422, "NOT_VALID", "customerTransactionId must be a UUID.", "customerTransactionId")
        if ctid in self.state.by_customer_transaction_id:  # a retry: answer the transfer we already have
            return 200, self.state.transfers[self.state.by_customer_transaction_id[ctid]]
        quote = self.state.quotes.get(body.get("quoteUuid") or "")
        if quote is None:
            raise ApiError(422, "NOT_VALID", "Quote not found.", "quoteUuid")
        if quote["status"] != "PENDING":
            raise ApiError(422, "error.quote.already-used", "A transfer already exists for this quote.", "quoteUuid")
        account = self.state.accounts.get(body.get("targetAccount"))
        if account is None:
            raise ApiError(422, "NOT_VALID", "Recipient account not found.", "targetAccount")
        reference = (body.get("details") or {}).get("reference") or ""
        if len(reference) > REFERENCE_LIMITS[quote["targetCurrency"]]:
            raise ApiError(422, "NOT_VALID", "Reference is too long.", "details.reference")
        quote["status"] = "COMPLETED"
        transfer = {
            "id": self._new_id(),
            "user": 1,
            "targetAccount": account["id"],
            "sourceAccount": None,
            "quote": None,
            "quoteUuid": quote["id"],
            "status": "incoming_payment_waiting",
            "reference": reference,
            "rate": 1,
            "created": "2025-01-02 10:00:00",
            "business": None,
            "details": {"reference": reference},
            "hasActiveIssues": False,
            "sourceCurrency": quote["sourceCurrency"],
            "sourceValue": quote["sourceAmount"],
            "targetCurrency": quote["targetCurrency"],
            "targetValue": quote["targetAmount"],
            "customerTransactionId": ctid,
        }
        self.state.transfers[transfer["id"]] = transfer
        self.state.by_customer_transaction_id[ctid] = transfer["id"]
        return 200, transfer

    def _fund(self, body, query, profile_id, transfer_id):
        transfer = self.state.transfers.get(int(transfer_id))
        if transfer is None:
            raise ApiError(404, "transfer.not-found", "Transfer does not exist")
        if int(profile_id) != self.profile_id:
            raise ApiError(403, "transfer.not-accessible-for-user", "Transfer not accessible")
        if body.get("type") != "BALANCE":
            raise ApiError(422, "NOT_VALID", "Unsupported payment type.", "type")
        if transfer["status"] != "incoming_payment_waiting":
            raise ApiError(422, "transfer.invalid-state", "Transfer is not in a state that can be funded")
        currency = transfer["sourceCurrency"]
        if self.state.balances[currency] < transfer["sourceValue"]:
            return 200, {"type": "BALANCE", "status": "REJECTED", "errorCode": "transfer.insufficient_funds"}
        self.state.balances[currency] -= transfer["sourceValue"]
        transfer["status"] = "outgoing_payment_sent" if self.auto_settle else "processing"
        return 201, {"type": "BALANCE", "status": "COMPLETED", "errorCode": None}

    def _requirements(self, body, query):
        for key in ("source", "target", "sourceAmount"):
            if not query.get(key):
                raise ApiError(422, "NOT_VALID", f"{key} is required.", key)
        target = query["target"][0]
        if query["source"][0] not in SUPPORTED or target not in SUPPORTED:
            raise ApiError(422, "NOT_VALID", "Unsupported currency route.", "target")
        country = ((body.get("details") or {}).get("address") or {}).get("country", "")
        iban = _req_type("iban", "IBAN", [_req_field("iban", "IBAN", r"^[A-Z]{2}[0-9]{2}[A-Z0-9 ]{11,34}$")])
        if target == "GBP":
            check = {
                "url": f"{self.base_url}/v1/validators/sort-code-account-number",
                "params": [
                    {"key": "sortCode", "parameterName": "sortCode", "required": True},
                    {"key": "accountNumber", "parameterName": "accountNumber", "required": True},
                ],
            }
            sort_code = [
                _req_field("sortCode", "UK sort code", r"^[0-9]{6}$", example="40-30-20"),
                _req_field("accountNumber", "Account number", r"^[0-9]{8}$", example="12345678", check=check),
            ]
            return 200, [_req_type("sort_code", "Local bank account", sort_code), iban]
        if target == "USD":
            aba = [
                _req_field(
                    "abartn",
                    "ACH routing number",
                    r"^[0-9]{9}$",
                    check={
                        "url": f"{self.base_url}/v1/validators/abartn",
                        "params": [{"key": "abartn", "parameterName": "abartn", "required": True}],
                    },
                ),
                _req_field("accountNumber", "Account number", r"^[0-9]{4,17}$"),
                _req_field("accountType", "Account type", choices={"CHECKING": "Checking", "SAVINGS": "Savings"}),
                _req_field("address.country", "Country", choices={"US": "United States", "GB": "United Kingdom"})
                | {"refreshRequirementsOnChange": True},
                _req_field("address.city", "City"),
                _req_field("address.firstLine", "Address"),
                _req_field("address.postCode", "Post code"),
            ]
            if country == "US":
                aba.append(_req_field("address.state", "State", choices=US_STATES))
            return 200, [_req_type("aba", "Local bank account", aba)]
        return 200, [iban]

    def _validate_sort_code_account(self, body, query):
        sort_code, number = query.get("sortCode", [""])[0], query.get("accountNumber", [""])[0]
        if not uk_modulus_ok(sort_code, number):
            raise ApiError(400, "VALIDATION_NOT_SUCCESSFUL", "Please enter a valid account number.", "accountNumber")
        return 200, {"validation": "success"}

    def _validate_abartn(self, body, query):
        if not _aba_ok(query.get("abartn", [""])[0]):
            raise ApiError(400, "VALIDATION_NOT_SUCCESSFUL", "Please enter a valid routing number.", "abartn")
        return 200, {"validation": "success"}

    def _get_transfer(self, body, query, transfer_id):
        transfer = self.state.transfers.get(int(transfer_id))
        if transfer is None:
            raise ApiError(404, "transfer.not-found", "Transfer does not exist")
        return 200, transfer

    def _list_transfers(self, body, query):
        if int(query.get("profile", ["0"])[0]) != self.profile_id:
            raise ApiError(403, "profile.not-accessible", "Profile not accessible", "profile")
        limit, offset = int(query.get("limit", ["100"])[0]), int(query.get("offset", ["0"])[0])
        newest_first = sorted(self.state.transfers.values(), key=lambda t: -t["id"])
        return 200, newest_first[offset : offset + limit]


def _req_field(key: str, name: str, regexp: str | None = None, *, example="", choices=None, check=None) -> dict:
    return {
        "key": key,
        "name": name,
        "type": "select" if choices else "text",
        "refreshRequirementsOnChange": False,
        "required": True,
        "displayFormat": None,
        "example": example,
        "minLength": None,
        "maxLength": None,
        "validationRegexp": regexp,
        "validationAsync": check,
        "valuesAllowed": [{"key": k, "name": v} for k, v in choices.items()] if choices else None,
    }


def _req_type(kind: str, title: str, fields: list[dict]) -> dict:
    legal = _req_field("legalType", "Recipient type", choices={"PRIVATE": "Person", "BUSINESS": "Business"})
    return {
        "type": kind,
        "title": title,
        "usageInfo": None,
        "fields": [{"name": f["name"], "group": [f]} for f in [legal, *fields]],
    }


_ROUTES = [
    (re.compile(r"/v1/account-requirements"), "GET", FakeWise._requirements),
    (re.compile(r"/v1/account-requirements"), "POST", FakeWise._requirements),
    (re.compile(r"/v1/validators/sort-code-account-number"), "GET", FakeWise._validate_sort_code_account),
    (re.compile(r"/v1/validators/abartn"), "GET", FakeWise._validate_abartn),
    (re.compile(r"/v1/accounts"), "POST", FakeWise._create_account),
    (re.compile(r"/v3/profiles/(\d+)/quotes"), "POST", FakeWise._create_quote),
    (re.compile(r"/v1/transfers"), "POST", FakeWise._create_transfer),
    (re.compile(r"/v3/profiles/(\d+)/transfers/(\d+)/payments"), "POST", FakeWise._fund),
    (re.compile(r"/v1/transfers/(\d+)"), "GET", FakeWise._get_transfer),
    (re.compile(r"/v1/transfers"), "GET", FakeWise._list_transfers),
]


def _encode(payload: object) -> bytes:
    # The fake may use floats: it only echoes amounts, the adapter never reads them back as money.
    return json.dumps(
        payload, default=lambda value: float(value) if isinstance(value, Decimal) else str(value)
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    wise: FakeWise
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep test output clean
        pass

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Authorization") != f"Bearer {self.wise.token}":
            self._send(401, {"error": "unauthorized", "error_description": "Full authentication is required"})
            return
        rule = self.wise._take_rule(method, url.path)
        if rule and rule.status:
            self._send(
                rule.status,
                rule.body or {"errors": [{"code": "error.system", "message": "Internal error", "path": None}]},
            )
            return
        if rule and rule.delay and not rule.after_processing:
            self.wise.stopping.wait(rule.delay)
        try:
            body = json.loads(raw, parse_float=Decimal) if raw else None
            status, payload = self.wise.handle(method, url.path, parse_qs(url.query), body)
        except ApiError as exc:
            status, payload = exc.status, exc.body()
        except ValueError:
            status, payload = 400, {"errors": [{"code": "NOT_VALID", "message": "Malformed JSON", "path": None}]}
        if rule and rule.delay and rule.after_processing:
            self.wise.stopping.wait(rule.delay)
        self._send(status, payload)

    def _send(self, status: int, payload: object) -> None:
        data = _encode(payload)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): the work above is done, as on a real server
