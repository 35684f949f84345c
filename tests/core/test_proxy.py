"""The client's address behind our own proxies (core.proxy): X-Forwarded-For is believed only
from a trusted proxy, and only up to the first address that is not ours."""

import ipaddress

from django.test import Client

from core.proxy import client_address

OURS = (ipaddress.ip_network("10.0.0.0/8"),)


def test_only_a_trusted_proxy_is_believed():
    assert client_address("203.0.113.5", "198.51.100.1", OURS) == "203.0.113.5"
    assert client_address("10.0.0.2", "198.51.100.1", OURS) == "198.51.100.1"
    assert client_address("10.0.0.2", "198.51.100.1", ()) == "10.0.0.2"


def test_addresses_the_client_typed_left_of_the_real_one_are_ignored():
    assert client_address("10.0.0.2", "1.2.3.4, 198.51.100.1, 10.0.0.9", OURS) == "198.51.100.1"
    assert client_address("10.0.0.2", "evil, 198.51.100.1", OURS) == "198.51.100.1"
    assert client_address("10.0.0.2", "198.51.100.1, garbage", OURS) == "10.0.0.2"
    assert client_address("10.0.0.2", "", OURS) == "10.0.0.2"


def test_the_middleware_gives_views_the_client_address(db, settings):
    # /metrics allows by address: a scrape through our proxy is judged by the scraper's own
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["192.0.2.7"]
    settings.TRUSTED_PROXY_IPS = ["10.0.0.0/8"]
    proxy = Client(REMOTE_ADDR="10.1.1.1")
    assert proxy.get("/metrics", HTTP_X_FORWARDED_FOR="192.0.2.99").status_code == 403
    settings.METRICS_ALLOWED_IPS = ["10.1.1.1"]
    assert proxy.get("/metrics", HTTP_X_FORWARDED_FOR="192.0.2.99").status_code == 403
    settings.METRICS_ALLOWED_IPS = ["192.0.2.99"]
    assert proxy.get("/metrics", HTTP_X_FORWARDED_FOR="192.0.2.99").status_code == 200
