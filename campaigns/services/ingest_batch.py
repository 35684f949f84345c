"""The core of ingestion, set-wise: a batch of prepared events evaluated in order and written
with a constant number of statements, whatever its size (``event_ingest`` runs a batch of one,
``event_ingest_bulk`` chunks of up to ``BULK_CHUNK``).

Per batch, in the lock order of ``campaigns.locks``:

1. people: ``recipients.people_resolve_bulk`` finds or creates everyone and locks their roots;
2. IBANs: one advisory-lock statement, fingerprints ascending;
3. what the rules need, one query each: earlier rewards of these people and IBANs under the
   rules' caps, "new to the brand", and the velocity signals (events per IP / device, rewards
   per IBAN, people per IBAN);
4. the campaigns' tallies and budget accounts (``FOR UPDATE``, ascending), then the rules'
   campaign-wide counters (``FOR UPDATE``);
5. evaluation in Python, event by event in order: each sees what the events before it in the
   batch took (caps, counters, budget, signals), exactly as if they had been ingested one by one;
6. writes, one statement per table: events, holds (``ledger_holds_create_bulk``), rewards and
   their audit rows, counter deltas.

Everything joins the caller's transaction (``atomic(durable=True)``). When another transaction
stored one of these events first, the event INSERT fails on ``(brand, external_id)`` with an
IntegrityError: the caller rolls the whole batch back and runs it again without that event (it
is then a replay), so nothing the loser evaluated is kept.
"""

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from django.db import connection
from django.db.models.signals import post_save

from campaigns.evaluation import (
    Facts,
    Periods,
    Signals,
    Usage,
    approval_verdict,
    cap_failure,
    condition_failure,
    fee_for,
    fraud_reasons,
    periods_for,
    reward_amount,
)
from campaigns.locks import lock_ibans_statement, tally_lock_parse, tally_lock_statement
from campaigns.models import (
    BudgetAlert,
    Campaign,
    CampaignEvent,
    CampaignStatus,
    EventOutcome,
    Reward,
    RewardEvent,
    RewardRule,
    RewardStatus,
    RuleCounter,
    TriggerEvent,
)
from campaigns.models.events import LIVE_STATUSES
from campaigns.services.campaigns import _transition
from campaigns.services.ingest_steps import CampaignContext
from campaigns.services.ingest_types import PreparedEvent
from core.bulk import (
    COPY_FROM,
    Read,
    any_of,
    as_datetime,
    ids_reserve,
    insert_statement,
    queries_run,
    rows_copy,
    rows_insert,
    statements_run,
)
from core.exceptions import ApplicationError
from recipients.models import BankAccount, Person
from recipients.selectors import people_sharing_iban_counts, people_sharing_iban_statement
from recipients.services import IdentityInput
from recipients.services_bulk import Resolved, people_resolve_bulk
from reconciliation.models import Hold
from reconciliation.services import HoldSpec, ledger_holds_create_bulk, ledger_holds_statement


@dataclass
class Item:
    """One event of the batch and what its evaluation decided."""

    p: PreparedEvent
    ctx: CampaignContext
    rule: RewardRule | None = None
    early: str = ""
    who: Resolved | None = None
    error: ApplicationError | None = None
    outcome: str = ""
    reason: str = ""
    review_reasons: list[str] = field(default_factory=list)
    amount: int = 0
    fee: int = 0
    status: str = ""
    event: TriggerEvent | None = None
    reward: Reward | None = None


@dataclass
class _Tally:
    funded: int
    status: str
    available: int


class _Uses:
    """Live rewards per (rule, person cluster) and (rule, IBAN): from the database, then each
    reward this batch reserves, so an event's caps count the events before it."""

    def __init__(self):
        self.by_root: dict[tuple[int, int], list[tuple[datetime, int]]] = defaultdict(list)
        self.by_iban: dict[tuple[int, str], list[datetime]] = defaultdict(list)

    def add(self, *, rule_id: int, root: int | None, fingerprint: str, occurred_at: datetime, amount: int) -> None:
        if root is not None:
            self.by_root[(rule_id, root)].append((occurred_at, amount))
        if fingerprint:
            self.by_iban[(rule_id, fingerprint)].append(occurred_at)

    def usage(self, *, rule_id: int, root: int, fingerprint: str, periods: Periods) -> Usage:
        day = (periods.day_start, periods.day_end)
        week = (periods.week_start, periods.week_end)
        person = self.by_root.get((rule_id, root), ())
        in_day = [a for t, a in person if day[0] <= t < day[1]]
        in_week = [a for t, a in person if week[0] <= t < week[1]]
        iban = self.by_iban.get((rule_id, fingerprint), ()) if fingerprint else ()
        return Usage(
            person_day_count=len(in_day),
            person_week_count=len(in_week),
            person_campaign_count=len(person),
            person_day_amount=sum(in_day),
            person_week_amount=sum(in_week),
            person_campaign_amount=sum(a for _, a in person),
            iban_day_count=sum(1 for t in iban if day[0] <= t < day[1]),
            iban_campaign_count=len(iban),
        )


