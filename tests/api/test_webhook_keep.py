"""A send task's POSTs to one endpoint share a connection while the endpoint keeps it open
(``campaigns.webhook_keep``), and every delivery still arrives once when it does not."""

import socket
import threading

import pytest

from campaigns.models import DeliveryStatus, WebhookDelivery
from campaigns.webhook_keep import KeptConnections
from campaigns.webhook_targets import webhook_post
from campaigns.webhooks import webhook_deliveries_send, webhook_endpoint_create, webhook_events_collect
from tests.api.conftest import ingest
from tests.fakes.webhook_receiver import Receiver


@pytest.fixture
def receivers(settings):
    settings.WEBHOOK_ALLOW_HTTP = True
    made = []

    def make(**options):
        made.append(Receiver(**options))
        return made[-1]

    yield make
    for receiver in made:
        receiver.server.shutdown()


def _send_three(brand, campaign, receiver) -> list[WebhookDelivery]:
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    for _ in range(3):
        ingest(campaign)
    webhook_events_collect()
    ids = sorted(WebhookDelivery.objects.values_list("pk", flat=True))
    WebhookDelivery.objects.filter(pk__in=ids).update(status=DeliveryStatus.PENDING, queued_at=None)
    sent = webhook_deliveries_send(delivery_ids=ids)
    assert sent.statuses == dict.fromkeys(ids, DeliveryStatus.DELIVERED)
    return list(WebhookDelivery.objects.order_by("pk"))


def test_a_send_task_posts_every_delivery_to_one_endpoint_on_one_connection(brand, campaign, receivers):
    receiver = receivers(keep_alive=True)
    deliveries = _send_three(brand, campaign, receiver)
    assert len(receiver.requests) == 3 and receiver.connections == 1
    assert sorted(h["JoyBack-Event-Id"] for h, _ in receiver.requests) == sorted(d.event.public_id for d in deliveries)


def test_an_endpoint_that_closes_each_connection_gets_a_new_one_per_post(brand, campaign, receivers):
    receiver = receivers()  # HTTP/1.0, no length: nothing to keep
    _send_three(brand, campaign, receiver)
    assert len(receiver.requests) == 3 and receiver.connections == 3


def test_a_kept_connection_the_endpoint_closed_meanwhile_is_not_used(receivers):
    receiver = receivers(keep_alive=True, close_idle=True)
    _post_to_one_that_closes_after_answering(receiver, times=3)
    assert len(receiver.requests) == 3 and receiver.connections == 3


def _post_to_one_that_closes_after_answering(receiver, *, times: int) -> None:
    """POST ``times`` in one send, each answered 200, waiting each time for the endpoint's close."""
    with KeptConnections() as kept:
        for _ in range(times):
            receiver.closed.clear()
            answer = webhook_post(url=receiver.url, body=b"{}", headers={}, timeout=5, kept=kept)
            assert answer.status == 200, answer.error
            assert receiver.closed.wait(5)


def test_connections_are_kept_per_endpoint_and_closed_with_the_send(receivers):
    first, second = receivers(keep_alive=True), receivers(keep_alive=True)
    with KeptConnections() as kept:
        for url in (first.url, second.url, first.url, second.url):
            assert webhook_post(url=url, body=b"{}", headers={}, timeout=5, kept=kept).status == 200
        held = list(kept._open.values())
        assert len(held) == 2 and all(c.sock is not None for c in held)
    assert all(c.sock is None for c in held)
    assert (first.connections, second.connections) == (1, 1)


class RawEndpoint:
    """An endpoint on 127.0.0.1 answering its n-th POST with ``answers[n]`` (raw bytes; the last
    one for every POST after), keeping the connection open; counts connections and POSTs."""

    def __init__(self, answers: list[bytes]):
        self.answers, self.connections, self.posts = answers, 0, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hooks"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn):
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, data = data.split(b"\r\n\r\n", 1)
            length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
            while len(data) < length:
                data += conn.recv(65536)
            data = data[length:]
            answer = self.answers[min(self.posts, len(self.answers) - 1)]
            self.posts += 1
            conn.sendall(answer)

    def close(self):
        self.listener.close()


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@pytest.mark.parametrize(
    "first_answer, why",
    [
        (b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK, "an interim answer: its final one is still to come"),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "the endpoint said it closes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "no length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000, "longer than is worth reading"),
    ],
)
def test_a_connection_whose_answer_cannot_carry_another_post_is_not_kept(settings, first_answer, why):
    settings.WEBHOOK_ALLOW_HTTP = True
    endpoint = RawEndpoint([first_answer, OK])
    try:
        with KeptConnections() as kept:
            first = webhook_post(url=endpoint.url, body=b"{}", headers={}, timeout=5, kept=kept)
            assert kept._open == {}, why
            second = webhook_post(url=endpoint.url, body=b"{}", headers={}, timeout=5, kept=kept)
        assert second.status == 200 and second.snippet == "ok"
        assert endpoint.connections == 2
        assert first.status in (103, 200)
    finally:
        endpoint.close()


def test_an_answer_whose_rest_never_comes_still_counts_and_its_connection_is_dropped(settings):
    """A 2xx whose body stops short of its length: the POST is answered (delivered), the
    connection cannot carry another."""
    settings.WEBHOOK_ALLOW_HTTP = True
    endpoint = RawEndpoint([b"HTTP/1.1 200 OK\r\nContent-Length: 900\r\n\r\n" + b"y" * 600, OK])
    try:
        with KeptConnections() as kept:
            first = webhook_post(url=endpoint.url, body=b"{}", headers={}, timeout=0.5, kept=kept)
            assert first.status == 200 and first.snippet == "y" * 500
            assert kept._open == {}
    finally:
        endpoint.close()


def test_a_post_the_endpoint_closed_its_kept_connection_on_goes_once_more_on_a_new_one(receivers, monkeypatch):
    """The endpoint's idle timeout closing the connection just as the POST goes out (after the
    check before reuse): no answer came, so the POST is sent again on a new connection."""
    receiver = receivers(keep_alive=True, close_idle=True)
    monkeypatch.setattr(KeptConnections, "take", lambda self, key: self._open.pop(key, None))  # no check
    _post_to_one_that_closes_after_answering(receiver, times=2)
    assert len(receiver.requests) == 2 and receiver.connections == 2
