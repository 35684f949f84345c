"""How ``ingest_batch`` writes a decided batch: one statement per table, whatever its size."""

from collections import defaultdict
from datetime import datetime, timedelta

from django.db import connection

from campaigns.models import Reward, RewardEvent, RuleCounter, TriggerEvent
from campaigns.services.ingest_types import Item
from core.bulk import rows_insert
from core.hooks import AUDIT_ROWS_WRITTEN, REWARD_CHANGED, hook_fire
from reconciliation.services import HoldSpec, ledger_holds_create_bulk


def write(brand, items: list[Item], taken: dict[tuple[int, str], int], *, now: datetime) -> None:
    """The batch's events, the holds reserving its rewards, the rewards with their audit rows,
    and the campaign-wide counters' deltas."""
    for item, event in zip(items, rows_insert(TriggerEvent, [_event_row(brand, i, now) for i in items]), strict=True):
        item.event = event
    rewarded = [i for i in items if i.status]
    if not rewarded:
        return
    for group in _by_campaign(rewarded):
        campaign = group[0].ctx.campaign
        holds = ledger_holds_create_bulk(
            account=campaign.budget_account, currency=campaign.currency, holds=[_hold_spec(brand, i) for i in group]
        )
        for item, hold in zip(group, holds, strict=True):
            item.reward = _reward_row(item, hold, now)
    rows_insert(Reward, [i.reward for i in rewarded])
    rows_insert(RewardEvent, [_reward_event_row(i, now) for i in rewarded])
    _counters_add(taken)
    hook_fire(REWARD_CHANGED, *(item.reward for item in rewarded))
    hook_fire(AUDIT_ROWS_WRITTEN)


def _by_campaign(items: list[Item]) -> list[list[Item]]:
    groups: dict[int, list[Item]] = defaultdict(list)
    for item in items:
        groups[item.ctx.campaign.pk].append(item)
    return list(groups.values())


def _hold_spec(brand, item: Item) -> HoldSpec:
    external_id = item.p.payload.external_id
    return HoldSpec(
        idempotency_key=f"reward:{brand.pk}:{external_id}",
        amount_minor=item.amount + item.fee,
        memo=f"Reward for {item.p.payload.type} {external_id}",
        reference_type="trigger_event",
        reference_id=f"{brand.pk}:{external_id}"[:64],
    )


def _reward_row(item: Item, hold, now: datetime) -> Reward:
    campaign = item.ctx.campaign
    return Reward(
        event=item.event,
        campaign=campaign,
        rule=item.rule,
        person=item.who.person,
        amount_minor=item.amount,
        fee_minor=item.fee,
        currency=campaign.currency,
        status=item.status,
        hold=hold,
        occurred_at=item.p.occurred_at,
        matures_at=max(item.p.occurred_at + timedelta(days=item.rule.hold_days), now),
        iban_fingerprint=item.who.fingerprint,
        review_reasons=item.review_reasons,
        created_at=now,
        updated_at=now,
    )


def _reward_event_row(item: Item, now: datetime) -> RewardEvent:
    return RewardEvent(
        reward=item.reward,
        kind=f"reward.{item.status}",
        to_status=item.status,
        reason=",".join(item.review_reasons)[:200],
        data={"amount_minor": item.amount, "fee_minor": item.fee, "hold_id": item.reward.hold_id},
        created_at=now,
    )


def _counters_add(taken: dict[tuple[int, str], int]) -> None:
    """Add the batch's takes to the counters in one upsert: deltas, not totals, so a concurrent
    void's decrement is never overwritten (``bulk_create(update_conflicts=…)`` can only set)."""
    rows = [(rule_id, period, n) for (rule_id, period), n in sorted(taken.items()) if n]
    if not rows:
        return
    table = RuleCounter._meta.db_table
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (rule_id, period, rewards_count) VALUES {values} "  # noqa: S608 - placeholders only
            "ON CONFLICT (rule_id, period) DO UPDATE "
            f"SET rewards_count = {table}.rewards_count + excluded.rewards_count",
            [v for row in rows for v in row],
        )


def _event_row(brand, item: Item, now: datetime) -> TriggerEvent:
    p, payload = item.p, item.p.payload
    who = item.who
    return TriggerEvent(
        brand=brand,
        campaign=item.ctx.campaign,
        rule=item.rule,
        type=payload.type,
        custom_name=payload.custom_name,
        external_id=payload.external_id,
        occurred_at=p.occurred_at,
        received_at=now,
        person=who.person if who else None,
        email=p.email,
        whatsapp=p.whatsapp,
        social_provider=p.social.split(":", 1)[0] if p.social else "",
        social_uid=p.social.split(":", 1)[1] if p.social else "",
        iban_fingerprint=(who.fingerprint if who else "") or p.iban_fingerprint,
        iban_country=who.country if who else "",
        evidence=payload.evidence,
        source=payload.source,
        ip=p.ip or None,
        device_fingerprint=payload.device_fingerprint,
        purchase_amount_minor=payload.purchase_amount_minor,
        purchase_currency=payload.purchase_currency.upper(),
        order_id=payload.order_id,
        code=payload.code,
        view_count=payload.view_count,
        outcome=item.outcome,
        reason=item.reason,
        review_reasons=item.review_reasons,
        request_hash=p.request_hash,
    )
