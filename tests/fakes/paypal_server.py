"""A fake of PayPal's Payouts API on 127.0.0.1, for the PayPal rail's tests and the demo. It follows
PayPal's documented contract (developer.paypal.com: "Payouts API", "Track payout item status",
"Payouts webhook event names", "Integrate webhooks"):

- ``POST /v1/oauth2/token`` with HTTP Basic client credentials and ``grant_type=client_credentials``
  answers a bearer token; every other call needs it (401 ``invalid_token`` otherwise);
- ``POST /v1/payments/payouts`` (``sender_batch_header`` + ``items``, ``recipient_type`` EMAIL,
  amounts as decimal strings) answers 201 with the ``batch_header`` (``PENDING``): the batch is
  processed asynchronously. A ``sender_batch_id`` used before is refused — 400
  ``USER_BUSINESS_ERROR`` with a HATEOAS link to the first batch — and pays nothing;
  not enough balance answers 422 ``INSUFFICIENT_FUNDS``;
- ``GET /v1/payments/payouts/{payout_batch_id}`` and ``GET /v1/payments/payouts-item/{id}``;
- ``POST /v1/payments/payouts-item/{id}/cancel`` cancels an ``UNCLAIMED`` item (answered
  ``RETURNED``, the money back in the balance); anything else is refused;
- webhooks: ``event(sender_item_id, event_type)`` builds a ``PAYMENT.PAYOUTS-ITEM.*`` event and its
  headers, signed as PayPal signs (RSA-SHA256 over ``transmission id|time|webhook id|crc32(body)``)
  with a certificate served at ``GET /v1/notifications/certs/{name}``.

Progress: an item waits ``PENDING`` until ``complete()`` (or, with ``settle_after_seconds``, until
that long after its batch was made: the demo's setting), then takes its receiver's behaviour:
``SUCCESS`` by default, or what ``behave(receiver, status, error=…)`` set (``UNCLAIMED``,
``FAILED`` with an error name, ``BLOCKED`` …).
"""

import base64
import json
import re
import secrets
import uuid
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from tests.fakes.json_server import ApiProblem, FakeJsonServer, Request

EVENT_SUMMARIES = {
    "SUCCESS": "PAYMENT.PAYOUTS-ITEM.SUCCEEDED",
    "UNCLAIMED": "PAYMENT.PAYOUTS-ITEM.UNCLAIMED",
    "RETURNED": "PAYMENT.PAYOUTS-ITEM.RETURNED",
    "FAILED": "PAYMENT.PAYOUTS-ITEM.FAILED",
    "BLOCKED": "PAYMENT.PAYOUTS-ITEM.BLOCKED",
}


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _problem(status: int, name: str, message: str, **extra) -> ApiProblem:
    return ApiProblem(status, {"name": name, "message": message, "debug_id": secrets.token_hex(6), **extra})


