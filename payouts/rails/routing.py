"""Choosing a rail for a payout: a pure function over routing rules, so the admin-configurable
rule model (stored by the payouts app) and tests feed it the same plain dataclasses.

Rules are tried in priority order (lower number first; equal priorities keep their list order).
A rule matches when each of its set criteria matches (``None`` = any): currency, creditor
country, and an inclusive amount range in minor units. The first matching rule whose primary or
fallback rail is available decides:

- primary available  → ``(rule.rail, rule.fallback_rail if available else None)``
- primary unavailable, fallback available → ``(rule.fallback_rail, None)``

A matching rule with neither rail available is skipped, so a later, broader rule can still route
the payout; when nothing routes, ``NoRoute`` is raised and the payout waits.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from core.exceptions import ApplicationError


class NoRoute(ApplicationError):
    code = "payout_no_route"
    http_status = 409


@dataclass(frozen=True, kw_only=True)
class RouteRule:
    rail: str
    priority: int = 100
    currency: str | None = None
    country: str | None = None
    min_amount_minor: int | None = None
    max_amount_minor: int | None = None
    fallback_rail: str | None = None
    enabled: bool = True

    def matches(self, *, currency: str, country: str, amount_minor: int) -> bool:
        return (
            self.enabled
            and (self.currency is None or self.currency == currency)
            and (self.country is None or self.country == country)
            and (self.min_amount_minor is None or amount_minor >= self.min_amount_minor)
            and (self.max_amount_minor is None or amount_minor <= self.max_amount_minor)
        )


class Route(NamedTuple):
    primary_rail: str
    fallback_rail: str | None


def route(
    *,
    currency: str,
    country: str,
    amount_minor: int,
    rules: Iterable[RouteRule],
    availability: Mapping[str, bool] | Callable[[str], bool],
) -> Route:
    """Pick ``(primary_rail, fallback_rail)`` for one payout. ``availability`` says whether a rail
    can take payments now (a mapping, missing names count as unavailable, or a callable). Raises
    ``NoRoute`` when no enabled matching rule has an available rail."""
    is_up = availability if callable(availability) else (lambda name: bool(availability.get(name, False)))
    ordered = sorted(enumerate(rules), key=lambda pair: (pair[1].priority, pair[0]))
    for _, rule in ordered:
        if not rule.matches(currency=currency, country=country, amount_minor=amount_minor):
            continue
        fallback = rule.fallback_rail if rule.fallback_rail and is_up(rule.fallback_rail) else None
        if is_up(rule.rail):
            return Route(rule.rail, fallback if fallback != rule.rail else None)
        if fallback:
            return Route(fallback, None)
    raise NoRoute(
        f"No available rail for {amount_minor} {currency} to {country}.",
        details={"currency": currency, "country": country, "amount_minor": amount_minor},
    )
