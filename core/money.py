"""Money helpers. The ledger counts integer minor units; Money/Decimal live at the edges.

Rounding rule (the one documented rule for the whole project): ROUND_HALF_UP to the currency's
minor unit, applied once, at the point where a Decimal becomes minor units.
"""

from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from babel.numbers import format_decimal
from django.conf import settings
from djmoney.money import Money as DjangoMoney
from djmoney.money import get_current_locale
from moneyed import Money, get_currency
from moneyed.classes import CurrencyDoesNotExist

from core.exceptions import InvalidInput


def currency_exponent(currency: str) -> int:
    """Number of decimal places of a currency's minor unit (EUR 2, JPY 0, BHD 3)."""
    try:
        sub_unit = get_currency(currency).sub_unit
    except CurrencyDoesNotExist as exc:
        raise InvalidInput(f"Unknown currency {currency!r}.", code="unknown_currency") from exc
    return len(str(sub_unit)) - 1


def validate_currency(currency: str) -> str:
    code = (currency or "").strip().upper()
    if code not in settings.CURRENCIES:
        raise InvalidInput(
            f"Currency {currency!r} is not supported.",
            code="unknown_currency",
            details={"supported": list(settings.CURRENCIES)},
        )
    currency_exponent(code)
    return code


def to_minor(amount: Decimal | int | str | Money, currency: str | None = None) -> int:
    """Exact conversion to minor units. Refuses anything with more precision than the currency has:
    silent rounding of an amount someone typed would move money nobody asked for."""
    if isinstance(amount, Money):
        currency = amount.currency.code
        amount = amount.amount
    if currency is None:
        raise InvalidInput("A currency is required.", code="unknown_currency")
    if isinstance(amount, float):
        raise TypeError("Money is never a float")
    try:
        value = Decimal(amount)
    except (InvalidOperation, TypeError, ValueError) as exc:
        raise InvalidInput(f"{amount!r} is not an amount.", code="invalid_amount") from exc
    if not value.is_finite():
        raise InvalidInput(f"{amount!r} is not an amount.", code="invalid_amount")
    scaled = value.scaleb(currency_exponent(currency))
    if scaled != scaled.to_integral_value():
        raise InvalidInput(f"{amount} has more decimals than {currency} allows.", code="invalid_amount")
    return int(scaled)


def round_to_minor(value: Decimal, currency: str) -> int:
    """Round a computed Decimal (a percentage of a purchase, say) to minor units, ROUND_HALF_UP."""
    exp = currency_exponent(currency)
    return int(value.scaleb(exp).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def from_minor(amount_minor: int, currency: str) -> Money:
    return Money(Decimal(amount_minor).scaleb(-currency_exponent(currency)), currency)


def minor_to_decimal(amount_minor: int, currency: str) -> Decimal:
    exp = currency_exponent(currency)
    return Decimal(amount_minor).scaleb(-exp).quantize(Decimal(1).scaleb(-exp))


def format_minor(amount_minor: int, currency: str, *, with_currency: bool = True) -> str:
    """Minor units as people read them, in the active language (django-money, with babel's
    locale data): €1,234.56 in English, 1.234,56 € in Italian. ``with_currency=False`` gives the
    number alone (chart axes, where the unit is said once)."""
    money = DjangoMoney(minor_to_decimal(amount_minor, currency), currency)
    if with_currency:
        return str(money)
    return format_decimal(
        money.amount, format=f"#,##0.{'0' * currency_exponent(currency)}", locale=get_current_locale()
    )


def format_amount(value: Decimal, currency: str) -> str:
    """A bank's Decimal amount (five places on a statement) as people read it: rounded once to the
    currency's minor unit (the one rounding rule), then ``format_minor``."""
    return format_minor(round_to_minor(Decimal(value), currency), currency)


def split_largest_remainder(total_minor: int, weights: Sequence[int | Decimal]) -> list[int]:
    """Split ``total_minor`` in proportion to ``weights`` so the parts add up exactly.

    Each part gets the floor of its share; the cents left over go one each to the parts with the
    largest remainders (ties: the earlier part). The one splitting helper of the project.
    """
    if not weights:
        raise ValueError("weights must not be empty")
    if any(w < 0 for w in weights):
        raise ValueError("weights must not be negative")
    weight_sum = sum(Decimal(w) for w in weights)
    if weight_sum == 0:
        raise ValueError("weights must not all be zero")
    sign = -1 if total_minor < 0 else 1
    total = abs(total_minor)
    exact = [Decimal(total) * Decimal(w) / weight_sum for w in weights]
    parts = [int(x) for x in exact]
    left = total - sum(parts)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in order[:left]:
        parts[i] += 1
    return [sign * p for p in parts]
