"""The SSRF guard of outgoing webhooks: non-public addresses are refused at registration (service,
API) and again at delivery against the address actually connected to (DNS rebinding). The
resolver is the outside world here: a fake ``socket.getaddrinfo`` answers for the names below
and refuses every other name, so no test touches the network."""

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from campaigns import webhook_targets
from campaigns.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from campaigns.webhook_targets import address_refusal
from campaigns.webhooks import webhook_delivery_attempt, webhook_endpoint_create, webhook_events_collect
from core.exceptions import InvalidInput
from tests.api.conftest import assert_problem, ingest
from tests.fakes.webhook_receiver import Receiver

PUBLIC_V4, PUBLIC_V6 = "93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"

BLOCKED_URLS = [
    ("https://127.0.0.1/hooks", "loopback"),
    ("https://10.1.2.3/hooks", "private"),
    ("https://169.254.169.254/latest/meta-data/", "link-local"),
    ("https://[::1]/hooks", "loopback"),
    ("https://[::ffff:127.0.0.1]/hooks", "loopback"),
    ("https://internal.shop.example/hooks", "private"),  # the fake resolver says 10.0.0.7
    ("https://localhost/hooks", "loopback"),
    ("https://0.0.0.0/hooks", "unspecified"),
    ("https://224.0.0.1/hooks", "multicast"),
    ("https://100.64.0.1/hooks", "non-global"),
    ("https://[fd00::1]/hooks", "private"),
    ("https://[fe80::1]/hooks", "link-local"),
    ("https://[2002:a00:1::]/hooks", "private"),  # 6to4 wrapping 10.0.0.1
    ("https://mixed.shop.example/hooks", "private"),  # one public and one private record
]


@pytest.fixture
def dns(monkeypatch):
    """``records[name] = [addresses]``; ``lookups`` lists the names asked for. Address literals
    go to the real resolver (they need no network), any other name does not resolve."""
    records = {
        "hooks.shop.example": [PUBLIC_V4, PUBLIC_V6],
        "internal.shop.example": ["10.0.0.7"],
        "mixed.shop.example": [PUBLIC_V4, "192.168.1.20"],
        "localhost": ["127.0.0.1", "::1"],
    }
    lookups: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in records:
            lookups.append(host)
            return [
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port, 0, 0))
                if ":" in a
                else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in records[host]
            ]
        try:
            return real(host, port, *args, **{**kwargs, "flags": socket.AI_NUMERICHOST})
        except socket.gaierror:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return records, lookups


@pytest.fixture
def guarded(settings, dns):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    return dns


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"), ("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.0.1", "private"),
    ("169.254.169.254", "link-local"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.0.0.1", "private"), ("::", "unspecified"), ("0.0.0.0", "unspecified"), ("fe80::1%eth0", "link-local"),  # noqa: S104
    ("fec0::1", "site-local"), ("ff02::1", "multicast"), ("240.0.0.1", "reserved"), ("100.64.0.1", "non-global"),
    ("fd12:3456::1", "private"),
    (PUBLIC_V4, None), (PUBLIC_V6, None), ("8.8.8.8", None),
])  # fmt: skip
def test_address_refusal(address, reason):
    assert address_refusal(address) == reason


@pytest.mark.parametrize(("url", "reason"), BLOCKED_URLS)
def test_registration_refuses_non_public_targets(brand, guarded, url, reason):
    with pytest.raises(InvalidInput) as refused:
        webhook_endpoint_create(brand=brand, url=url, event_types=[])
    assert refused.value.code == "invalid_webhook_url" and refused.value.details["reason"] == reason
    assert not WebhookEndpoint.objects.exists()


def test_registration_accepts_a_public_name_and_refuses_one_that_does_not_resolve(brand, guarded):
    assert webhook_endpoint_create(brand=brand, url="https://hooks.shop.example/h", event_types=[]).endpoint.pk
    with pytest.raises(InvalidInput, match="does not resolve"):
        webhook_endpoint_create(brand=brand, url="https://nowhere.shop.example/h", event_types=[])
    assert WebhookEndpoint.objects.count() == 1


def test_http_is_refused_unless_allowed(brand, guarded):
    with pytest.raises(InvalidInput, match="https"):
        webhook_endpoint_create(brand=brand, url="http://hooks.shop.example/h", event_types=[])
    assert not WebhookEndpoint.objects.exists()


