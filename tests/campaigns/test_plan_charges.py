"""A plan's monthly fee: charged once per live brand and month, taken from the brand's funds by
one ledger entry when they cover it, due until they do; never for a brand in trial, a test
tenant, a suspended brand or a free plan."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from campaigns.models import BrandStatus, PlanCharge
from campaigns.services import brand_create, brand_topup_record, plan_charges_run
from campaigns.services.brands import brand_funds_account
from campaigns.services.rewards import platform_fees_account
from campaigns.services.test_mode import trial_tenant_open
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.factories import BrandFactory, plan_with_fees
from tests.portal.conftest import member

pytestmark = pytest.mark.django_db


def later() -> tuple:
    """A run just after the brands went live, and one on the first day of the next month."""
    now = timezone.now() + timedelta(minutes=1)
    return now, (now.replace(day=1) + timedelta(days=32)).replace(day=1)


@pytest.fixture
def monthly():
    return plan_with_fees(slug="monthly-49", name="Monthly 49", monthly_fee_minor=4_900)


def top_up(brand, amount_minor: int, key: str) -> None:
    brand_topup_record(
        brand=brand, amount_minor=amount_minor, currency="EUR", bank_account_code="NL00TEST0000000001",
        idempotency_key=key, reference=brand.funding_reference,
    )  # fmt: skip


def funds(brand) -> int:
    return brand_funds_account(brand=brand, currency="EUR").available_minor


def fees() -> int:
    return platform_fees_account(currency="EUR").posted_minor


def test_a_month_is_charged_once_and_taken_from_the_funds(monthly):
    run_at, next_month = later()
    brand = BrandFactory(plan=monthly)
    top_up(brand, 10_000, "t1")
    before = fees()

    first = plan_charges_run(now=run_at)
    again = plan_charges_run(now=run_at)

    assert (first.created, first.posted, first.due) == (1, 1, 0)
    assert (again.created, again.posted, again.due) == (0, 0, 0)
    charge = PlanCharge.objects.get(brand=brand)
    assert (charge.month, charge.amount_minor, charge.plan_id) == (run_at.date().replace(day=1), 4_900, monthly.pk)
    assert charge.entry.kind == "plan_fee" and charge.posted_at is not None
    assert funds(brand) == 5_100
    assert fees() - before == 4_900
    assert ledger_verify_report().ok

    plan_charges_run(now=next_month)
    assert list(PlanCharge.objects.filter(brand=brand).order_by("month").values_list("month", flat=True)) == [
        run_at.date().replace(day=1),
        next_month.date(),
    ]
    assert funds(brand) == 200


def test_a_charge_the_funds_do_not_cover_stays_due_until_a_top_up(monthly):
    run_at, _ = later()
    brand = BrandFactory(plan=monthly)
    top_up(brand, 1_000, "t1")

    run = plan_charges_run(now=run_at)
    assert (run.created, run.posted, run.due) == (1, 0, 1)
    assert funds(brand) == 1_000  # nothing taken in part
    charge = PlanCharge.objects.get(brand=brand)
    assert charge.entry is None and charge.posted_at is None

    top_up(brand, 5_000, "t2")
    run = plan_charges_run(now=run_at)
    assert (run.created, run.posted, run.due) == (0, 1, 0)
    assert funds(brand) == 1_100
    assert ledger_verify_report().ok


def test_trial_test_suspended_and_free_brands_are_never_charged(monthly):
    run_at, _ = later()
    trial = brand_create(name="Trial", slug="trial", plan=monthly, live=False)
    tenant = trial_tenant_open(brand=trial)
    suspended = BrandFactory(plan=monthly)
    type(suspended).objects.filter(pk=suspended.pk).update(status=BrandStatus.SUSPENDED)
    free = BrandFactory(plan=plan_with_fees(slug="free", monthly_fee_minor=0))
    for brand in (trial, tenant, suspended, free):
        top_up(brand, 10_000, f"t:{brand.pk}")

    run = plan_charges_run(now=run_at)

    assert (run.created, run.posted) == (0, 0)
    assert not PlanCharge.objects.exists()


def test_the_plan_page_shows_the_fees_taken_and_due_in_english_and_italian(monthly):
    run_at, _ = later()
    brand = BrandFactory(slug="shop", plan=monthly)
    plan_charges_run(now=run_at)
    client = Client()
    client.force_login(member(brand))

    english = client.get("/portal/shop/plan/").content.decode()
    client.cookies["django_language"] = "it"
    italian = client.get("/portal/shop/plan/").content.decode()

    assert "Monthly fees" in english and "Due: taken from your funds once they cover it" in english
    assert "Canoni mensili" in italian and "Da pagare" in italian
    assert "€49.00" in english and "49,00\xa0€" in italian
