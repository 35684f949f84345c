"""Every money figure the admin shows is formatted for the active language (issue 29): no list
column and no read-only change-form field of a registered admin shows raw minor units or a
statement's five-decimal amount."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import models
from django.test import RequestFactory

from core.admin_money import fields_with_money
from reconciliation.models import Hold

pytestmark = pytest.mark.django_db

# A routing rule's bounds may hold for any currency, so they have no unit to type an amount in.
TYPED_IN_MINOR_UNITS = {
    ("payouts", "routerule"): {"min_amount_minor", "max_amount_minor"},
}


def _raw_money(model, name) -> bool:
    if not isinstance(name, str):
        return False
    try:
        field = model._meta.get_field(name)
    except Exception:  # a method or an admin callable, not a field
        return False
    return name.endswith("_minor") or isinstance(field, models.DecimalField)


def _offenders(label, model, shown, readonly, form_class, typed) -> list[str]:
    """Raw money fields shown: read-only (or in a list) unformatted, or an input in minor units."""
    inputs = set(getattr(form_class, "money_inputs", ())) - set(readonly)
    return [f"{label}.{name}" for name in shown if _raw_money(model, name) and name not in inputs and name not in typed]


def test_no_admin_shows_raw_money():
    request = RequestFactory().get("/admin/")
    request.user = get_user_model()(is_staff=True, is_superuser=True)
    offenders = []
    for model, model_admin in admin.site._registry.items():
        obj = model()
        typed = TYPED_IN_MINOR_UNITS.get((model._meta.app_label, model._meta.model_name), set())
        offenders += _offenders(model._meta.label, model, model_admin.get_list_display(request), [], None, typed)
        readonly = model_admin.get_readonly_fields(request, obj)
        form_class = model_admin.get_form(request, obj) if model_admin.has_change_permission(request, obj) else None
        offenders += _offenders(
            model._meta.label, model, model_admin.get_fields(request, obj), readonly, form_class, typed
        )
        for inline in model_admin.get_inline_instances(request, obj):
            offenders += _offenders(
                inline.model._meta.label,
                inline.model,
                inline.get_fields(request, obj),
                inline.get_readonly_fields(request, obj),
                inline.get_formset(request, obj).form,
                set(),
            )
    assert offenders == []


def test_fields_with_money_swaps_the_raw_field_in_place():
    fields = fields_with_money(Hold, {"amount_minor": "amount"})
    names = [f.name for f in Hold._meta.fields]
    assert fields[names.index("amount_minor")] == "amount" and "amount_minor" not in fields
    with pytest.raises(ValueError):
        fields_with_money(Hold, {"nope_minor": "nope"})
