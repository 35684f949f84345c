"""Template filter ``money``: integer minor units → "1,234.50 EUR" (registered in settings as the
``money`` library, so it needs no templatetags package)."""

from django import template

from core.money import format_minor

register = template.Library()


@register.filter
def money(amount_minor, currency: str) -> str:
    if amount_minor is None or amount_minor == "":
        return "—"
    return format_minor(int(amount_minor), currency)
