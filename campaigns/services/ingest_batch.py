"""The core of ingestion, set-wise: a batch of prepared events evaluated in order and written
with a constant number of statements, whatever its size (``event_ingest`` runs a batch of one,
``event_ingest_bulk`` chunks of up to ``BULK_CHUNK``).

Per batch, in the lock order of ``campaigns.locks``:

1. people: ``recipients.services.people_resolve`` finds or creates everyone and locks their roots;
2. IBANs: one advisory-lock statement, fingerprints ascending;
3. what the rules need, one query each: earlier rewards of these people and IBANs under the
   rules' caps, "new to the brand", and the velocity signals (events per IP / device, rewards
   per IBAN, people per IBAN);
4. the campaigns' tallies and budget accounts (``FOR UPDATE``, ascending), then the rules'
   campaign-wide counters (``FOR UPDATE``);
5. evaluation in Python, event by event in order: each sees what the events before it in the
   batch took (caps, counters, budget, signals), exactly as if they had been ingested one by one;
6. writes, one statement per table: events, holds (``ledger_holds_create``), rewards and
   their audit rows, counter deltas — for a single event all of them in one round trip.

The reads of steps 3–4 are in ``ingest_reads``, the writes of step 6 in ``ingest_writes``.

Everything joins the caller's transaction (``atomic(durable=True)``). When another transaction
stored one of these events first, the event INSERT fails on ``(brand, external_id)`` with an
IntegrityError: the caller rolls the whole batch back and runs it again without that event (it
is then a replay), so nothing the loser evaluated is kept.
"""

import copy
import json
from collections import defaultdict
from datetime import datetime
from functools import partial

from django.db import connection, transaction

from campaigns.evaluation import (
    Facts,
    Signals,
    approval_verdict,
    cap_failure,
    condition_failure,
    fee_for,
    fraud_reasons,
    periods_for,
    reward_amount,
)
from campaigns.locks import lock_ibans_statement, tally_lock_statement
from campaigns.models import (
    BudgetAlert,
    CampaignEvent,
    CampaignStatus,
    EventOutcome,
    Reward,
    RewardStatus,
    TriggerEvent,
)
from campaigns.services.campaigns import _transition
from campaigns.services.ingest_reads import (
    SignalCounts,
    Tally,
    Uses,
    counter_limits,
    counters_reads,
    not_new_reads,
    signals_reads,
    tally_parse,
    uses_reads,
)
from campaigns.services.ingest_types import Item
from campaigns.services.ingest_writes import write, write_together
from core.bulk import COPY_FROM, ids_reserve, queries_run
from core.exceptions import ApplicationError
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from recipients.models import BankAccount, Person
from recipients.services import IdentityInput, people_resolve
from reconciliation.models import Hold

__all__ = ["Item", "ingest_batch"]


def ingest_batch(*, brand, items: list[Item], now: datetime) -> None:
    """Evaluate and store ``items`` (in the caller's transaction), filling in each one's
    outcome, event and reward — or ``error`` (nothing stored for it). Raises IntegrityError
    when another transaction stored one of these events first (see the module docstring), and
    ComplexBatch (for more than one item, before writing anything) when some identity needs
    writes that would change what the others see: such a batch must be taken one event per
    transaction — one by one inside a single transaction would take a person's lock after a
    campaign tally, against the lock order."""
    for item in items:
        item.rule = item.ctx.rule_for(item.p.payload)
        item.early = _early_rejection(item) or ""
    # A small batch (a single event) sends its writes in few round trips with keys reserved now:
    # new people in one, the reward's rows in one — the latter under the campaign's tally lock,
    # where every round trip makes the campaign's queue longer.
    keys = None
    if connection.vendor == "postgresql" and len(items) < COPY_FROM:
        n = len(items)
        keys = ids_reserve([(Person, n), (BankAccount, n), (TriggerEvent, n), (Hold, n), (Reward, n)])
    # Raises ComplexBatch (nothing written) when someone's identity needs writes the others of
    # the batch would see had they come one by one: the caller then takes them one by one.
    _people(brand, items, simple_only=len(items) > 1, keys=(keys[0], keys[1]) if keys else None)
    live = [i for i in items if i.error is None]
    todo = [i for i in live if not i.early]
    # The IBAN locks, then every fact the rules need: one round trip on PostgreSQL.
    uses, not_new, signals = Uses(), set(), SignalCounts()
    queries_run(
        [
            (lock_ibans_statement(fingerprints=[i.who.fingerprint for i in todo]), None),
            *uses_reads(todo, uses),
            *not_new_reads(brand, todo, not_new),
            *signals_reads(todo, signals, now=now),
        ]
    )
    # The tallies (ascending), then the counters they guard: one round trip on PostgreSQL.
    tallies: dict[int, Tally] = {}
    counters: dict[tuple[int, str], int] = {}
    queries_run(
        [
            *(
                (tally_lock_statement(campaign_id=cid), partial(tally_parse, tallies, cid))
                for cid in sorted({i.ctx.campaign.pk for i in todo})
            ),
            *counters_reads(todo, counters),
        ]
    )
    taken: dict[tuple[int, str], int] = defaultdict(int)
    for item in live:
        _evaluate(brand, item, uses, not_new, signals, tallies, counters, taken, now=now)
        payload, ip = item.p.payload, item.p.ip
        if ip:
            signals.ip[ip] = signals.ip.get(ip, 0) + 1
        if payload.device_fingerprint:
            signals.device[payload.device_fingerprint] = signals.device.get(payload.device_fingerprint, 0) + 1
    if keys is None:
        write(brand, live, taken, now=now)
    else:
        write_together(brand, live, taken, keys[2:], now=now)


