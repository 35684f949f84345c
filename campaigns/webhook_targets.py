"""Where outgoing webhooks may go (server-side request forgery guard) and the HTTP POST itself.

A brand chooses the URL, so without a guard it could make our workers call the cloud metadata
service (169.254.169.254), the database, or anything else on the private network. Two checks:

1. At registration (``webhook_url_validate``): https only (http only with ``WEBHOOK_ALLOW_HTTP``,
   never in production), and the host — an address literal, or every address the name resolves
   to — must be a public unicast address.
2. At delivery (``webhook_post``): the name is resolved *once*, every address checked again, and
   the connection is made to a checked address while the Host header, SNI and certificate check
   still use the name. A name that resolved to a public address at registration and to a private
   one now (DNS rebinding) is refused, and the refusal is the attempt's error.

``WEBHOOK_ALLOW_PRIVATE_TARGETS`` (tests and local development only) switches off the address
checks so deliveries can reach fake receivers on 127.0.0.1; the pinned connection stays the same.
"""

import concurrent.futures
import functools
import http.client
import ipaddress
import logging
import os
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import idna
from django.conf import settings

from campaigns.webhook_keep import KeptConnections
from core.exceptions import InvalidInput

logger = logging.getLogger(__name__)

DEFAULT_PORTS = {"https": 443, "http": 80}
URL_SAFE = "/%:@!$&'()*+,;=~-._"  # RFC 3986 characters a path or query may carry as they are


class WebhookTargetRefused(InvalidInput):
    code = "invalid_webhook_url"


def address_refusal(address: str) -> str | None:
    """Why a connection to ``address`` is refused (``"private"``, ``"loopback"``…), or None when it
    is a public unicast address. IPv4-mapped (``::ffff:10.0.0.1``) and 6to4 IPv6 addresses are
    judged by the IPv4 address inside them, since that is where the packets end up."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone id (fe80::1%eth0) is no part of the address
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ip.ipv4_mapped or ip.sixtofour or ip
    # site_local: the retired fec0::/10, which Python 3.11 counts neither private nor non-global.
    for kind in ("unspecified", "loopback", "link_local", "site_local", "multicast", "reserved", "private"):
        if getattr(ip, f"is_{kind}", False):  # IPv4 addresses have no is_site_local
            return kind.replace("_", "-")
    # Shared address space (100.64.0.0/10, carrier-grade NAT) and the like: not private, not global.
    if not ip.is_global:
        return "non-global"
    return None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def host_resolve(*, host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (in the resolver's order, without repeats). Raises
    OSError (``socket.gaierror``) when it does not resolve, and TimeoutError when the resolver has
    not answered within ``WEBHOOK_DNS_TIMEOUT_SECONDS``: getaddrinfo itself has no deadline, and a
    brand's slow name server must not hold an API request or a delivery worker for the system
    resolver's retries. The outside world: tests mock ``socket.getaddrinfo``."""
    timeout = settings.WEBHOOK_DNS_TIMEOUT_SECONDS
    lookup = _resolver().submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        infos = lookup.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        lookup.cancel()
        raise TimeoutError(f"the DNS lookup of {host} took longer than {timeout:g} s") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


_resolvers: dict[int, concurrent.futures.ThreadPoolExecutor] = {}


def _resolver() -> concurrent.futures.ThreadPoolExecutor:
    """This process's lookup threads (one pool per pid: a pool inherited through fork — gunicorn,
    django-q2 — has no threads left in the child and would never run a lookup). A lookup that
    hangs keeps its thread until the resolver gives up; the pool bounds how many can."""
    pid = os.getpid()
    pool = _resolvers.get(pid)
    if pool is None:
        pool = _resolvers[pid] = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="dns")
    return pool


