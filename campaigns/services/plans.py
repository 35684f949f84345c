"""Which package a brand is on (``campaigns.models.plans``): it changes only through
``brand_plan_change``; reads are in ``campaigns.selectors`` (``brand_plan_current``)."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from campaigns.models import Brand, BrandPlan, Plan


def brand_plan_change(
    *, brand: Brand, plan: Plan, actor=None, reason: str = "", now: datetime | None = None
) -> BrandPlan:
    """Put ``brand`` on ``plan`` from ``now``: the current period ends, a new one starts (the same
    plan again is a no-op returning the current period). The partial unique constraint keeps one
    current period per brand under concurrent changes (the brand row is locked first). Joins the
    caller's transaction or opens one."""
    now = now or timezone.now()
    with transaction.atomic():
        Brand.objects.select_for_update().filter(pk=brand.pk).first()
        current = BrandPlan.objects.filter(brand=brand, ended_at__isnull=True).first()
        if current is not None and current.plan_id == plan.pk:
            return current
        if current is not None:
            current.ended_at = max(now, current.started_at)
            current.save(update_fields=["ended_at"])
        return BrandPlan.objects.create(brand=brand, plan=plan, started_at=now, changed_by=actor, reason=reason[:200])
