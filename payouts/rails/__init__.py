"""Payout rails behind one interface (``payouts.rails.base.Rail``) and the registry that builds
them from settings.

``settings.PAYOUT_RAILS`` maps a rail name to ``{"BACKEND": "dotted.path.Class", "OPTIONS": {...}}``;
entries there override or extend the built-in names below. ``settings.PAYOUT_DEFAULT_RAIL``
names the rail used when none is given (``sandbox`` unless set).
"""

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from core.exceptions import InvalidInput
from payouts.rails.base import Rail

BUILTIN_RAILS: dict[str, dict[str, Any]] = {
    "sandbox": {"BACKEND": "payouts.rails.sandbox.SandboxRail", "OPTIONS": {}},
    "sepa_file": {"BACKEND": "payouts.rails.sepa_file.SepaFileRail", "OPTIONS": {}},
    "psp_api": {"BACKEND": "payouts.rails.psp_api.WiseRail", "OPTIONS": {}},
    "psp_instant": {"BACKEND": "payouts.rails.adyen.AdyenTransfersRail", "OPTIONS": {}},
    "paypal": {"BACKEND": "payouts.rails.paypal.PayPalPayoutsRail", "OPTIONS": {}},
}


def rail_names() -> list[str]:
    return sorted({**BUILTIN_RAILS, **getattr(settings, "PAYOUT_RAILS", {})})


def get_rail(name: str | None = None) -> Rail:
    """Build the rail called ``name`` (default: ``settings.PAYOUT_DEFAULT_RAIL`` or ``sandbox``).

    Raises ``InvalidInput`` (code ``unknown_rail``) for a name that is not configured, and
    ``django.core.exceptions.ImproperlyConfigured`` when a rail lacks required options.
    """
    name = name or getattr(settings, "PAYOUT_DEFAULT_RAIL", "sandbox")
    configured = getattr(settings, "PAYOUT_RAILS", {})
    entry = configured.get(name) or BUILTIN_RAILS.get(name)
    if entry is None:
        raise InvalidInput(f"No payout rail called {name!r}.", code="unknown_rail", details={"known": rail_names()})
    backend = entry.get("BACKEND") or BUILTIN_RAILS.get(name, {}).get("BACKEND")
    if not backend:
        raise ImproperlyConfigured(f"PAYOUT_RAILS[{name!r}] needs a BACKEND.")
    rail = import_string(backend)(**entry.get("OPTIONS", {}))
    rail.name = name
    return rail
