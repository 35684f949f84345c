"""The four audit tables as migration 0004 installed them (and 0008's view lists them), frozen:
history names its tables. Not a migration (the leading underscore keeps the loader away); the
living declarations are each app's ``audit`` module, registered with ``core.audit_sql``."""

from core.audit_sql import AuditTable

AUDIT_TABLES = (
    AuditTable(
        "campaigns_rewardevent",
        "reward_id",
        "reward",
        ("id", "reward_id", "kind", "from_status", "to_status", "actor_id", "created_at"),
        "reason",
        "data",
    ),
    AuditTable(
        "payouts_payoutevent",
        "payout_id",
        "payout",
        ("id", "payout_id", "kind", "from_status", "to_status", "actor_id", "created_at"),
        None,
        "data",
    ),
    AuditTable(
        "campaigns_campaignevent",
        "campaign_id",
        "campaign",
        ("id", "campaign_id", "kind", "from_status", "to_status", "actor_id", "created_at"),
        "reason",
        "data",
    ),
    AuditTable(
        "recipients_personevent",
        "person_id",
        "person",
        ("id", "person_id", "kind", "actor_id", "source", "created_at"),
        None,
        "detail",
        add_stream_index=True,
    ),
)