def signing_identity(private_key: rsa.RSAPrivateKey) -> bytes:
    """A self-signed certificate (PEM) for the fake's webhook key, valid for a day either side."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "messageverificationcerts.fake.paypal")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - timedelta(days=1))
        .not_valid_after(_now() + timedelta(days=1))
        .sign(private_key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


@dataclass
class FakePayPalState:
    balance: dict[str, Decimal]
    batches: dict[str, dict] = field(default_factory=dict)  # payout_batch_id → batch
    by_sender_batch: dict[str, str] = field(default_factory=dict)
    items: dict[str, dict] = field(default_factory=dict)  # payout_item_id → item
    created: dict[str, datetime] = field(default_factory=dict)
    behaviours: dict[str, tuple[str, str]] = field(default_factory=dict)  # receiver → (status, error)
    tokens: set[str] = field(default_factory=set)


class FakePayPal(FakeJsonServer):
    name = "paypal"

    def __init__(
        self,
        *,
        private_key: rsa.RSAPrivateKey | None = None,
        client_id: str = "fake-client-id",
        client_secret: str = "fake-client-secret",  # noqa: S107 - a fake's credential
        webhook_id: str = "WH0FAKE0WEBHOOK",
        balance: dict[str, str] | None = None,
        settle_after_seconds: float | None = None,
    ):
        super().__init__()
        self.private_key = private_key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.certificate_pem = signing_identity(self.private_key)
        self.client_id, self.client_secret, self.webhook_id = client_id, client_secret, webhook_id
        self.settle_after = settle_after_seconds
        self.state = FakePayPalState(
            balance={k: Decimal(v) for k, v in (balance or {"EUR": "100000.00", "USD": "100000.00"}).items()}
        )
        self.routes = [
            ("POST", re.compile(r"/v1/oauth2/token"), self._token),
            ("GET", re.compile(r"/v1/notifications/certs/([A-Za-z0-9\-]+)"), self._cert),
            ("POST", re.compile(r"/v1/payments/payouts"), self._create),
            ("GET", re.compile(r"/v1/payments/payouts/([A-Z0-9]+)"), self._batch_get),
            ("GET", re.compile(r"/v1/payments/payouts-item/([A-Z0-9]+)"), self._item_get),
            ("POST", re.compile(r"/v1/payments/payouts-item/([A-Z0-9]+)/cancel"), self._cancel),
        ]

    # --- test controls -------------------------------------------------------------------------

    @property
    def cert_url(self) -> str:
        return f"{self.base_url}/v1/notifications/certs/CERT-fake-1"

    def behave(self, receiver: str, status: str, *, error: str = "") -> None:
        self.state.behaviours[receiver] = (status, error)

    def item_for(self, sender_item_id: str) -> dict | None:
        with self.lock:
            for item in self.state.items.values():
                if item["payout_item"]["sender_item_id"] == sender_item_id:
                    return item
        return None

    def batches_for(self, sender_batch_id: str) -> int:
        with self.lock:
            return sum(
                1 for b in self.state.batches.values() if b["sender_batch_header"]["sender_batch_id"] == sender_batch_id
            )

    def complete(self, sender_item_id: str) -> dict:
        """Process the item as its receiver's behaviour says (``SUCCESS`` by default)."""
        with self.lock:
            item = self.item_for(sender_item_id)
            self._process(item)
            return dict(item)

    def set_status(self, sender_item_id: str, status: str) -> None:
        """Move an item on as PayPal would later (``RETURNED`` after 30 unclaimed days, ``REFUNDED``)."""
        with self.lock:
            item = self.item_for(sender_item_id)
            if status in ("RETURNED", "REFUNDED", "REVERSED") and item["transaction_status"] != status:
                amount = item["payout_item"]["amount"]
                self.state.balance[amount["currency"]] += Decimal(amount["value"])
            item["transaction_status"] = status

    def event(self, sender_item_id: str, event_type: str | None = None) -> tuple[bytes, dict[str, str]]:
        """A webhook delivery for the item as it is now: the body and PayPal's signature headers
        (as Django test client keyword arguments)."""
        with self.lock:
            item = dict(self.item_for(sender_item_id))
        kind = event_type or EVENT_SUMMARIES.get(item["transaction_status"], "PAYMENT.PAYOUTS-ITEM.HELD")
        body = json.dumps(
            {
                "id": f"WH-{secrets.token_hex(8).upper()}",
                "event_version": "1.0",
                "create_time": _stamp(_now()),
                "resource_type": "payouts_item",
                "event_type": kind,
                "summary": f"A payout item is {item['transaction_status'].lower()}.",
                "resource": item,
            }
        ).encode()
        return body, self.sign(body)

    def sign(self, body: bytes, *, webhook_id: str | None = None) -> dict[str, str]:
        transmission_id = str(uuid.uuid4())
        transmission_time = _stamp(_now())
        message = f"{transmission_id}|{transmission_time}|{webhook_id or self.webhook_id}|{zlib.crc32(body)}"
        signature = self.private_key.sign(message.encode(), padding.PKCS1v15(), hashes.SHA256())
        return {
            "HTTP_PAYPAL_TRANSMISSION_ID": transmission_id,
            "HTTP_PAYPAL_TRANSMISSION_TIME": transmission_time,
            "HTTP_PAYPAL_TRANSMISSION_SIG": base64.b64encode(signature).decode(),
            "HTTP_PAYPAL_CERT_URL": self.cert_url,
            "HTTP_PAYPAL_AUTH_ALGO": "SHA256withRSA",
        }

    # --- the API -------------------------------------------------------------------------------

    def authenticate(self, request: Request) -> None:
        if request.path == "/v1/oauth2/token" or request.path.startswith("/v1/notifications/certs/"):
            return
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token not in self.state.tokens:
            raise ApiProblem(401, {"error": "invalid_token", "error_description": "Token verification failed"})

    def _token(self, request: Request):
        expected = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {expected}":
            raise ApiProblem(401, {"error": "invalid_client", "error_description": "Client Authentication failed"})
        if request.raw != b"grant_type=client_credentials":
            raise ApiProblem(400, {"error": "unsupported_grant_type", "error_description": "Grant type is required"})
        token = f"A21AA{secrets.token_hex(16)}"
        with self.lock:
            self.state.tokens.add(token)
        return 200, {
            "scope": "https://uri.paypal.com/payments/payouts",
            "access_token": token,
            "token_type": "Bearer",
            "app_id": "APP-FAKE",
            "expires_in": 32400,
            "nonce": secrets.token_hex(8),
        }

    def _cert(self, request: Request, name: str):
        return 200, self.certificate_pem, {"Content-Type": "application/x-pem-file"}

    def _create(self, request: Request):
        body = request.json()
        header = body.get("sender_batch_header") or {}
        sender_batch_id = str(header.get("sender_batch_id") or "")
        items = body.get("items") or []
        if not items or len(items) > 15000:
            raise _problem(400, "VALIDATION_ERROR", "Invalid request - see details.")
        with self.lock:
            first = self.state.by_sender_batch.get(sender_batch_id) if sender_batch_id else None
            if first:
                href = f"{self.base_url}/v1/payments/payouts/{first}"
                raise _problem(
                    400,
                    "USER_BUSINESS_ERROR",
                    "User business error.",
                    details=[
                        {
                            "field": "sender_batch_id",
                            "location": "body",
                            "issue": f"Batch with given sender_batch_id already exists: {sender_batch_id}",
                        }
                    ],
                    links=[{"href": href, "rel": "self", "method": "GET", "encType": "application/json"}],
                )
            total: dict[str, Decimal] = {}
            for item in items:
                amount = item.get("amount") or {}
                try:
                    value = Decimal(str(amount.get("value")))
                except InvalidOperation:
                    raise _problem(400, "VALIDATION_ERROR", "Invalid amount.")
                if value <= 0 or "@" not in str(item.get("receiver") or ""):
                    raise _problem(400, "VALIDATION_ERROR", "Invalid request - see details.")
                total[amount.get("currency")] = total.get(amount.get("currency"), Decimal(0)) + value
            for currency, value in total.items():
                if self.state.balance.get(currency, Decimal(0)) < value:
                    raise _problem(422, "INSUFFICIENT_FUNDS", "Sender does not have sufficient funds.")
            for currency, value in total.items():
                self.state.balance[currency] -= value
            batch_id = secrets.token_hex(6).upper()
            created = _now()
            batch = {
                "payout_batch_id": batch_id,
                "batch_status": "PENDING",
                "time_created": _stamp(created),
                "sender_batch_header": header,
            }
            self.state.batches[batch_id] = batch
            if sender_batch_id:
                self.state.by_sender_batch[sender_batch_id] = batch_id
            self.state.created[batch_id] = created
            for item in items:
                item_id = secrets.token_hex(6).upper()
                self.state.items[item_id] = {
                    "payout_item_id": item_id,
                    "transaction_status": "PENDING",
                    "payout_batch_id": batch_id,
                    "payout_item_fee": {"currency": item["amount"]["currency"], "value": "0.00"},
                    "payout_item": {k: item[k] for k in item if k != "recipient_type"}
                    | {"recipient_type": item.get("recipient_type") or header.get("recipient_type") or "EMAIL"},
                    "time_processed": _stamp(created),
                    "links": [{"href": f"{self.base_url}/v1/payments/payouts-item/{item_id}", "rel": "item"}],
                }
        return 201, {"batch_header": dict(batch), "links": self._links(batch_id)}

    def _links(self, batch_id: str) -> list[dict]:
        return [{"href": f"{self.base_url}/v1/payments/payouts/{batch_id}", "rel": "self", "method": "GET"}]

    def _advance(self, batch_id: str) -> None:
        if self.settle_after is None or _now() - self.state.created[batch_id] < timedelta(seconds=self.settle_after):
            return
        for item in self.state.items.values():
            if item["payout_batch_id"] == batch_id and item["transaction_status"] == "PENDING":
                self._process(item)

    def _process(self, item: dict) -> None:
        if item["transaction_status"] != "PENDING":
            return
        status, error = self.state.behaviours.get(item["payout_item"]["receiver"], ("SUCCESS", ""))
        item["transaction_status"] = status
        item["time_processed"] = _stamp(_now())
        if error:
            item["errors"] = {"name": error, "message": error.replace("_", " ").capitalize()}
        if status in ("FAILED", "BLOCKED"):
            amount = item["payout_item"]["amount"]
            self.state.balance[amount["currency"]] += Decimal(amount["value"])
        batch = self.state.batches[item["payout_batch_id"]]
        if all(i["transaction_status"] != "PENDING" for i in self._items_of(batch["payout_batch_id"])):
            batch["batch_status"] = "SUCCESS"
            batch["time_completed"] = _stamp(_now())

    def _items_of(self, batch_id: str) -> list[dict]:
        return [i for i in self.state.items.values() if i["payout_batch_id"] == batch_id]

    def _batch_get(self, request: Request, batch_id: str):
        with self.lock:
            batch = self.state.batches.get(batch_id)
            if batch is None:
                raise _problem(404, "INVALID_RESOURCE_ID", "The requested resource ID was not found.")
            self._advance(batch_id)
            return 200, {
                "batch_header": dict(batch),
                "items": [dict(i) for i in self._items_of(batch_id)],
                "links": self._links(batch_id),
            }

    def _item_get(self, request: Request, item_id: str):
        with self.lock:
            item = self.state.items.get(item_id)
            if item is None:
                raise _problem(404, "INVALID_RESOURCE_ID", "The requested resource ID was not found.")
            self._advance(item["payout_batch_id"])
            return 200, dict(item)

    def _cancel(self, request: Request, item_id: str):
        with self.lock:
            item = self.state.items.get(item_id)
            if item is None:
                raise _problem(404, "INVALID_RESOURCE_ID", "The requested resource ID was not found.")
            if item["transaction_status"] != "UNCLAIMED":
                raise _problem(400, "VALIDATION_ERROR", "Only an unclaimed item can be cancelled.")
            self.set_status(item["payout_item"]["sender_item_id"], "RETURNED")
            return 200, dict(item)


def main() -> None:
    """Serve the fake for the demo (``python -m tests.fakes.paypal_server``): items are paid a
    few seconds after their batch; prints the settings that point the ``paypal`` rail at it."""
    fake = FakePayPal(settle_after_seconds=5).start()
    print(
        f"PAYPAL_BASE_URL={fake.base_url} PAYPAL_CLIENT_ID={fake.client_id} "
        f"PAYPAL_CLIENT_SECRET={fake.client_secret} PAYPAL_WEBHOOK_ID={fake.webhook_id}",
        flush=True,
    )
    try:
        fake.stopping.wait()
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
