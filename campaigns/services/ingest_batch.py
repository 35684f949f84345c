"""The core of ingestion, set-wise: a batch of prepared events decided in order and written with
one statement per table, whatever its size (``event_ingest`` runs a batch of one,
``event_ingest_bulk`` chunks of up to ``BULK_CHUNK``).

Per batch, in the lock order of ``campaigns.locks``:

1. people: ``recipients.services.people_resolve`` finds or creates everyone and locks their roots;
2. IBANs: one advisory-lock statement, fingerprints ascending, sent with
3. what the rules need to know (``ingest_reads.Known.reads``): earlier rewards under the caps,
   "new to the brand", the velocity signals;
4. the campaigns' tallies and budget accounts, then the rules' campaign-wide counters, then
   (only when the plan has a monthly allowance) the brand's month of usage, locked
   (``Known.locked_reads``);
5. each event decided in order by ``campaigns.evaluation.decide``, seeing what the events before
   it in the batch took, exactly as if they had been ingested one by one;
6. writes, one statement per table: events, holds (``ledger_holds_create``), rewards and their
   audit rows, counter deltas, the brand's month of usage (``BrandUsage``, against its plan).

Everything joins the caller's transaction (``atomic(durable=True)``). When another transaction
stored one of these events first, the event INSERT fails on ``(brand, external_id)`` with an
IntegrityError: the caller rolls the whole batch back and runs it again without that event (it
is then a replay), so nothing the loser decided is kept.
"""

import copy
from collections import defaultdict
from datetime import datetime, timedelta
from functools import partial

from django.db import connection, transaction

from campaigns.evaluation import Decision, decide
from campaigns.locks import lock_ibans_statement
from campaigns.models import (
    BrandUsage,
    BudgetAlert,
    CampaignEvent,
    CampaignStatus,
    EventOutcome,
    Reward,
    RewardEvent,
    RewardStatus,
    RuleCounter,
    TriggerEvent,
)
from campaigns.models.plans import usage_month
from campaigns.services.campaigns import _transition
from campaigns.services.ingest_reads import Known, Tally
from campaigns.services.ingest_types import Item
from core.bulk import queries_run, rows_insert
from core.exceptions import ApplicationError
from core.hooks import AUDIT_ROWS_WRITTEN, REWARD_CHANGED, hook_fire
from recipients.services import IdentityInput, people_resolve
from reconciliation.services import HoldSpec, ledger_holds_create

__all__ = ["Item", "ingest_batch"]


def ingest_batch(*, brand, items: list[Item], now: datetime) -> None:
    """Decide and store ``items`` (in the caller's transaction), filling in each one's outcome,
    event and reward — or ``error`` (nothing stored for it). Raises IntegrityError when another
    transaction stored one of these events first (see the module docstring), and ComplexBatch
    (for more than one item, before writing anything) when some identity needs writes that would
    change what the others see: such a batch must be taken one event per transaction — one by
    one inside a single transaction would take a person's lock after a campaign tally, against
    the lock order."""
    for item in items:
        item.rule = item.ctx.rule_for(item.p.payload)
        item.early = _early_rejection(item) or ""
    _people(brand, items, simple_only=len(items) > 1)
    live = [i for i in items if i.error is None]
    todo = [i for i in live if not i.early]
    known = Known(brand=brand, items=todo, now=now)
    queries_run([(lock_ibans_statement(fingerprints=[i.who.fingerprint for i in todo]), None), *known.reads()])
    queries_run(known.locked_reads())
    for item in live:
        if item.early:
            _reject(item, item.early)
        else:
            _decide(brand, item, known)
        known.seen(item)
    _write(brand, live, known.taken, now=now)


def _decide(brand, item: Item, known: Known) -> None:
    decision = decide(rule=item.rule, campaign=item.ctx.campaign, plan=item.ctx.plan, facts=known.facts(item))
    tally = known.tallies[item.ctx.campaign.pk]
    if decision.reason:
        _reject(item, decision.reason)
        if decision.reason == "budget_exhausted":
            _pause_if_spent(item.ctx, tally)
        return
    _accept(item, decision)
    spent_before = tally.funded - tally.available
    known.took(item, decision)
    _budget_alerts(item.ctx, tally, spent_before=spent_before)
    _pause_if_spent(item.ctx, tally)


def _early_rejection(item: Item) -> str | None:
    """Reasons that need no person: checked before resolving anyone."""
    campaign, p = item.ctx.campaign, item.p
    if campaign.status != CampaignStatus.ACTIVE:
        return "campaign_not_active"
    if p.occurred_at < campaign.starts_at or (campaign.ends_at and p.occurred_at >= campaign.ends_at):
        return "outside_campaign_window"
    if item.rule is None:
        return "no_matching_rule"
    if item.ctx.plan is not None and item.rule.trigger not in item.ctx.plan.triggers:
        return "plan_excludes_trigger"  # the plan changed after the rule was made
    return None


def _people(brand, items: list[Item], *, simple_only: bool) -> None:
    todo = [i for i in items if not i.early]
    # The brand's own API vouches for the identifiers it sends about its own people.
    resolved = people_resolve(
        brand_id=brand.pk,
        identities=[
            IdentityInput(
                name=i.p.payload.name,
                email=i.p.payload.email,
                whatsapp=i.p.payload.whatsapp,
                iban=i.p.payload.iban,
                account=i.p.iban_info,
                social_provider=i.p.payload.social_provider,
                social_uid=i.p.payload.social_uid,
                phone_region=i.p.payload.phone_region,
            )
            for i in todo
        ],
        sources=[i.p.payload.source for i in todo],
        simple_only=simple_only,
    )
    for item, who in zip(todo, resolved, strict=True):
        if isinstance(who, ApplicationError):
            item.error = who
        else:
            item.who = who