def test_api_answers_a_problem_and_creates_nothing(api, guarded):
    response = api.post(
        "/api/v1/webhook-endpoints/",
        {"url": "https://169.254.169.254/latest/meta-data/"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="ssrf-1",
    )
    body = assert_problem(response, 400, "invalid_webhook_url")
    assert "169.254.169.254 is a link-local address" in body["detail"]
    assert body["details"] == {"host": "169.254.169.254", "address": "169.254.169.254", "reason": "link-local"}
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize(
    ("host", "ascii_host", "path", "sent_path"),
    [
        # the POST goes to the address looked up once; the receiver sees the name as Host
        ("hooks.shop.example", "hooks.shop.example", "/hooks?x=1", "/hooks?x=1"),
        # an internationalised name is resolved and sent in its ASCII form, the path escaped
        ("bücher.example", "xn--bcher-kva.example", "/hooks/ü?shop=süd", "/hooks/%C3%BC?shop=s%C3%BCd"),
        # IDNA 2008: IDNA 2003 (Python's codec) would make faß.example fass.example, another domain
        ("faß.example", "xn--fa-hia.example", "/hooks", "/hooks"),
        # an ASCII name is sent as it is: strict IDNA would refuse the "_" real host names carry
        ("my_hooks.shop.example", "my_hooks.shop.example", "/hooks", "/hooks"),
    ],
)
def test_delivery_connects_to_the_resolved_address_with_the_name_as_host(
    brand, campaign, receiver, dns, host, ascii_host, path, sent_path
):
    """The guard is off (as in tests), so the name may resolve to 127.0.0.1."""
    records, lookups = dns
    records[ascii_host] = ["127.0.0.1"]
    port = receiver.server.server_port
    webhook_endpoint_create(brand=brand, url=f"http://{host}:{port}{path}", event_types=[])
    ingest(campaign)
    webhook_events_collect()
    delivery = WebhookDelivery.objects.filter(event__type="reward.held").get()
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == DeliveryStatus.DELIVERED
    ((headers, _),) = receiver.requests
    assert headers["Host"] == f"{ascii_host}:{port}"
    assert lookups == [ascii_host]
    assert receiver.paths == [sent_path]


def test_delivery_refuses_a_name_that_now_resolves_to_a_private_address(brand, campaign, receiver, guarded):
    """DNS rebinding: public at registration, loopback at delivery. Nothing is sent; the attempt
    is a failure with the reason, and retries later like any other failure."""
    records, _ = guarded
    port = receiver.server.server_port
    webhook_endpoint_create(brand=brand, url=f"http://hooks.shop.example:{port}/hooks", event_types=[])
    records["hooks.shop.example"] = [PUBLIC_V4, "127.0.0.1"]
    ingest(campaign)
    webhook_events_collect()
    delivery = WebhookDelivery.objects.filter(event__type="reward.held").get()
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert delivery.attempt == 1 and delivery.response_code is None and delivery.next_attempt_at
    assert delivery.error == (
        "refused: Webhooks are only sent to public internet addresses: hooks.shop.example resolves to "
        "a loopback address."
    )
    assert receiver.requests == []


def test_a_refused_name_does_not_tell_which_internal_address_it_resolves_to(api, guarded):
    records, _ = guarded
    records["db.shop.example"] = ["10.0.3.4"]
    response = api.post(
        "/api/v1/webhook-endpoints/",
        {"url": "https://db.shop.example/h", "event_types": []},
        format="json",
        HTTP_IDEMPOTENCY_KEY="ssrf-name-1",
    )
    body = assert_problem(response, 400, "invalid_webhook_url")
    assert "10.0.3.4" not in response.content.decode()
    assert body["details"] == {"host": "db.shop.example", "reason": "private"}
    assert not WebhookEndpoint.objects.exists()


def test_delivery_refuses_a_private_address_registered_while_the_guard_was_off(
    brand, campaign, receiver, settings, dns
):
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=[])
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    ingest(campaign)
    webhook_events_collect()
    delivery = WebhookDelivery.objects.filter(event__type="reward.held").get()
    webhook_delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert "127.0.0.1 is a loopback address" in delivery.error and receiver.requests == []


def test_delivery_of_a_name_that_no_longer_resolves_is_a_failed_attempt(brand, campaign, guarded):
    records, _ = guarded
    webhook_endpoint_create(brand=brand, url="https://hooks.shop.example/h", event_types=[])
    del records["hooks.shop.example"]
    ingest(campaign)
    webhook_events_collect()
    delivery = WebhookDelivery.objects.filter(event__type="reward.held").get()
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert delivery.error.startswith("DNS lookup of hooks.shop.example failed")


