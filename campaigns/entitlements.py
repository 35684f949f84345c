"""What a brand's package allows (``campaigns.models.plans``), checked in one place.

Every service that creates or changes a rule, a campaign or an API key calls one of these first,
so the portal, the API and the admin refuse the same way: ``PlanRefused`` (code
``plan_refuses``, HTTP 403) with a message naming the plan and what it lacks. Ingestion does
not call them per event: it reads the plan once per call with the campaign
(``ingest_reads.campaign_context``) and refuses an event over the monthly allowance with a
reason (``plan_monthly_actions``, ``plan_monthly_payouts``).
"""

from django.db.models import Exists, OuterRef, Q
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from campaigns.models import Brand, BrandPlan, Campaign, CampaignMode, RewardRule, Trigger
from campaigns.models.plans import Channel, Plan
from campaigns.selectors import brand_plan_current
from core.exceptions import PlanRefused


def plan_display_name(plan: Plan) -> str:
    """The plan's name in the active language (the Italian one when set)."""
    if plan.name_it and (get_language() or "").startswith("it"):
        return plan.name_it
    return plan.name


def _refuse(plan: Plan, what: str, *, lacks: str) -> PlanRefused:
    return PlanRefused(
        _("Your plan %(plan)s does not include %(what)s.") % {"plan": plan_display_name(plan), "what": what},
        details={"plan": plan.slug, "lacks": lacks},
    )


def entitlement_plan(*, brand: Brand) -> Plan:
    """The brand's current plan. Raises PlanRefused when it has none (a brand made before plans
    existed and never migrated)."""
    plan = brand_plan_current(brand=brand)
    if plan is None:
        raise PlanRefused(_("Your brand is not on a plan yet; ask us to choose one."), details={"plan": None})
    return plan


def entitlement_trigger_check(*, brand: Brand, trigger: str) -> Plan:
    """Refuse (PlanRefused) a rule for a trigger the brand's plan does not include."""
    plan = entitlement_plan(brand=brand)
    if trigger not in plan.triggers:
        label = Trigger(trigger).label if trigger in Trigger.values else trigger
        raise _refuse(plan, _("the trigger %(trigger)s") % {"trigger": label}, lacks=f"trigger:{trigger}")
    return plan


def entitlement_channel_check(*, brand: Brand, channel: str) -> Plan:
    """Refuse (PlanRefused) what needs a channel the plan lacks: an API key needs ``api``, a public
    claim page ``claim_page``."""
    plan = entitlement_plan(brand=brand)
    if channel not in plan.channels:
        raise _refuse(plan, str(Channel(channel).label), lacks=f"channel:{channel}")
    return plan


def entitlement_campaign_check(*, brand: Brand, mode: str) -> Plan:
    """Refuse a campaign its plan could not give a single rule: Cashback needs the purchase
    trigger, JoyBack any social one."""
    plan = entitlement_plan(brand=brand)
    if mode == CampaignMode.CASHBACK and Trigger.PURCHASE not in plan.triggers:
        raise _refuse(plan, _("Cashback campaigns"), lacks=f"mode:{mode}")
    if mode == CampaignMode.JOYBACK and not set(plan.triggers) - {Trigger.PURCHASE}:
        raise _refuse(plan, _("JoyBack campaigns"), lacks=f"mode:{mode}")
    return plan


def entitlement_default_trigger(*, brand: Brand, mode: str) -> str:
    """The trigger a new rule of a ``mode`` campaign starts on: a purchase for Cashback; for
    JoyBack the first social trigger (in ``TRIGGERS`` order) the brand's plan includes, so the form
    never opens on a trigger the campaign cannot use. Without a plan, the first social trigger."""
    if mode == CampaignMode.CASHBACK:
        return Trigger.PURCHASE
    plan = brand_plan_current(brand=brand)
    social = [t for t in Trigger.values if t != Trigger.PURCHASE]
    allowed = [t for t in social if plan is None or t in plan.triggers]
    return (allowed or social)[0]


def entitlement_launch_check(*, campaign: Campaign) -> Plan:
    """Refuse to launch a campaign with an active rule its brand's plan no longer includes (the
    plan changed after the rule was made)."""
    plan = entitlement_plan(brand=campaign.brand)
    triggers = RewardRule.objects.filter(campaign=campaign, is_active=True).values_list("trigger", flat=True)
    for trigger in sorted(set(triggers)):
        if trigger not in plan.triggers:
            raise _refuse(
                plan, _("the trigger %(trigger)s") % {"trigger": Trigger(trigger).label}, lacks=f"trigger:{trigger}"
            )
    return plan


def claim_page_available(*, campaign: Campaign, plan: Plan | None) -> bool:
    """Whether the campaign has a public claim page: its plan includes claim pages, or (an
    API-only plan) the brand turned on claim links for buyers without a bank account."""
    return (plan is not None and Channel.CLAIM_PAGE in plan.channels) or campaign.buyer_claim_links


def claim_page_available_q(*, campaign: str = "") -> Q:
    """``claim_page_available`` as a filter, for the campaign at the lookup path ``campaign``
    (``"campaign"`` from a reward; none: the campaigns themselves): the brand's current plan
    includes claim pages, or the campaign has claim links for buyers. The plans are few: which
    include claim pages is read here, once per call."""
    path = f"{campaign}__" if campaign else ""
    with_page = [pk for pk, channels in Plan.objects.values_list("pk", "channels") if Channel.CLAIM_PAGE in channels]
    current = BrandPlan.objects.filter(
        brand_id=OuterRef(f"{path}brand_id"), ended_at__isnull=True, plan_id__in=with_page
    )
    return Q(**{f"{path}buyer_claim_links": True}) | Q(Exists(current))
