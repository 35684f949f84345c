"""A plan's monthly fee, charged to the brand's prepaid funds (``PlanCharge``): made once per
live brand and month, taken from the funds by one ledger entry when they cover it."""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from campaigns.models import BrandPlan, BrandStatus, PlanCharge
from campaigns.models.plans import usage_month
from campaigns.services.brands import brand_funds_account
from campaigns.services.rewards import platform_fees_account
from core.exceptions import InsufficientFunds
from reconciliation.services import Leg, ledger_entry_post


@dataclass(frozen=True)
class ChargeRun:
    created: int  # charges made for this month
    posted: int  # charges (this month's or earlier) taken from the brands' funds
    due: int  # charges still waiting for funds


def plan_charges_run(*, now: datetime | None = None) -> ChargeRun:
    """Charge each live brand its plan's monthly fee for the month of ``now`` (UTC), once, and take
    every due charge from its brand's funds when they cover it (daily, ``plan_charges_task``).

    A brand is charged the fee of the plan it is on when the month's charge is made, in full (no
    pro rata): from its first day, or from the day it goes live. Brands in trial (not live yet),
    test tenants, suspended brands and free plans are never charged. A charge the funds do not
    cover stays due (the portal's plan page shows it) and is taken by the first run after a top-up;
    campaigns' budgets are never touched. Each charge posts in its own durable transaction, by an
    entry keyed by the charge, so a crash or a second run posts nothing twice. No cap per run: a
    month's charges are one per brand, and a backlog of due ones never hides the newer ones."""
    now = now or timezone.now()
    month = usage_month(now)
    eligible = (
        BrandPlan.objects.filter(
            ended_at__isnull=True,
            plan__monthly_fee_minor__gt=0,
            brand__livemode=True,
            brand__status=BrandStatus.ACTIVE,
            brand__live_since__isnull=False,
            brand__live_since__lte=now,
        )
        .exclude(brand__plan_charges__month=month)
        .select_related("plan")
        .order_by("brand_id")
    )
    created = 0
    for current in eligible:
        _, made = PlanCharge.objects.get_or_create(
            brand_id=current.brand_id,
            month=month,
            defaults={
                "plan": current.plan,
                "amount_minor": current.plan.monthly_fee_minor,
                "currency": current.plan.currency,
                "created_at": now,
            },
        )
        created += made
    posted = due = 0
    # Every due charge, oldest first: one a brand cannot pay is skipped, never a block for the
    # others (one short transaction each; a brand's charges are a few a year).
    for charge_id in PlanCharge.objects.filter(entry__isnull=True).order_by("id").values_list("id", flat=True):
        if _charge_post(charge_id=charge_id, now=now):
            posted += 1
        else:
            due += 1
    return ChargeRun(created=created, posted=posted, due=due)


def _charge_post(*, charge_id: int, now: datetime) -> bool:
    """Take one due charge from its brand's funds: False when they do not cover it (or another
    run has it)."""
    try:
        with transaction.atomic(durable=True):
            charge = (
                PlanCharge.objects.select_for_update(skip_locked=True)
                .select_related("brand")
                .filter(pk=charge_id, entry__isnull=True)
                .first()
            )
            if charge is None:
                return False
            result = ledger_entry_post(
                idempotency_key=f"plancharge:{charge.pk}",
                kind="plan_fee",
                legs=[
                    Leg.debit(brand_funds_account(brand=charge.brand, currency=charge.currency), charge.amount_minor),
                    Leg.credit(platform_fees_account(currency=charge.currency), charge.amount_minor),
                ],
                memo=f"Plan fee {charge.month:%Y-%m}",
                reference_type="plan_charge",
                reference_id=str(charge.pk),
            )
            charge.entry, charge.posted_at = result.entry, now
            charge.save(update_fields=["entry", "posted_at"])
            return True
    except InsufficientFunds:
        return False
