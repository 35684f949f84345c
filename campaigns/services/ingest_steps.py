"""The campaign an event is for, with its active rules, read once per call (the rest of the
evaluation is in ``ingest_batch``)."""

from dataclasses import dataclass

from campaigns.evaluation import fee_for
from campaigns.models import Campaign, RewardRule, Trigger
from campaigns.services.ingest_types import EventInput
from core.exceptions import NotFound


@dataclass
class CampaignContext:
    campaign: Campaign
    rules: list[RewardRule]
    smallest_reservation: int | None

    def rule_for(self, payload: EventInput) -> RewardRule | None:
        custom = payload.custom_name if payload.type == Trigger.CUSTOM else ""
        return next((r for r in self.rules if r.trigger == payload.type and r.custom_name == custom), None)


def campaign_context(brand, slug: str) -> CampaignContext:
    """The campaign and its active rules: one query (rules joined to their campaign) unless the
    campaign has no active rule."""
    rules = list(
        RewardRule.objects.filter(campaign__brand=brand, campaign__slug=slug, is_active=True)
        .select_related("campaign__brand", "campaign__budget_account")
        .order_by("id")
    )
    if rules:
        campaign = rules[0].campaign
        for rule in rules:
            rule.campaign = campaign
    else:
        campaign = Campaign.objects.select_related("brand", "budget_account").filter(brand=brand, slug=slug).first()
        if campaign is None:
            raise NotFound(f"No campaign {slug!r} for this brand.", code="campaign_not_found")
    smallest = min(
        (
            r.smallest_reward_minor
            + fee_for(brand=campaign.brand, amount_minor=r.smallest_reward_minor, currency=campaign.currency)
            for r in rules
        ),
        default=None,
    )
    return CampaignContext(campaign=campaign, rules=rules, smallest_reservation=smallest)
