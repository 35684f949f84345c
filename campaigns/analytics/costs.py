"""What a unit of reach or action cost: ``Money`` with ``Decimal`` amounts (django-money's
``moneyed``), from minor units, rounded half up once (the project's one rounding rule)."""

from decimal import ROUND_HALF_UP, Decimal

from moneyed import Money

from core.money import currency_exponent, from_minor, minor_to_decimal, round_to_minor

# A cost per view is a small fraction of a cent: four places below the currency's minor unit.
PER_VIEW_EXTRA_PLACES = 4


def _cost(spent_minor: int, count: int, currency: str) -> Money | None:
    """Spent per unit, rounded half up to the minor unit (the project's one rounding rule); None
    when nothing was counted."""
    if not count:
        return None
    return from_minor(round_to_minor(minor_to_decimal(spent_minor, currency) / count, currency), currency)


def cost_per_view(spent_minor: int, views: int, currency: str) -> Money | None:
    """Spent per view as ``Money`` with four places below the minor unit (€0.0125), or None."""
    if not views:
        return None
    places = currency_exponent(currency) + PER_VIEW_EXTRA_PLACES
    amount = (minor_to_decimal(spent_minor, currency) / views).quantize(
        Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP
    )
    return Money(amount, currency)


def cost_per_mille(spent_minor: int, views: int, currency: str) -> Money | None:
    """Spent per thousand views (CPM), rounded half up to the minor unit, or None."""
    return _cost(spent_minor * 1000, views, currency)


def cost_per_action(spent_minor: int, actions: int, currency: str) -> Money | None:
    return _cost(spent_minor, actions, currency)
