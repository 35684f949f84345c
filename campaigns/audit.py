"""Campaigns' audit tables (``core.audit_sql``): reward events, one stream per reward, and
campaign events, one per campaign. Registered by ``CampaignsConfig.ready``."""

from campaigns.models import Reward
from core.audit_sql import AuditTable


def _rewards_of(people: list[int]) -> list[int]:
    return list(Reward.objects.filter(person_id__in=people).values_list("id", flat=True))


REWARD_EVENTS = AuditTable(
    "campaigns_rewardevent",
    "reward_id",
    "reward",
    ("id", "reward_id", "kind", "from_status", "to_status", "actor_id", "created_at"),
    "reason",
    "data",
    person_streams=_rewards_of,
)

CAMPAIGN_EVENTS = AuditTable(
    "campaigns_campaignevent",
    "campaign_id",
    "campaign",
    ("id", "campaign_id", "kind", "from_status", "to_status", "actor_id", "created_at"),
    "reason",
    "data",
)
