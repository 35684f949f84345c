"""Error reporting to Sentry, for production settings once ``SENTRY_DSN`` is set.

Sentry gets what would identify the error, not the people in it: no request bodies, cookies,
users or IP addresses (``send_default_pii`` off, ``max_request_body_size="never"``), no local
variables of the frames (an IBAN or a phone number may sit in one), and every string left in the
event or a breadcrumb goes through the same masking as the log lines (``core.logging.redact``).
"""

import logging
from typing import Any

import sentry_sdk
from sentry_sdk.integrations.django import DjangoIntegration

from core.logging import RedactPersonalData, redact

# Importing sentry_sdk puts a stderr handler on its own logger (for its debug mode): it masks
# too, like every handler (tests/core/test_logging.py).
for _handler in logging.getLogger("sentry_sdk.errors").handlers:
    if not any(isinstance(f, RedactPersonalData) for f in _handler.filters):
        _handler.addFilter(RedactPersonalData())


def scrubbed(value: Any) -> Any:
    """``value`` with every string in it masked (dicts and lists walked)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: scrubbed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrubbed(item) for item in value]
    return value


def _before_send(event: dict, hint: dict) -> dict:
    return scrubbed(event)


def _before_breadcrumb(crumb: dict, hint: dict) -> dict:
    return scrubbed(crumb)


def error_reporting_init(*, dsn: str, environment: str, release: str, traces_sample_rate: float) -> None:
    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        release=release or None,
        integrations=[DjangoIntegration()],
        send_default_pii=False,
        max_request_body_size="never",
        include_local_variables=False,
        traces_sample_rate=traces_sample_rate,
        before_send=_before_send,
        before_breadcrumb=_before_breadcrumb,
    )
