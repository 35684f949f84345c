"""Payouts' audit tables (``core.audit_sql``): payout events, one stream per payout, and payout
batch events (payouts 0003: building, four-eyes approval, every download and the expiry of a
pain.001 file), one per batch. Registered by ``PayoutsConfig.ready``."""

from core.audit_sql import AuditTable
from payouts.models import Payout


def _payouts_of(people: list[int]) -> list[int]:
    return list(Payout.objects.filter(person_id__in=people).values_list("id", flat=True))


PAYOUT_EVENTS = AuditTable(
    "payouts_payoutevent",
    "payout_id",
    "payout",
    ("id", "payout_id", "kind", "from_status", "to_status", "actor_id", "created_at"),
    None,
    "data",
    person_streams=_payouts_of,
)

PAYOUT_BATCH_EVENTS = AuditTable(
    "payouts_payoutbatchevent",
    "batch_id",
    "batch",
    ("id", "batch_id", "kind", "actor_id", "created_at"),
    "reason",
    "data",
)