def _addresses_check(*, host: str, addresses: list[str]) -> None:
    if settings.WEBHOOK_ALLOW_PRIVATE_TARGETS:
        return
    for address in addresses:
        reason = address_refusal(address)
        if not reason:
            continue
        if host == address:  # the brand typed it: nothing to hide
            raise WebhookTargetRefused(
                f"Webhooks are only sent to public internet addresses: {host} is a {reason} address.",
                details={"host": host, "address": address, "reason": reason},
            )
        # A name resolved by our resolver: saying to what would let any API key map our internal
        # network (db.internal → 10.0.3.4). The address goes to the log only.
        logger.warning("webhook target %s refused: resolves to %s (%s)", host, address, reason)
        raise WebhookTargetRefused(
            f"Webhooks are only sent to public internet addresses: {host} resolves to a {reason} address.",
            details={"host": host, "reason": reason},
        )


def _scheme_check(scheme: str) -> None:
    allowed = ("https", "http") if settings.WEBHOOK_ALLOW_HTTP else ("https",)
    if scheme not in allowed:
        raise WebhookTargetRefused("The endpoint URL must be an https:// URL.", details={"scheme": scheme})


def _host_port(parts) -> tuple[str, int]:
    """The host as the resolver, the Host header and SNI want it (an internationalised name in its
    ASCII ``xn--`` form) and the port. Raises WebhookTargetRefused when either is unusable."""
    try:
        host, port = parts.hostname or "", parts.port or DEFAULT_PORTS[parts.scheme]
        if not _is_address(host) and not host.isascii():
            # IDNA 2008 with UTS #46 mapping, as browsers do: Python's own "idna" codec is IDNA
            # 2003, which maps faß.de to fass.de — another domain, another owner. ASCII names stay
            # as they are (lower case): strict IDNA refuses "_", which real host names carry.
            host = idna.encode(host, uts46=True).decode("ascii")
        host = host.lower()
    except (ValueError, UnicodeError, idna.IDNAError):  # a port out of range, a label IDNA cannot encode
        host = ""
    if not host:
        raise WebhookTargetRefused("The endpoint URL must name a valid host and port.")
    return host, port


def webhook_url_validate(url: str) -> str:
    """``url`` if webhooks may be sent to it; raises WebhookTargetRefused (``invalid_webhook_url``)
    for another scheme, a missing host, a host that does not resolve, or any non-public address."""
    parts = urlsplit(url)
    _scheme_check(parts.scheme)
    host, port = _host_port(parts)
    if settings.WEBHOOK_ALLOW_PRIVATE_TARGETS:
        return url
    if _is_address(host):
        addresses = [host]
    else:
        try:
            addresses = host_resolve(host=host, port=port)
        except TimeoutError:
            seconds = settings.WEBHOOK_DNS_TIMEOUT_SECONDS
            raise WebhookTargetRefused(
                f"The host name {host} did not resolve within {seconds:g} s.", details={"host": host}
            ) from None
        except OSError:
            raise WebhookTargetRefused(f"The host name {host} does not resolve.", details={"host": host}) from None
    _addresses_check(host=host, addresses=addresses)
    return url


