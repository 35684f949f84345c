"""Which package a brand is on (``campaigns.models.plans``): it changes only through
``brand_plan_change``; reads are in ``campaigns.selectors`` (``brand_plan_current``). Its monthly
fee is charged by ``campaigns.services.plan_charges``."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from campaigns.models import Brand, BrandPlan, Plan, UpgradeRequest
from core.exceptions import InvalidInput


def brand_plan_change(
    *, brand: Brand, plan: Plan, actor=None, reason: str = "", now: datetime | None = None
) -> BrandPlan:
    """Put ``brand`` on ``plan`` from ``now``: the current period ends, a new one starts (the same
    plan again is a no-op returning the current period). The new period, with ``actor`` and
    ``reason``, is the change's audit row; the brand's open upgrade requests for ``plan`` are
    marked handled by ``actor``. The partial unique constraint keeps one current period per brand
    under concurrent changes (the brand row is locked first). Joins the caller's transaction or
    opens one."""
    now = now or timezone.now()
    with transaction.atomic():
        Brand.objects.select_for_update().filter(pk=brand.pk).first()
        current = BrandPlan.objects.filter(brand=brand, ended_at__isnull=True).first()
        if current is not None and current.plan_id == plan.pk:
            return current
        if current is not None:
            current.ended_at = max(now, current.started_at)
            current.save(update_fields=["ended_at"])
        UpgradeRequest.objects.filter(brand=brand, wanted_plan=plan, handled_at__isnull=True).update(
            handled_at=now, handled_by=actor
        )
        return BrandPlan.objects.create(brand=brand, plan=plan, started_at=now, changed_by=actor, reason=reason[:200])


def upgrade_request_create(*, brand: Brand, plan: Plan, requested_by, message: str = "") -> UpgradeRequest:
    """Record that ``brand`` asks for ``plan`` (ops see it in the admin, with the brand's Change
    plan page one click away). Raises InvalidInput (``same_plan``: it is on it already; ``not_for_sale``)."""
    current = BrandPlan.objects.filter(brand=brand, ended_at__isnull=True).values_list("plan_id", flat=True).first()
    if current == plan.pk:
        raise InvalidInput(_("You are on this plan already."), code="same_plan")
    if not plan.is_public:
        raise InvalidInput(_("This plan is not for sale."), code="not_for_sale")
    return UpgradeRequest.objects.create(
        brand=brand, current_plan_id=current, wanted_plan=plan, message=message[:2000], requested_by=requested_by
    )


def upgrade_requests_handle(*, request_ids: list[int], actor) -> int:
    """Mark open upgrade requests handled (ops answered them without a change). Returns how many."""
    return UpgradeRequest.objects.filter(pk__in=request_ids, handled_at__isnull=True).update(
        handled_at=timezone.now(), handled_by=actor
    )
