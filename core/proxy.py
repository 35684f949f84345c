"""The client's address behind our own load balancers, for per-IP rate limits and logs.

Behind a proxy every request comes from the proxy's address: the claim pages' per-IP limits would
count all people as one. ``X-Forwarded-For`` is typed by the client, though, unless a proxy we run
appended to it. So only when the connecting address is one of ``TRUSTED_PROXY_IPS`` is the header
read, right to left, skipping our own proxies: the first address that is not ours is the client
(anything left of it was written by the client and is ignored). With no trusted proxies set,
nothing changes. gunicorn's ``forwarded_allow_ips`` (``deploy/gunicorn.conf.py``) trusts the same
proxies for ``X-Forwarded-Proto``.
"""

import functools
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def trusted_networks(values: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(value, strict=False) for value in values)


def _trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(remote_addr: str, forwarded_for: str, networks: tuple[Network, ...]) -> str:
    """The client's address: ``remote_addr`` unless it is a trusted proxy, then the right-most
    address of ``forwarded_for`` that is not one (a malformed entry stops the walk there)."""
    if not networks or not _trusted(remote_addr, networks):
        return remote_addr
    for hop in reversed([hop.strip() for hop in forwarded_for.split(",") if hop.strip()]):
        if _trusted(hop, networks):
            continue
        try:
            return str(ipaddress.ip_address(hop))
        except ValueError:
            return remote_addr
    return remote_addr


class TrustedProxyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        networks = trusted_networks(tuple(settings.TRUSTED_PROXY_IPS))
        if networks:
            request.META["REMOTE_ADDR"] = client_address(
                request.META.get("REMOTE_ADDR", ""), request.META.get("HTTP_X_FORWARDED_FOR", ""), networks
            )
        return self.get_response(request)