# --- delivery ------------------------------------------------------------------------------------


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the checked ``addresses`` instead of resolving ``host`` again; the Host header
    still carries the name."""

    def __init__(self, host: str, port: int, *, addresses: list[str], timeout: float):
        super().__init__(host, port, timeout=timeout)
        self.addresses = addresses

    def _socket(self) -> socket.socket:
        error: OSError | None = None
        for address in self.addresses:
            try:
                sock = socket.create_connection((address, self.port), self.timeout)
            except OSError as exc:
                error = exc
            else:
                # As http.client's own connect: the body leaves without waiting for the headers'
                # ACK, which a kept connection would otherwise wait for (Nagle and delayed ACK).
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
        raise error or OSError("no address to connect to")

    def connect(self) -> None:
        self.sock = self._socket()


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    """As above, with TLS: SNI and the certificate check use the name, not the address."""

    default_port = 443

    def connect(self) -> None:
        self.sock = _tls_context(*_ca_location()).wrap_socket(self._socket(), server_hostname=self.host)


def _ca_location() -> tuple[str, str]:
    """Where OpenSSL reads the trusted CAs from (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` or its
    defaults): the cached context below is rebuilt when it changes."""
    paths = ssl.get_default_verify_paths()
    return paths.cafile or "", paths.capath or ""


@functools.cache
def _tls_context(cafile: str, capath: str) -> ssl.SSLContext:
    """One verifying client context per CA location, shared by every delivery of the process:
    building one loads the whole CA bundle (~20 ms of CPU), which was paid on every attempt.
    SSLContext is safe to share between threads."""
    return ssl.create_default_context()


@dataclass(frozen=True)
class PostResult:
    status: int | None  # None: no HTTP answer (refused, unreachable, timed out)
    snippet: str = ""
    error: str = ""


def webhook_post(
    *, url: str, body: bytes, headers: dict[str, str], timeout: float, kept: KeptConnections | None = None
) -> PostResult:
    """POST ``body`` to ``url`` after checking the target again against the addresses actually
    connected to (see the module docstring). Never follows redirects. Never raises for the
    network: a refusal, a failed lookup or a connection error is ``PostResult(None, error=…)``.
    ``kept``: the send call's open connections (``webhook_keep``): one kept for the same scheme,
    host and port carries this POST, and this one is kept if its answer allows."""
    parts = urlsplit(url)
    try:
        _scheme_check(parts.scheme)
        host, port = _host_port(parts)
    except WebhookTargetRefused as exc:
        return PostResult(None, error=f"refused: {exc.message}"[:200])
    key = (parts.scheme, host, port)
    # http.client sends the request line as ASCII: percent-encode what a brand typed unencoded.
    path = quote(parts.path or "/", safe=URL_SAFE) + (f"?{quote(parts.query, safe=URL_SAFE)}" if parts.query else "")
    connection = kept.take(key) if kept is not None else None
    if connection is not None:
        try:
            response = _send(connection, path, body, headers)
        except ConnectionError:
            # The endpoint closed the kept connection as this POST went out (its idle timeout ran
            # out), before any answer: the POST goes once more, on a new connection.
            connection.close()
        except _NETWORK_ERRORS as exc:
            connection.close()
            return _no_answer(exc)
        else:
            return _answer(connection, response, kept=kept, key=key)
    try:
        try:
            addresses = [host] if _is_address(host) else host_resolve(host=host, port=port)
        except OSError as exc:
            return PostResult(None, error=f"DNS lookup of {host} failed: {exc}"[:200])
        _addresses_check(host=host, addresses=addresses)
    except WebhookTargetRefused as exc:
        return PostResult(None, error=f"refused: {exc.message}"[:200])
    connection_class = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
    connection = connection_class(host, port, addresses=addresses, timeout=timeout)
    try:
        response = _send(connection, path, body, headers)
    except _NETWORK_ERRORS as exc:
        connection.close()
        return _no_answer(exc)
    return _answer(connection, response, kept=kept, key=key)


_NETWORK_ERRORS = (OSError, http.client.HTTPException, UnicodeError)


def _send(connection: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]):
    connection.request("POST", path, body=body, headers=headers)
    return connection.getresponse()


def _answer(connection, response, *, kept: KeptConnections | None, key: tuple) -> PostResult:
    """The answer's status and first 500 characters; the connection is kept or closed."""
    try:
        result = PostResult(response.status, response.read(500).decode("utf-8", "replace"))
    except _NETWORK_ERRORS as exc:
        connection.close()
        return _no_answer(exc)
    if kept is None or not kept.keep(key, connection, response):
        connection.close()
    return result


def _no_answer(exc: Exception) -> PostResult:
    return PostResult(None, error=(str(exc) or type(exc).__name__)[:200])
