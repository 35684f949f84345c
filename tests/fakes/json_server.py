"""The plumbing of a local fake JSON API on 127.0.0.1: a threaded HTTP server, a route table and
fault injection (``fail_next`` answers a status instead of processing; ``delay_next`` sleeps
before or *after* processing, so a client timeout can hit a request the fake carried out — the
case idempotency exists for). Each fake subclasses it with its provider's documented contract."""

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class ApiProblem(Exception):
    """An error answer: HTTP status, JSON body and extra headers."""

    def __init__(self, status: int, body: dict, headers: dict | None = None):
        super().__init__(body)
        self.status, self.body, self.headers = status, body, headers or {}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    raw: bytes

    def json(self) -> dict:
        try:
            parsed = json.loads(self.raw) if self.raw else {}
        except ValueError as exc:
            raise ApiProblem(400, {"status": 400, "title": "Malformed JSON", "detail": str(exc)}) from exc
        if not isinstance(parsed, dict):
            raise ApiProblem(400, {"status": 400, "title": "Malformed JSON", "detail": "an object is expected"})
        return parsed


@dataclass
class _Rule:
    method: str
    path_prefix: str
    times: int
    status: int = 0
    body: dict | None = None
    delay: float = 0.0
    after_processing: bool = True


Handler = Callable[..., tuple[int, object] | tuple[int, object, dict]]


class FakeJsonServer:
    """Subclasses fill ``routes`` with (method, path regex, handler(request, *groups)) and may
    override ``authenticate`` (raise ApiProblem to refuse)."""

    name = "fake"

    def __init__(self):
        self.lock = threading.RLock()
        self.rules: list[_Rule] = []
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        self.server: ThreadingHTTPServer | None = None
        self.routes: list[tuple[str, re.Pattern, Handler]] = []

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self):
        fake = self

        class _BoundHandler(_HttpHandler):
            server_fake = fake

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _BoundHandler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, name=f"fake-{self.name}", daemon=True
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

    # --- test controls -------------------------------------------------------------------------

    def fail_next(self, method: str, path_prefix: str, *, status: int, body: dict | None = None, times: int = 1):
        with self.lock:
            self.rules.append(_Rule(method, path_prefix, times, status=status, body=body))

    def delay_next(
        self, method: str, path_prefix: str, *, seconds: float, after_processing: bool = True, times: int = 1
    ):
        with self.lock:
            self.rules.append(_Rule(method, path_prefix, times, delay=seconds, after_processing=after_processing))

    def calls(self, method: str, path_prefix: str = "") -> int:
        with self.lock:
            return sum(1 for r in self.requests if r.method == method and r.path.startswith(path_prefix))

    def _take_rule(self, method: str, path: str) -> _Rule | None:
        with self.lock:
            for rule in self.rules:
                if rule.times > 0 and rule.method == method and path.startswith(rule.path_prefix):
                    rule.times -= 1
                    return rule
        return None

    # --- dispatch ------------------------------------------------------------------------------

    def authenticate(self, request: Request) -> None:
        """Raise ApiProblem for a request without valid credentials."""

    def dispatch(self, request: Request) -> tuple[int, object, dict]:
        with self.lock:
            self.requests.append(request)
        self.authenticate(request)
        for method, pattern, handler in self.routes:
            match = pattern.fullmatch(request.path)
            if match and method == request.method:
                answer = handler(request, *match.groups())
                return answer if len(answer) == 3 else (*answer, {})
        raise ApiProblem(
            404, {"status": 404, "title": "Not found", "detail": f"No route {request.method} {request.path}"}
        )


class _HttpHandler(BaseHTTPRequestHandler):
    server_fake: FakeJsonServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep test output clean
        pass

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def _serve(self, method: str) -> None:
        fake = self.server_fake
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        request = Request(
            method=method,
            path=url.path,
            query=parse_qs(url.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=self.rfile.read(length) if length else b"",
        )
        rule = fake._take_rule(method, url.path)
        if rule and rule.status:
            self._send(rule.status, rule.body or {"status": rule.status, "title": "Injected failure"}, {})
            return
        if rule and rule.delay and not rule.after_processing:
            fake.stopping.wait(rule.delay)
        try:
            status, payload, headers = fake.dispatch(request)
        except ApiProblem as exc:
            status, payload, headers = exc.status, exc.body, exc.headers
        if rule and rule.delay and rule.after_processing:
            fake.stopping.wait(rule.delay)
        self._send(status, payload, headers)

    def _send(self, status: int, payload: object, headers: dict) -> None:
        # bytes go as they are (a certificate), under the Content-Type the route names
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = dict(headers)
        try:
            self.send_response(status)
            self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): the work above is done, as on a real server