@dataclass
class _Signals:
    """Velocity counts from the database plus the batch's own events before each one."""

    ip: dict[str, int] = field(default_factory=dict)
    device: dict[str, int] = field(default_factory=dict)
    iban_day: dict[str, int] = field(default_factory=dict)
    sharing: dict[str, int] = field(default_factory=dict)


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
    _people(items, simple_only=len(items) > 1, keys=(keys[0], keys[1]) if keys else None)
    live = [i for i in items if i.error is None]
    todo = [i for i in live if not i.early]
    # The IBAN locks, then every fact the rules need: one round trip on PostgreSQL.
    uses, not_new, signals = _Uses(), set(), _Signals()
    queries_run(
        [
            (lock_ibans_statement(fingerprints=[i.who.fingerprint for i in todo]), None),
            *_uses_reads(todo, uses),
            *_not_new_reads(brand, todo, not_new),
            *_signals_reads(todo, signals, now=now),
        ]
    )
    # The tallies (ascending), then the counters they guard: one round trip on PostgreSQL.
    tallies: dict[int, _Tally] = {}
    counters: dict[tuple[int, str], int] = {}
    queries_run(
        [
            *(
                (tally_lock_statement(campaign_id=cid), partial(_tally_parse, tallies, cid))
                for cid in sorted({i.ctx.campaign.pk for i in todo})
            ),
            *_counters_reads(todo, counters),
        ]
    )
    taken: dict[tuple[int, str], int] = defaultdict(int)
    for item in live:
        _evaluate(brand, item, uses, not_new, signals, tallies, counters, taken, now=now)
        payload = item.p.payload
        if payload.ip:
            signals.ip[payload.ip] = signals.ip.get(payload.ip, 0) + 1
        if payload.device_fingerprint:
            signals.device[payload.device_fingerprint] = signals.device.get(payload.device_fingerprint, 0) + 1
    if keys is None:
        _write(brand, live, taken, now=now)
    else:
        _write_together(brand, live, taken, keys[2:], now=now)


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