def _early_rejection(item: Item) -> str | None:
    """Reasons that need no person: checked before resolving anyone."""
    campaign, p = item.ctx.campaign, item.p
    if campaign.status != CampaignStatus.ACTIVE:
        return "campaign_not_active"
    if p.occurred_at < campaign.starts_at or (campaign.ends_at and p.occurred_at >= campaign.ends_at):
        return "outside_campaign_window"
    if item.rule is None:
        return "no_matching_rule"
    return None


def _people(brand, items: list[Item], *, simple_only: bool, keys) -> None:
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
        keys=keys,
    )
    for item, who in zip(todo, resolved, strict=True):
        if isinstance(who, ApplicationError):
            item.error = who
        else:
            item.who = who


def _reject(item: Item, reason: str) -> None:
    item.outcome, item.reason = EventOutcome.REJECTED, reason


def _evaluate(brand, item, uses: Uses, not_new, signals: SignalCounts, tallies, counters, taken, *, now) -> None:
    """Decide one event, in the order ``event_ingest`` has always checked: status, conditions,
    amount, caps, fraud, then (under the tally) budget and campaign-wide counters."""
    if item.early:
        return _reject(item, item.early)
    p, rule, who, ctx = item.p, item.rule, item.who, item.ctx
    campaign, payload = ctx.campaign, p.payload
    # The status under the tally lock comes first, as ``_early_rejection``'s does for a single
    # event: a campaign paused by an earlier event of this batch, or since the context was read,
    # refuses the event before its conditions and caps are looked at.
    tally = tallies[campaign.pk]
    if tally.status != CampaignStatus.ACTIVE:
        return _reject(item, "campaign_not_active")
    root = who.person.pk
    facts = Facts(
        trigger=payload.type,
        source=payload.source,
        occurred_at=p.occurred_at,
        purchase_amount_minor=payload.purchase_amount_minor,
        purchase_currency=payload.purchase_currency.upper(),
        view_count=payload.view_count,
        code=payload.code,
        evidence_text=json.dumps(payload.evidence, default=str) if rule.required_code else "",
        iban_fingerprint=who.fingerprint,
        iban_country=who.country,
        person_is_new_to_brand=root not in not_new,
    )
    reason = condition_failure(rule=rule, facts=facts, currency=campaign.currency)
    if reason:
        return _reject(item, reason)
    amount = reward_amount(rule=rule, purchase_amount_minor=payload.purchase_amount_minor, currency=campaign.currency)
    if amount <= 0:
        return _reject(item, "amount_zero")
    periods = periods_for(p.occurred_at, campaign.tz)
    if rule.has_person_caps or (rule.has_iban_caps and who.fingerprint):
        usage = uses.usage(rule_id=rule.pk, root=root, fingerprint=who.fingerprint, periods=periods)
        reason = cap_failure(rule=rule, usage=usage, amount_minor=amount)
        if reason:
            return _reject(item, reason)
    fp = who.fingerprint
    observed = Signals(
        people_sharing_iban=signals.sharing.get(fp, 0) if fp else 0,
        events_from_ip_last_hour=signals.ip.get(p.ip, 0) if p.ip else 0,
        events_from_device_last_hour=signals.device.get(payload.device_fingerprint, 0)
        if payload.device_fingerprint
        else 0,
        iban_rewards_last_day=signals.iban_day.get(fp, 0) if fp else 0,
    )
    verdict = approval_verdict(rule=rule, amount_minor=amount, fraud=fraud_reasons(campaign=campaign, signals=observed))
    fee = fee_for(brand=brand, amount_minor=amount, currency=campaign.currency)

    if tally.available < amount + fee:
        _pause_if_spent(ctx, tally)
        return _reject(item, "budget_exhausted")
    limits = counter_limits(rule, periods.day_key)
    for limit, period, reason in limits:
        key = (rule.pk, period)
        if counters.get(key, 0) + taken[key] >= limit:
            return _reject(item, reason)
    for _, period, _ in limits:
        taken[(rule.pk, period)] += 1

    item.amount, item.fee = amount, fee
    item.review_reasons = verdict.review_reasons
    if verdict.needs_review:
        item.outcome, item.status = EventOutcome.REVIEW, RewardStatus.REVIEW
    else:
        item.outcome = EventOutcome.HELD if rule.hold_days else EventOutcome.REWARDED
        item.status = RewardStatus.HELD
    uses.add(rule_id=rule.pk, root=root, fingerprint=fp, occurred_at=p.occurred_at, amount=amount)
    not_new.add(root)
    if fp:
        signals.iban_day[fp] = signals.iban_day.get(fp, 0) + 1
    spent_before = tally.funded - tally.available
    tally.available -= amount + fee
    _budget_alerts(ctx, tally, spent_before=spent_before)
    _pause_if_spent(ctx, tally)
    return None


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