@pytest.fixture
def slow_name(guarded, settings, monkeypatch):
    """``slow.shop.example`` answers after 3 s (a brand's sluggish name server); the deadline is 0.2 s."""
    settings.WEBHOOK_DNS_TIMEOUT_SECONDS = 0.2
    fake = socket.getaddrinfo
    release = threading.Event()

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "slow.shop.example":
            release.wait(3)
            host = "hooks.shop.example"
        return fake(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield
    release.set()  # let the lookup thread go


def test_registration_gives_up_on_a_slow_name_server_and_creates_nothing(api, slow_name):
    began = time.monotonic()
    response = api.post(
        "/api/v1/webhook-endpoints/",
        {"url": "https://slow.shop.example/h"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="slow-1",
    )
    assert time.monotonic() - began < 2
    body = assert_problem(response, 400, "invalid_webhook_url")
    assert "did not resolve within 0.2 s" in body["detail"]
    assert not WebhookEndpoint.objects.exists()


def test_a_delivery_to_a_name_that_resolves_too_slowly_is_a_failed_attempt(brand, campaign, slow_name, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # registered while the guard was off: no lookup then
    webhook_endpoint_create(brand=brand, url="https://slow.shop.example/h", event_types=["reward.held"])
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    ingest(campaign)
    webhook_events_collect()
    delivery = WebhookDelivery.objects.get()
    began = time.monotonic()
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == DeliveryStatus.PENDING
    assert time.monotonic() - began < 2
    delivery.refresh_from_db()
    assert "took longer than 0.2 s" in delivery.error


def test_deliveries_share_one_tls_context_per_ca_location(monkeypatch, tmp_path):
    """Building a verifying context loads the CA bundle (~20 ms of CPU): once per process and CA
    location, not per attempt — and a new one when the trusted CAs are pointed elsewhere."""
    first = webhook_targets._tls_context(*webhook_targets._ca_location())
    assert webhook_targets._tls_context(*webhook_targets._ca_location()) is first
    cert, _ = _self_signed(tmp_path, "hooks.shop.example")
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    assert webhook_targets._tls_context(*webhook_targets._ca_location()) is not first


def test_production_settings_refuse_plain_http_webhooks():
    env = {**os.environ, "SECRET_KEY": "s" * 40, "WEBHOOK_ALLOW_HTTP": "1"}
    started = subprocess.run(
        [sys.executable, "-c", "import config.settings.production"], env=env, capture_output=True, text=True
    )
    assert started.returncode != 0 and "must use https to public addresses" in started.stderr
    env.pop("WEBHOOK_ALLOW_HTTP")
    assert subprocess.run([sys.executable, "-c", "import config.settings.production"], env=env).returncode == 0


def _self_signed(tmp_path, name: str) -> tuple[str, str]:
    """A certificate for ``name`` and its key, as PEM files (the receiver's; the test trusts it)."""
    from datetime import UTC, datetime, timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_path), str(key_path)


def test_https_delivery_to_the_pinned_address_checks_the_certificate_of_the_name(
    brand, campaign, dns, tmp_path, monkeypatch
):
    """TLS to 127.0.0.1 with SNI and certificate verification for the name: a certificate for
    the name is accepted, the same receiver reached under another name is refused."""
    import ssl

    records, _ = dns
    cert, key = _self_signed(tmp_path, "hooks.shop.example")
    monkeypatch.setenv("SSL_CERT_FILE", cert)  # trust the receiver's certificate, and only it
    receiver = Receiver()
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    seen_sni: list[str] = []
    server_tls.sni_callback = lambda sock, name, ctx: seen_sni.append(name)
    receiver.server.socket = server_tls.wrap_socket(receiver.server.socket, server_side=True)
    port = receiver.server.server_port
    records["hooks.shop.example"] = records["other.shop.example"] = ["127.0.0.1"]
    try:
        webhook_endpoint_create(brand=brand, url=f"https://hooks.shop.example:{port}/h", event_types=["reward.held"])
        other = webhook_endpoint_create(
            brand=brand, url=f"https://other.shop.example:{port}/h", event_types=["reward.held"]
        ).endpoint
        ingest(campaign)
        webhook_events_collect()
        for delivery in WebhookDelivery.objects.all():
            webhook_delivery_attempt(delivery_id=delivery.pk)
    finally:
        receiver.server.shutdown()
    delivered = WebhookDelivery.objects.get(status=DeliveryStatus.DELIVERED)
    refused = WebhookDelivery.objects.get(endpoint=other)
    assert delivered.endpoint != other and len(receiver.requests) == 1
    assert refused.status == DeliveryStatus.PENDING and "CERTIFICATE_VERIFY_FAILED" in refused.error
    assert "hooks.shop.example" in seen_sni
