"""Payout events as brand webhooks (``payout.submitted``, ``settled``, ``failed``, ``returned``).

``PayoutEvent`` is one of the outbox tables ``campaigns.webhooks`` collects; payouts registers it
there (``PayoutsConfig.ready``) because campaigns, below payouts, may not import it. A payout can
carry rewards of several brands: each brand gets one event with its own items' amount and rewards.
"""

from campaigns.webhooks import COLLECT_LIMIT, Emit, WebhookCollector
from payouts.models import PayoutEvent, PayoutItem

KINDS = ("payout.submitted", "payout.settled", "payout.failed", "payout.returned")


def payout_events_collect(cursor: int, brands: set[int]):
    """The ``collect`` of ``WebhookCollector``: up to ``COLLECT_LIMIT`` payout events above
    ``cursor``, each with one emit per brand of ``brands`` that has items in the payout."""
    rows = list(
        PayoutEvent.objects.filter(id__gt=cursor, kind__in=KINDS)
        .select_related("payout")
        .order_by("id")[:COLLECT_LIMIT]
    )
    items: dict[int, list] = {}
    for item in PayoutItem.objects.filter(
        payout_id__in={r.payout_id for r in rows}, reward__campaign__brand_id__in=brands
    ).values("payout_id", "reward_id", "amount_minor", "reward__campaign__brand_id"):
        items.setdefault(item["payout_id"], []).append(item)
    for row in rows:
        per_brand: dict[int, list] = {}
        for item in items.get(row.payout_id, []):
            per_brand.setdefault(item["reward__campaign__brand_id"], []).append(item)
        payout = row.payout
        emits: list[Emit] = [
            (
                brand_id,
                row.kind,
                {
                    "payout": {
                        "id": payout.pk,
                        "status": row.to_status,
                        "currency": payout.currency,
                        "amount_minor": sum(i["amount_minor"] for i in brand_items),
                        "reward_ids": [i["reward_id"] for i in brand_items],
                        "reason_code": payout.reason_code,
                    }
                },
            )
            for brand_id, brand_items in per_brand.items()
        ]
        yield row.id, emits


PAYOUT_EVENTS = WebhookCollector(name="payout_event", model=PayoutEvent, collect=payout_events_collect, order=30)
