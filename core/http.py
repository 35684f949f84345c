"""One HTTP call to an outside provider (a PSP, the VoP service, WhatsApp), for the adapters.

The adapters differ in what an answer means; they share how a call is made and how "no answer"
looks. ``http_call`` returns every answer the server gave, error statuses included, for the
adapter to read, and raises ``HttpUnreachable`` when none came (refused, reset, DNS, TLS, timeout):
a timeout leaves the outcome unknown, which an adapter must treat as "maybe done".
"""

import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    body: bytes
    headers: Mapping[str, str]


class HttpUnreachable(Exception):
    """No answer came. ``timed_out``: the request may have been received and acted on."""

    def __init__(self, message: str, *, timed_out: bool):
        super().__init__(message)
        self.timed_out = timed_out


def http_call(
    *, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str], timeout: float
) -> HttpAnswer:
    """Send one request and return the server's answer, whatever its status. ``url`` comes from
    settings (https in production: ``core.checks``). Raises HttpUnreachable."""
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers))  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return HttpAnswer(response.status, response.read(), response.headers)
    except urllib.error.HTTPError as exc:
        return HttpAnswer(exc.code, exc.read(), exc.headers)
    except TimeoutError as exc:
        raise HttpUnreachable(f"timed out: {exc}", timed_out=True) from exc
    except urllib.error.URLError as exc:
        timed_out = isinstance(exc.reason, TimeoutError)
        raise HttpUnreachable(str(exc.reason), timed_out=timed_out) from exc
    except OSError as exc:  # reset, refused after connect
        raise HttpUnreachable(str(exc), timed_out=False) from exc
