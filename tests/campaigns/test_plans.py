"""Packages (issue 28): the four are seeded, a new brand starts on the default one, and a brand is
on exactly one plan at a time, with its history."""

import pytest
from django.db import IntegrityError, transaction

from campaigns.models import Brand, BrandPlan, Plan
from campaigns.selectors import brand_plan_current, plan_default, plans_for_sale
from campaigns.services import brand_create, brand_plan_change
from core.exceptions import InvalidInput

pytestmark = pytest.mark.django_db


def test_the_four_packages_are_for_sale_in_their_order():
    assert [p.slug for p in plans_for_sale()] == ["all-in-one", "tiktok-only", "whatsapp-with-reward", "cashback-api"]
    cashback = Plan.objects.get(slug="cashback-api")
    assert cashback.triggers == ["purchase"] and cashback.channels == ["api"]


def test_a_new_brand_starts_on_the_default_plan_and_changes_keep_the_history(settings):
    settings.PLAN_DEFAULT_SLUG = "tiktok-only"
    brand = brand_create(name="Sole Shoes")
    assert brand_plan_current(brand=brand).slug == "tiktok-only"

    cashback = Plan.objects.get(slug="cashback-api")
    brand_plan_change(brand=brand, plan=cashback, reason="upgrade")
    assert brand_plan_change(brand=brand, plan=cashback).plan == cashback  # the same plan again: no new period
    periods = list(BrandPlan.objects.filter(brand=brand).order_by("started_at", "id"))
    assert [(p.plan.slug, p.ended_at is None) for p in periods] == [("tiktok-only", False), ("cashback-api", True)]
    assert brand_plan_current(brand=brand) == cashback


def test_the_database_keeps_one_current_plan_per_brand():
    brand = brand_create(name="Sole Shoes")
    with pytest.raises(IntegrityError), transaction.atomic():
        BrandPlan.objects.create(brand=brand, plan=plan_default(), started_at=brand.created_at)


def test_a_missing_default_plan_refuses_the_sign_up_and_creates_no_brand(settings):
    settings.PLAN_DEFAULT_SLUG = "gone"
    with pytest.raises(InvalidInput) as caught:
        brand_create(name="Sole Shoes")
    assert caught.value.code == "no_default_plan"
    assert not Brand.objects.exists()