def _reject(item: Item, reason: str) -> None:
    item.outcome, item.reason = EventOutcome.REJECTED, reason


def _accept(item: Item, decision: Decision) -> None:
    item.amount, item.fee = decision.amount_minor, decision.fee_minor
    item.review_reasons = decision.review_reasons
    if decision.review_reasons:
        item.outcome, item.status = EventOutcome.REVIEW, RewardStatus.REVIEW
    else:
        item.outcome = EventOutcome.HELD if item.rule.hold_days else EventOutcome.REWARDED
        item.status = RewardStatus.HELD


def _budget_alerts(ctx, tally: Tally, *, spent_before: int) -> None:
    """Record each 50/80/100 % threshold this reservation crossed, once (the tally lock makes
    ``available`` exact)."""
    if tally.funded <= 0:
        return
    spent_after = tally.funded - tally.available
    for pct in BudgetAlert.THRESHOLDS:
        if spent_before * 100 < pct * tally.funded <= spent_after * 100:
            # Once per threshold and funded amount (the model's unique key): spending that falls
            # back under a threshold after a void and crosses it again is no new alert — and
            # must not fail the reservation on the key.
            _, created = BudgetAlert.objects.get_or_create(
                campaign=ctx.campaign,
                threshold_pct=pct,
                funded_minor=tally.funded,
                defaults={"spent_minor": spent_after},
            )
            if created:
                hook_fire(AUDIT_ROWS_WRITTEN)  # a campaign.budget_threshold webhook
                CampaignEvent.objects.create(
                    campaign=ctx.campaign,
                    kind="campaign.budget_threshold",
                    to_status=tally.status,
                    data={"threshold_pct": pct, "funded_minor": tally.funded, "spent_minor": spent_after},
                )


def _pause_if_spent(ctx, tally: Tally) -> None:
    """Pause the campaign when what is left cannot pay the smallest reward any active rule can
    give (a large percentage reward that does not fit is refused without pausing: smaller ones
    still can)."""
    if tally.status != CampaignStatus.ACTIVE:
        return
    if ctx.smallest_reservation is None or tally.available >= ctx.smallest_reservation:
        return
    # On a copy: the context is shared by every transaction of the call (chunks, retries after a
    # lost race), and a pause that rolls back must not leave it saying "paused" — later events
    # would be stored as refused for a campaign that is active. It learns of the pause on commit.
    _transition(
        campaign=copy.copy(ctx.campaign),
        from_statuses=(CampaignStatus.ACTIVE,),
        to=CampaignStatus.PAUSED,
        kind="campaign.paused",
        reason="budget_exhausted",
        data={"available_minor": tally.available, "automatic": True},
    )
    tally.status = CampaignStatus.PAUSED
    transaction.on_commit(partial(setattr, ctx.campaign, "status", CampaignStatus.PAUSED))


# --- writes: one statement per table ---------------------------------------------------------------


def _write(brand, items: list[Item], taken: dict[tuple[int, str], int], *, now: datetime) -> None:
    for item, event in zip(items, rows_insert(TriggerEvent, [_event_row(brand, i, now) for i in items]), strict=True):
        item.event = event
    rewarded = [i for i in items if i.status]
    if not rewarded:
        return
    by_campaign: dict[int, list[Item]] = defaultdict(list)
    for item in rewarded:
        by_campaign[item.ctx.campaign.pk].append(item)
    for group in by_campaign.values():
        campaign = group[0].ctx.campaign
        holds = ledger_holds_create(
            account=campaign.budget_account, currency=campaign.currency, holds=[_hold_spec(brand, i) for i in group]
        )
        for item, hold in zip(group, holds, strict=True):
            item.reward = _reward_row(item, hold, now)
    rows_insert(Reward, [i.reward for i in rewarded])
    rows_insert(RewardEvent, [_reward_event_row(i, now) for i in rewarded], keys=False)
    _counters_add(taken)
    _usage_add(brand, rewarded, now=now)
    hook_fire(REWARD_CHANGED, *(item.reward for item in rewarded))
    hook_fire(AUDIT_ROWS_WRITTEN)


def _event_row(brand, item: Item, now: datetime) -> TriggerEvent:
    p, payload, who = item.p, item.p.payload, item.who
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
    """Add the batch's takes to the counters in one upsert (deltas, not totals: a concurrent
    void's decrement must not be overwritten)."""
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


def _usage_add(brand, rewarded: list[Item], *, now: datetime) -> None:
    """Add the batch's accepted rewards to the brand's month (``BrandUsage``) in one upsert (a
    delta, like the counters)."""
    table = BrandUsage._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (brand_id, month, actions, rewards_minor) VALUES (%s, %s, %s, %s) "  # noqa: S608
            "ON CONFLICT (brand_id, month) DO UPDATE SET "
            f"actions = {table}.actions + excluded.actions, "
            f"rewards_minor = {table}.rewards_minor + excluded.rewards_minor",
            [brand.pk, usage_month(now), len(rewarded), sum(i.amount for i in rewarded)],
        )
