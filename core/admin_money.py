"""Money in the admin: every figure formatted for the active language by django-money
(``core.money.format_minor``, ``format_amount``), never raw minor units (120000) or a statement's
five-decimal Decimal (12.00000).

A read-only change form lists its model's fields; ``fields_with_money`` swaps each raw money field
for the admin method that formats it, so the form shows the figure once, formatted."""

from django.db.models import Model


def fields_with_money(model: type[Model], shown: dict[str, str], *, exclude: tuple[str, ...] = ()) -> list[str]:
    """The model's fields in order, each raw money field named in ``shown`` replaced by the name of
    the admin display method that formats it; ``exclude`` drops fields (a file blob). Use it for
    ``fields`` and ``readonly_fields`` together, so the raw field never comes back as a form field."""
    unknown = set(shown) - {f.name for f in model._meta.fields}
    if unknown:
        raise ValueError(f"{model.__name__} has no field {sorted(unknown)}")
    return [shown.get(f.name, f.name) for f in model._meta.fields if f.name not in exclude]
