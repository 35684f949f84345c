"""Money in the admin: every figure formatted for the active language by django-money
(``core.money.format_minor``, ``format_amount``), never raw minor units (120000) or a statement's
five-decimal Decimal (12.00000). Inputs are amounts too: ``MoneyInputsForm`` takes 12.50, not 1250.

A read-only change form lists its model's fields; ``fields_with_money`` swaps each raw money field
for the admin method that formats it, so the form shows the figure once, formatted."""

from django import forms
from django.db.models import Model

from core.exceptions import InvalidInput
from core.money import minor_to_decimal, to_minor


def fields_with_money(model: type[Model], shown: dict[str, str], *, exclude: tuple[str, ...] = ()) -> list[str]:
    """The model's fields in order, each raw money field named in ``shown`` replaced by the name of
    the admin display method that formats it; ``exclude`` drops fields (a file blob). Use it for
    ``fields`` and ``readonly_fields`` together, so the raw field never comes back as a form field."""
    unknown = set(shown) - {f.name for f in model._meta.fields}
    if unknown:
        raise ValueError(f"{model.__name__} has no field {sorted(unknown)}")
    return [shown.get(f.name, f.name) for f in model._meta.fields if f.name not in exclude]


class MoneyInputsForm(forms.ModelForm):
    """A change form whose money inputs (``money_inputs``, integer minor-unit fields) are typed as
    people write amounts — 12.50, or 12,50 in Italian — and stored as minor units by
    ``core.money.to_minor``, which refuses more decimals than the currency has instead of rounding.

    The currency is the ``currency`` keyword (an inline's parent's), else the form's own currency
    field as posted, else the instance's."""

    money_inputs: tuple[str, ...] = ()

    def __init__(self, *args, currency: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._currency = currency
        shown = self._money_currency(posted=False)
        for name in self.money_inputs:
            if name not in self.fields:
                continue
            field = self.fields[name]
            label = name.removesuffix("_minor").replace("_", " ").capitalize()
            self.fields[name] = forms.DecimalField(
                label=label,
                required=field.required,
                localize=True,
                min_value=0,
                help_text=f"An amount in {shown}, e.g. 12.50." if shown else "An amount, e.g. 12.50.",
                disabled=field.disabled,
            )
            value = self.initial.get(name)
            if value not in (None, "") and shown:
                self.initial[name] = minor_to_decimal(int(value), shown)

    def _money_currency(self, *, posted: bool) -> str:
        if self._currency:
            return self._currency
        if posted and "currency" in getattr(self, "cleaned_data", {}):
            return self.cleaned_data["currency"] or ""
        return getattr(self.instance, "currency", "") or ""

    def clean(self):
        data = super().clean()
        currency = self._money_currency(posted=True)
        for name in self.money_inputs:
            value = data.get(name)
            if name not in self.fields or value is None:
                continue
            try:
                data[name] = to_minor(value, currency or None)
            except InvalidInput as exc:
                self.add_error(name, exc.message)
        return data
