"""Template filters for money, registered in settings as the ``money`` library (no templatetags
package needed): ``{{ amount_minor|money:currency }}`` for the ledger's integer minor units and
``{{ amount|amount:currency }}`` for a bank's Decimal amount, ``{{ price|money_exact }}`` for a
``Money`` finer than the minor unit (a cost per view, €0.004371). All format in the active language
(``core.money.format_minor``, ``format_amount``): €1,234.50, or 1.234,50 € in Italian."""

from decimal import Decimal

from django import template
from djmoney.money import get_current_locale
from moneyed.l10n import format_money

from core.money import format_amount, format_minor

register = template.Library()


@register.filter
def money(amount_minor, currency: str) -> str:
    if amount_minor is None or amount_minor == "":
        return "—"
    return format_minor(int(amount_minor), currency)


@register.filter
def amount(value, currency: str) -> str:
    if value is None or value == "":
        return "—"
    return format_amount(Decimal(value), currency)


@register.filter
def money_exact(value) -> str:
    """A ``Money`` with every decimal place it carries, in the active language."""
    if value is None or value == "":
        return "—"
    return format_money(value, locale=get_current_locale(), decimal_quantization=False)
