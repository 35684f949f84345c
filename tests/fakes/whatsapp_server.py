"""A fake WhatsApp Cloud API on 127.0.0.1 for the outbound sender's tests.

It follows the documented contract of ``POST /{version}/{phone-number-id}/messages``: a bearer
token (else 401 with Graph error code 190), ``messaging_product: whatsapp``, template messages
only (what a business may send to start a conversation), templates known by name and language
(else 132001), exactly as many body parameters as the template has (else 132000) and the URL
button's parameter when the template has a button (else 131008). A success answers
``{"messaging_product", "contacts": [{"input", "wa_id"}], "messages": [{"id": "wamid.…"}]}``;
every error is ``{"error": {"message": "(#code) title", "type", "code", "error_data":
{"messaging_product", "details"}, "fbtrace_id"}}``.

Test controls: ``undeliverable`` numbers answer 131026; ``fail_next`` answers a given code and
HTTP status ``times`` times (throttling 130429, a 500, …); ``messages`` lists what was accepted.
"""

import json
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The project's templates (payouts.notices): body parameter count, and whether a URL button.
TEMPLATES = {
    "payout_paid": (2, True),
    "payout_failed": (3, True),
    "payout_returned": (2, True),
    "account_changed": (1, True),
    "account_changed_no_link": (1, False),
    "iban_needed": (2, True),
    "claim_link": (1, True),
    "reward_reminder": (3, True),
    "reward_expired": (2, True),
}
LANGUAGES = {"en", "it"}
TITLES = {
    131008: "Required parameter is missing",
    131026: "Message undeliverable",
    130429: "Rate limit hit",
    131000: "Something went wrong",
    132000: "Number of parameters does not match the expected number of params",
    132001: "Template name does not exist in the translation",
    100: "Invalid parameter",
    190: "Access token has expired",
}


@dataclass
class _Failure:
    code: int
    status: int
    times: int


class FakeWhatsAppCloud:
    def __init__(self, *, token: str = "wa-test-token", phone_number_id: str = "106540352242922"):  # noqa: S107
        self.token = token
        self.phone_number_id = phone_number_id
        self.version = "v23.0"
        self.undeliverable: set[str] = set()
        self.messages: list[dict] = []
        self.requests = 0
        self.failures: list[_Failure] = []
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> "FakeWhatsAppCloud":
        fake = self

        class Handler(_Handler):
            cloud = fake

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, code: int, *, status: int = 400, times: int = 1) -> None:
        with self.lock:
            self.failures.append(_Failure(code, status, times))

    def handle(self, path: str, authorization: str, raw: bytes) -> tuple[int, dict]:
        with self.lock:
            self.requests += 1
            if authorization != f"Bearer {self.token}":
                return _error(190, 401, "Error validating access token")
            if path != f"/{self.version}/{self.phone_number_id}/messages":
                return _error(100, 400, f"Unknown path {path}")
            for failure in self.failures:
                if failure.times > 0:
                    failure.times -= 1
                    return _error(failure.code, failure.status, "injected")
            try:
                body = json.loads(raw)
            except ValueError:
                return _error(100, 400, "The request body is not JSON")
            problem = self._invalid(body)
            if problem:
                return problem
            wamid = f"wamid.{uuid.uuid4().hex}"
            self.messages.append({**body, "id": wamid})
            to = body["to"]
            return 200, {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": wamid, "message_status": "accepted"}],
            }

    def _invalid(self, body: dict) -> tuple[int, dict] | None:
        if body.get("messaging_product") != "whatsapp" or body.get("type") != "template":
            return _error(100, 400, "messaging_product must be whatsapp; only template messages start a conversation")
        to = str(body.get("to", ""))
        if not to.isdigit():
            return _error(100, 400, "to must be a phone number")
        template = body.get("template") or {}
        known = TEMPLATES.get(template.get("name"))
        if known is None or (template.get("language") or {}).get("code") not in LANGUAGES:
            return _error(132001, 404, "template name or language not found")
        params, has_button = known
        components = {c.get("type"): c for c in template.get("components", [])}
        if len((components.get("body") or {}).get("parameters", [])) != params:
            return _error(132000, 400, f"expected {params} body parameters")
        button = components.get("button")
        if has_button and not (
            button
            and button.get("sub_type") == "url"
            and str(button.get("index")) == "0"
            and [p.get("type") for p in button.get("parameters", [])] == ["text"]
        ):
            return _error(131008, 400, "the URL button parameter is missing")
        if to in self.undeliverable:
            return _error(131026, 400, "Message failed to send because the recipient is not on WhatsApp")
        return None


def _error(code: int, status: int, details: str) -> tuple[int, dict]:
    title = TITLES.get(code, "Error")
    return status, {
        "error": {
            "message": f"(#{code}) {title}",
            "type": "OAuthException",
            "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": details},
            "fbtrace_id": uuid.uuid4().hex[:24],
        }
    }


class _Handler(BaseHTTPRequestHandler):
    cloud: FakeWhatsAppCloud
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep test output clean
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, payload = self.cloud.handle(self.path, self.headers.get("Authorization", ""), raw)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
