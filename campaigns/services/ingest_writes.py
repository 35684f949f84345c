"""How ``ingest_batch`` writes a decided batch: one statement per table (COPY for big batches), or
for a small batch (a single event) every row in one pipelined round trip with keys reserved
before the tally lock was taken."""

from collections import defaultdict
from datetime import datetime, timedelta

from django.db import connection

from campaigns.models import Reward, RewardEvent, RuleCounter, TriggerEvent
from campaigns.services.ingest_types import Item
from core.bulk import insert_statement, model_new, rows_copy, rows_insert, statements_run
from core.hooks import AUDIT_ROWS_WRITTEN, REWARD_CHANGED, hook_fire
from reconciliation.services import HoldSpec, ledger_holds_create


def write(brand, items: list[Item], taken: dict[tuple[int, str], int], *, now: datetime) -> None:
    """One INSERT (COPY) per table for the whole batch."""
    for item, event in zip(items, rows_insert(TriggerEvent, [_event_row(brand, i, now) for i in items]), strict=True):
        item.event = event
    rewarded = [i for i in items if i.status]
    for group in _by_campaign(rewarded):
        campaign = group[0].ctx.campaign
        holds = ledger_holds_create(
            account=campaign.budget_account, currency=campaign.currency, holds=[_hold_spec(brand, i) for i in group]
        )
        for item, hold in zip(group, holds, strict=True):
            item.reward = _reward_row(item, hold, now)
    if not rewarded:
        return
    rows_insert(Reward, [i.reward for i in rewarded])
    rows_copy(RewardEvent, _REWARD_EVENT_FIELDS, [_reward_event_row(i, now) for i in rewarded])
    _counters_add(taken)
    _rewards_announce(rewarded)


def write_together(brand, items: list[Item], taken, keys: list[list[int]], *, now: datetime) -> None:
    """The same rows as ``_write``, sent as one multi-statement round trip (keys reserved)."""
    event_ids, _, reward_ids = (iter(k) for k in keys)
    events = [_event_row(brand, item, now) for item in items]
    for item, event in zip(items, events, strict=True):
        event.pk = next(event_ids)
        item.event = event
    statements = [insert_statement(TriggerEvent, events)]
    rewarded = [i for i in items if i.status]
    for group in _by_campaign(rewarded):
        campaign = group[0].ctx.campaign
        holds = ledger_holds_create(
            account=campaign.budget_account, currency=campaign.currency, holds=[_hold_spec(brand, i) for i in group]
        )
        for item, hold in zip(group, holds, strict=True):
            item.reward = _reward_row(item, hold, now)
            item.reward.pk = next(reward_ids)
    if rewarded:
        statements.append(insert_statement(Reward, [i.reward for i in rewarded]))
        reward_events = [
            RewardEvent(**dict(zip(_REWARD_EVENT_FIELDS, _reward_event_row(i, now), strict=True))) for i in rewarded
        ]
        statements.append(insert_statement(RewardEvent, reward_events, keys=False))
        statements.append(_counters_statement(taken))
    statements_run(statements)
    for obj in [*events, *(i.reward for i in rewarded), *(i.reward.hold for i in rewarded)]:
        obj._state.adding, obj._state.db = False, "default"
    _rewards_announce(rewarded)


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
    return model_new(
        Reward,
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


_REWARD_EVENT_FIELDS = ["reward_id", "kind", "to_status", "reason", "data", "created_at"]


def _reward_event_row(item: Item, now: datetime) -> tuple:
    return (
        item.reward.pk,
        f"reward.{item.status}",
        item.status,
        ",".join(item.review_reasons)[:200],
        {"amount_minor": item.amount, "fee_minor": item.fee, "hold_id": item.reward.hold_id},
        now,
    )


def _rewards_announce(rewarded: list[Item]) -> None:
    hook_fire(REWARD_CHANGED, *(item.reward for item in rewarded))
    hook_fire(AUDIT_ROWS_WRITTEN)


def _counters_add(taken: dict[tuple[int, str], int]) -> None:
    sql, params = _counters_statement(taken)
    if sql:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def _counters_statement(taken: dict[tuple[int, str], int]) -> tuple[str, list]:
    """Add the batch's takes to the counters in one upsert (deltas, not totals: a concurrent
    void's decrement must not be overwritten)."""
    rows = [(rule_id, period, n) for (rule_id, period), n in sorted(taken.items()) if n]
    if not rows:
        return "", []
    table = RuleCounter._meta.db_table
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    return (
        f"INSERT INTO {table} (rule_id, period, rewards_count) VALUES {values} "  # noqa: S608 - placeholders only
        "ON CONFLICT (rule_id, period) DO UPDATE "
        f"SET rewards_count = {table}.rewards_count + excluded.rewards_count",
        [v for row in rows for v in row],
    )


def _event_row(brand, item: Item, now: datetime) -> TriggerEvent:
    p, payload = item.p, item.p.payload
    who = item.who
    return model_new(
        TriggerEvent,
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
