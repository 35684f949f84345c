"""A send task's POSTs to one endpoint share a connection while the endpoint keeps it open
(``campaigns.webhook_keep``), and every delivery still arrives once when it does not."""

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
    with KeptConnections() as kept:
        for _ in range(3):
            receiver.closed.clear()
            answer = webhook_post(url=receiver.url, body=b"{}", headers={}, timeout=5, kept=kept)
            assert answer.status == 200, answer.error
            assert receiver.closed.wait(5)
    assert len(receiver.requests) == 3 and receiver.connections == 3


def test_connections_are_kept_per_endpoint_and_closed_with_the_send(receivers):
    first, second = receivers(keep_alive=True), receivers(keep_alive=True)
    with KeptConnections() as kept:
        for url in (first.url, second.url, first.url, second.url):
            assert webhook_post(url=url, body=b"{}", headers={}, timeout=5, kept=kept).status == 200
        assert len(kept._open) == 2
    assert kept._open == {}
    assert (first.connections, second.connections) == (1, 1)