def _people(items: list[Item], *, simple_only: bool, keys) -> None:
    todo = [i for i in items if not i.early]
    resolved = people_resolve_bulk(
        identities=[
            IdentityInput(
                name=i.p.payload.name,
                email=i.p.payload.email,
                whatsapp=i.p.payload.whatsapp,
                iban=i.p.payload.iban,
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


def _tally_parse(tallies: dict, campaign_id: int, rows: list[tuple]) -> None:
    t = tally_lock_parse(rows)
    tallies[campaign_id] = _Tally(t.funded_minor, t.status, t.budget_available_minor)


def _uses_reads(items: list[Item], uses: _Uses) -> list[Read]:
    """Live rewards of the batch's capped rules for its people and IBANs, one query."""
    capped = [i for i in items if i.rule.has_person_caps or (i.rule.has_iban_caps and i.who.fingerprint)]
    if not capped:
        return []
    root_of = {m: i.who.person.pk for i in capped for m in i.who.cluster}
    fingerprints = {i.who.fingerprint for i in capped if i.who.fingerprint}

    def parse(rows: list[tuple]) -> None:
        for rule_id, person_id, fingerprint, occurred_at, amount in rows:
            uses.add(
                rule_id=rule_id,
                root=root_of.get(person_id),
                fingerprint=fingerprint if fingerprint in fingerprints else "",
                occurred_at=as_datetime(occurred_at),
                amount=amount,
            )

    rule_in, rule_params = any_of("rule_id", sorted({i.rule.pk for i in capped}))
    status_in, status_params = any_of("status", [str(v) for v in LIVE_STATUSES])
    person_in, person_params = any_of("person_id", sorted(root_of))
    iban_in, iban_params = any_of("iban_fingerprint", sorted(fingerprints))
    query = (
        "SELECT rule_id, person_id, iban_fingerprint, occurred_at, amount_minor "  # noqa: S608 - placeholders only
        f"FROM {Reward._meta.db_table} WHERE {rule_in} AND {status_in} AND ({person_in} OR {iban_in})",
        [*rule_params, *status_params, *person_params, *iban_params],
    )
    return [(query, parse)]


def _not_new_reads(brand, items: list[Item], not_new: set[int]) -> list[Read]:
    """Roots (among those of "new people only" rules) with a live reward from this brand."""
    asking = [i for i in items if i.rule.new_people_only]
    if not asking:
        return []
    root_of = {m: i.who.person.pk for i in asking for m in i.who.cluster}
    person_in, person_params = any_of("r.person_id", sorted(root_of))
    status_in, status_params = any_of("r.status", [str(v) for v in LIVE_STATUSES])
    query = (
        f"SELECT DISTINCT r.person_id FROM {Reward._meta.db_table} r "  # noqa: S608 - placeholders only
        f"JOIN {Campaign._meta.db_table} c ON c.id = r.campaign_id "
        f"WHERE c.brand_id = %s AND {person_in} AND {status_in}",
        [brand.pk, *person_params, *status_params],
    )
    return [(query, lambda rows: not_new.update(root_of[person_id] for (person_id,) in rows))]


def _signals_reads(items: list[Item], signals: _Signals, *, now: datetime) -> list[Read]:
    """The velocity counts for every IP, device and IBAN of the batch whose campaign has that
    threshold on: one grouped query each."""
    hour_ago, day_ago = now - timedelta(hours=1), now - timedelta(days=1)
    ips = {i.p.payload.ip for i in items if i.p.payload.ip and i.ctx.campaign.fraud_max_events_per_ip_hour is not None}
    devices = {
        i.p.payload.device_fingerprint
        for i in items
        if i.p.payload.device_fingerprint and i.ctx.campaign.fraud_max_events_per_device_hour is not None
    }
    day_fps = {
        i.who.fingerprint
        for i in items
        if i.who.fingerprint and i.ctx.campaign.fraud_max_iban_claims_per_day is not None
    }
    sharing_fps = sorted(
        {i.who.fingerprint for i in items if i.who.fingerprint and i.ctx.campaign.fraud_max_people_per_iban is not None}
    )
    events, rewards = TriggerEvent._meta.db_table, Reward._meta.db_table
    reads: list[Read] = []
    if ips:
        ip_in, ip_params = any_of("ip", sorted(ips))
        if connection.vendor == "postgresql":
            ip_in = "ip = ANY(%s::inet[])"
        query = (
            f"SELECT ip, count(*) FROM {events} WHERE {ip_in} AND received_at >= %s GROUP BY ip",
            [*ip_params, hour_ago],
        )  # noqa: S608
        # str(): the address as the event stored it, whatever type the driver hands back.
        reads.append((query, lambda rows: signals.ip.update((str(ip), n) for ip, n in rows)))
    if devices:
        device_in, device_params = any_of("device_fingerprint", sorted(devices))
        query = (
            f"SELECT device_fingerprint, count(*) FROM {events} WHERE {device_in} AND received_at >= %s "  # noqa: S608
            "GROUP BY device_fingerprint",
            [*device_params, hour_ago],
        )
        reads.append((query, signals.device.update))
    if day_fps:
        iban_in, iban_params = any_of("iban_fingerprint", sorted(day_fps))
        status_in, status_params = any_of("status", [str(v) for v in LIVE_STATUSES])
        query = (
            f"SELECT iban_fingerprint, count(*) FROM {rewards} WHERE {iban_in} AND created_at >= %s "  # noqa: S608
            f"AND {status_in} GROUP BY iban_fingerprint",
            [*iban_params, day_ago, *status_params],
        )
        reads.append((query, signals.iban_day.update))
    if sharing_fps:
        statement = people_sharing_iban_statement(fingerprints=sharing_fps)
        if statement is None:  # no one-statement form on this database
            signals.sharing = people_sharing_iban_counts(fingerprints=sharing_fps)
        else:
            signals.sharing = dict.fromkeys(sharing_fps, 0)
            reads.append((statement, lambda rows: signals.sharing.update((fp, int(n)) for fp, n in rows)))
    return reads


def _counter_limits(rule: RewardRule, day_key: str) -> list[tuple[int, str, str]]:
    return [
        (limit, period, reason)
        for limit, period, reason in (
            (rule.campaign_count, "all", "cap_campaign_count"),
            (rule.campaign_count_per_day, day_key, "cap_campaign_day_count"),
        )
        if limit is not None
    ]


def _counters_reads(items: list[Item], counters: dict[tuple[int, str], int]) -> list[Read]:
    """The campaign-wide counters the batch may take, locked (after the tallies: the documented
    order), so a concurrent void's decrement waits rather than being lost."""
    keys = set()
    for item in items:
        periods = periods_for(item.p.occurred_at, item.ctx.campaign.tz)
        keys |= {(item.rule.pk, period) for _, period, _ in _counter_limits(item.rule, periods.day_key)}
    if not keys:
        return []
    query = RuleCounter.objects.filter(
        rule_id__in={rule_id for rule_id, _ in keys}, period__in={period for _, period in keys}
    ).values_list("rule_id", "period", "rewards_count")
    if connection.vendor == "postgresql":
        query = query.select_for_update()
    return [(query, lambda rows: counters.update(((rule_id, period), n) for rule_id, period, n in rows))]


def _reject(item: Item, reason: str) -> None:
    item.outcome, item.reason = EventOutcome.REJECTED, reason


def _evaluate(brand, item, uses: _Uses, not_new, signals: _Signals, tallies, counters, taken, *, now) -> None:
    """Decide one event, in the order ``event_ingest`` has always checked: conditions, amount,
    caps, fraud, then (under the tally) status, budget and campaign-wide counters."""
    if item.early:
        return _reject(item, item.early)
    p, rule, who, ctx = item.p, item.rule, item.who, item.ctx
    campaign, payload = ctx.campaign, p.payload
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
        events_from_ip_last_hour=signals.ip.get(payload.ip, 0) if payload.ip else 0,
        events_from_device_last_hour=signals.device.get(payload.device_fingerprint, 0)
        if payload.device_fingerprint
        else 0,
        iban_rewards_last_day=signals.iban_day.get(fp, 0) if fp else 0,
    )
    verdict = approval_verdict(rule=rule, amount_minor=amount, fraud=fraud_reasons(campaign=campaign, signals=observed))
    fee = fee_for(brand=brand, amount_minor=amount, currency=campaign.currency)

    tally = tallies[campaign.pk]
    campaign.status = tally.status
    if tally.status != CampaignStatus.ACTIVE:
        return _reject(item, "campaign_not_active")
    if tally.available < amount + fee:
        _pause_if_spent(ctx, tally)
        return _reject(item, "budget_exhausted")
    limits = _counter_limits(rule, periods.day_key)
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


def _budget_alerts(ctx, tally: _Tally, *, spent_before: int) -> None:
    """Record each 50/80/100 % threshold this reservation crossed, once (the tally lock makes
    ``available`` exact)."""
    if tally.funded <= 0:
        return
    spent_after = tally.funded - tally.available
    for pct in BudgetAlert.THRESHOLDS:
        if spent_before * 100 < pct * tally.funded <= spent_after * 100:
            BudgetAlert.objects.create(
                campaign=ctx.campaign, threshold_pct=pct, funded_minor=tally.funded, spent_minor=spent_after
            )
            CampaignEvent.objects.create(
                campaign=ctx.campaign,
                kind="campaign.budget_threshold",
                to_status=ctx.campaign.status,
                data={"threshold_pct": pct, "funded_minor": tally.funded, "spent_minor": spent_after},
            )


def _pause_if_spent(ctx, tally: _Tally) -> None:
    """Pause the campaign when what is left cannot pay the smallest reward any active rule can
    give (a large percentage reward that does not fit is refused without pausing: smaller ones
    still can)."""
    if tally.status != CampaignStatus.ACTIVE:
        return
    if ctx.smallest_reservation is None or tally.available >= ctx.smallest_reservation:
        return
    _transition(
        campaign=ctx.campaign,
        from_statuses=(CampaignStatus.ACTIVE,),
        to=CampaignStatus.PAUSED,
        kind="campaign.paused",
        reason="budget_exhausted",
        data={"available_minor": tally.available, "automatic": True},
    )
    tally.status = CampaignStatus.PAUSED


def _write(brand, items: list[Item], taken: dict[tuple[int, str], int], *, now: datetime) -> None:
    """One INSERT (COPY) per table for the whole batch."""
    for item, event in zip(items, rows_insert(TriggerEvent, [_event_row(brand, i, now) for i in items]), strict=True):
        item.event = event
    rewarded = [i for i in items if i.status]
    for group in _by_campaign(rewarded):
        campaign = group[0].ctx.campaign
        holds = ledger_holds_create_bulk(
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


def _write_together(brand, items: list[Item], taken, keys: list[list[int]], *, now: datetime) -> None:
    """The same rows as ``_write``, sent as one multi-statement round trip (keys reserved)."""
    event_ids, hold_ids, reward_ids = (iter(k) for k in keys)
    events = [_event_row(brand, item, now) for item in items]
    for item, event in zip(items, events, strict=True):
        event.pk = next(event_ids)
        item.event = event
    statements = [insert_statement(TriggerEvent, events)]
    rewarded = [i for i in items if i.status]
    for group in _by_campaign(rewarded):
        campaign = group[0].ctx.campaign
        statement, holds = ledger_holds_statement(
            account=campaign.budget_account,
            currency=campaign.currency,
            holds=[_hold_spec(brand, i) for i in group],
            ids=[next(hold_ids) for _ in group],
        )
        statements.append(statement)
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
    # No save() ran, so no post_save was sent; payouts and webhooks listen for new rewards.
    for item in rewarded:
        post_save.send(
            sender=Reward, instance=item.reward, created=True, update_fields=None, raw=False, using="default"
        )


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
        ip=payload.ip or None,
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
