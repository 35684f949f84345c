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

# Inputs a person types (a rule's amounts, a plan's fees, a routing bound): edited, not shown.
TYPED_IN_MINOR_UNITS = {
    ("campaigns", "plan"): {"monthly_payouts_minor", "fee_fixed_minor", "monthly_fee_minor"},
    ("campaigns", "campaign"): {"min_payout_minor"},
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


def test_no_admin_shows_raw_money():
    request = RequestFactory().get("/admin/")
    request.user = get_user_model()(is_staff=True, is_superuser=True)
    offenders = []
    for model, model_admin in admin.site._registry.items():
        typed = TYPED_IN_MINOR_UNITS.get((model._meta.app_label, model._meta.model_name), set())
        shown = [*model_admin.get_list_display(request), *model_admin.get_fields(request, model())]
        for name in shown:
            if _raw_money(model, name) and name not in typed:
                offenders.append(f"{model._meta.label}.{name}")
    assert offenders == []


def test_fields_with_money_swaps_the_raw_field_in_place():
    fields = fields_with_money(Hold, {"amount_minor": "amount"})
    names = [f.name for f in Hold._meta.fields]
    assert fields[names.index("amount_minor")] == "amount" and "amount_minor" not in fields
    with pytest.raises(ValueError):
        fields_with_money(Hold, {"nope_minor": "nope"})
