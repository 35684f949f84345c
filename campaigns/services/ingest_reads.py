"""What ingestion reads: the campaign an event is for (``campaign_context``), and everything the
rules need to know about a batch (``Known``): the database's answer, read once per batch, plus
what the batch's own events took before each one.

Adding a rule that needs a new fact about the database: read it in ``Known.reads`` (or
``Known.locked_reads`` when only the campaign's lock makes it exact), hand it to the evaluation
in ``Known.facts``, count an accepted event's share in ``Known.took`` — and check it in
``campaigns.evaluation``. Nothing else changes.
"""

import ipaddress
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from django.db import connection
from django.db.models import Count, Q

from campaigns.evaluation import Decision, Facts, Periods, Signals, Usage, campaign_cap_limits, fee_for, periods_for
from campaigns.locks import tally_lock_parse, tally_lock_statement
from campaigns.models import BrandPlan, BrandUsage, Campaign, Plan, Reward, RewardRule, RuleCounter, TriggerEvent
from campaigns.models.events import LIVE_STATUSES
from campaigns.models.plans import usage_month
from campaigns.services.ingest_types import CampaignContext, Item
from core.bulk import Read, joined_models
from core.exceptions import NotFound
from recipients.selectors import people_sharing_iban_counts, people_sharing_iban_statement
from reconciliation.models import Account


def campaign_context(brand, slug: str) -> CampaignContext:
    """The brand's campaign ``slug`` with its brand, budget account and active rules, its brand's
    current plan (fees and monthly allowances; joined in the same query), and the smallest
    reservation any rule makes (what an automatic pause compares the budget with).
    Raises NotFound."""
    rows = joined_models(
        _CONTEXT,
        f"FROM {Campaign._meta.db_table} c JOIN {Account._meta.db_table} a ON a.id = c.budget_account_id "  # noqa: S608
        f"LEFT JOIN {RewardRule._meta.db_table} r ON r.campaign_id = c.id AND r.is_active "
        f"LEFT JOIN {BrandPlan._meta.db_table} bp ON bp.brand_id = c.brand_id AND bp.ended_at IS NULL "
        f"LEFT JOIN {Plan._meta.db_table} p ON p.id = bp.plan_id "
        "WHERE c.brand_id = %s AND c.slug = %s ORDER BY r.id",
        [brand.pk, slug],
    )
    if not rows:
        raise NotFound(f"No campaign {slug!r} for this brand.", code="campaign_not_found")
    campaign, account, _, plan = rows[0]
    campaign.brand, campaign.budget_account = brand, account  # the caller's brand, which the filter matched
    rules = [rule for _, _, rule, _ in rows if rule is not None]
    for rule in rules:
        rule.campaign = campaign
    smallest = min(
        (
            r.smallest_reward_minor
            + fee_for(plan=plan, amount_minor=r.smallest_reward_minor, currency=campaign.currency)
            for r in rules
        ),
        default=None,
    )
    return CampaignContext(campaign=campaign, rules=rules, smallest_reservation=smallest, plan=plan)


_CONTEXT = ((Campaign, "c"), (Account, "a"), (RewardRule, "r"), (Plan, "p"))


@dataclass
class Tally:
    """A campaign's allocated money, status and available budget, read under its lock."""

    funded: int
    status: str
    available: int


class Uses:
    """Live rewards per (rule, person cluster) and (rule, IBAN), for the caps."""

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


def ip_key(ip: str) -> str:
    """An address as the database compares it (``::FFFF:A`` and ``::ffff:a`` are one address): the
    velocity counts are keyed by it, from the rows and from the batch's own events alike."""
    try:
        return str(ipaddress.ip_address(ip.strip()))
    except ValueError:
        return ip


@dataclass
class Known:
    """What the rules read about a batch of events (in the caller's transaction, under the lock
    order of ``campaigns.locks``): first ``reads`` (after the people's and IBANs' locks), then
    ``locked_reads`` (the campaigns' tallies and counters, locked). ``facts`` hands one event
    what the database said plus what the batch's events before it did (``seen``) and took
    (``took``), so a batch decides exactly what one event after another would."""

    brand: object
    items: list[Item]
    now: datetime
    uses: Uses = field(default_factory=Uses)
    not_new: set[int] = field(default_factory=set)  # roots with a live reward from the brand
    ip: dict[str, int] = field(default_factory=dict)  # events per IP in the last hour
    device: dict[str, int] = field(default_factory=dict)  # events per device in the last hour
    iban_day: dict[str, int] = field(default_factory=dict)  # rewards per IBAN in the last day
    sharing: dict[str, int] = field(default_factory=dict)  # people paid into each IBAN (with proof)
    tallies: dict[int, Tally] = field(default_factory=dict)
    counters: dict[tuple[int, str], int] = field(default_factory=dict)  # (rule, period) → rewards
    taken: dict[tuple[int, str], int] = field(default_factory=lambda: defaultdict(int))  # … of this batch
    # The brand's usage this month (``BrandUsage``), read only when its plan has an allowance,
    # and what the batch's accepted events added to it.
    month_used: tuple[int, int] = (0, 0)
    month_taken: list[int] = field(default_factory=lambda: [0, 0])

    @property
    def plan(self):
        return self.items[0].ctx.plan if self.items else None

    def reads(self) -> list[Read]:
        return [*self._uses_reads(), *self._not_new_reads(), *self._signals_reads()]

    def locked_reads(self) -> list[Read]:
        """The tallies (ascending) and then the counters they guard, locked (the documented
        order), so a concurrent void's decrement waits rather than being lost."""
        reads: list[Read] = [
            (tally_lock_statement(campaign_id=cid), partial(self._tally_parse, cid))
            for cid in sorted({i.ctx.campaign.pk for i in self.items})
        ]
        keys = {
            (item.rule.pk, period)
            for item in self.items
            for _, period, _ in campaign_cap_limits(
                item.rule, periods_for(item.p.occurred_at, item.ctx.campaign.tz).day_key
            )
        }
        if keys:
            query = RuleCounter.objects.filter(
                rule_id__in={rule_id for rule_id, _ in keys}, period__in={period for _, period in keys}
            ).values_list("rule_id", "period", "rewards_count")
            if connection.vendor == "postgresql":
                query = query.select_for_update()
            reads.append((query, lambda rows: self.counters.update(((r, p), n) for r, p, n in rows)))
        plan = self.plan
        if plan is not None and (plan.monthly_actions is not None or plan.monthly_payouts_minor is not None):
            # Locked last (``campaigns.locks``): two campaigns of the brand take turns here, so the
            # allowance is exact; a plan without one reads nothing and waits for nobody.
            query = BrandUsage.objects.filter(brand=self.brand, month=usage_month(self.now)).values_list(
                "actions", "rewards_minor"
            )
            if connection.vendor == "postgresql":
                query = query.select_for_update()
            reads.append((query, self._month_parse))
        return reads

    def _month_parse(self, rows: list[tuple]) -> None:
        self.month_used = rows[0] if rows else (0, 0)

    def facts(self, item: Item) -> Facts:
        p, rule, who, campaign, plan = item.p, item.rule, item.who, item.ctx.campaign, item.ctx.plan
        payload, fp, root = p.payload, who.fingerprint, who.person.pk
        periods = periods_for(p.occurred_at, campaign.tz)
        tally = self.tallies[campaign.pk]
        return Facts(
            trigger=payload.type,
            source=payload.source,
            occurred_at=p.occurred_at,
            purchase_amount_minor=payload.purchase_amount_minor,
            purchase_currency=payload.purchase_currency.upper(),
            view_count=payload.view_count,
            code=payload.code,
            evidence_text=json.dumps(payload.evidence, default=str) if rule.required_code else "",
            iban_fingerprint=fp,
            iban_country=who.country,
            person_is_new_to_brand=root not in self.not_new,
            usage=self.uses.usage(rule_id=rule.pk, root=root, fingerprint=fp, periods=periods),
            signals=Signals(
                people_sharing_iban=self.sharing.get(fp, 0) if fp else 0,
                events_from_ip_last_hour=self.ip.get(p.ip, 0) if p.ip else 0,
                events_from_device_last_hour=self.device.get(payload.device_fingerprint, 0)
                if payload.device_fingerprint
                else 0,
                iban_rewards_last_day=self.iban_day.get(fp, 0) if fp else 0,
                email_mixed_script=p.email_mixed_script,
            ),
            campaign_status=tally.status,
            budget_available_minor=tally.available,
            campaign_counts={
                period: self.counters.get((rule.pk, period), 0) + self.taken[(rule.pk, period)]
                for _, period, _ in campaign_cap_limits(rule, periods.day_key)
            },
            plan_actions_left=None
            if plan is None or plan.monthly_actions is None
            else plan.monthly_actions - self.month_used[0] - self.month_taken[0],
            plan_payouts_left_minor=None
            if plan is None or plan.monthly_payouts_minor is None
            else plan.monthly_payouts_minor - self.month_used[1] - self.month_taken[1],
        )

    def seen(self, item: Item) -> None:
        """Every event of the batch counts for the velocity signals, rewarded or not."""
        if item.p.ip:
            self.ip[item.p.ip] = self.ip.get(item.p.ip, 0) + 1
        device = item.p.payload.device_fingerprint
        if device:
            self.device[device] = self.device.get(device, 0) + 1

    def took(self, item: Item, decision: Decision) -> None:
        """What an accepted event takes, for the events after it."""
        rule, root, fp = item.rule, item.who.person.pk, item.who.fingerprint
        periods = periods_for(item.p.occurred_at, item.ctx.campaign.tz)
        for _, period, _ in campaign_cap_limits(rule, periods.day_key):
            self.taken[(rule.pk, period)] += 1
        self.uses.add(
            rule_id=rule.pk, root=root, fingerprint=fp, occurred_at=item.p.occurred_at, amount=decision.amount_minor
        )
        self.not_new.add(root)
        if fp:
            self.iban_day[fp] = self.iban_day.get(fp, 0) + 1
        self.tallies[item.ctx.campaign.pk].available -= decision.amount_minor + decision.fee_minor
        self.month_taken[0] += 1
        self.month_taken[1] += decision.amount_minor

    def _tally_parse(self, campaign_id: int, rows: list[tuple]) -> None:
        t = tally_lock_parse(rows)
        self.tallies[campaign_id] = Tally(t.funded_minor, t.status, t.budget_available_minor)

    def _uses_reads(self) -> list[Read]:
        """Live rewards of the batch's capped rules for its people and IBANs."""
        capped = [i for i in self.items if i.rule.has_person_caps or (i.rule.has_iban_caps and i.who.fingerprint)]
        if not capped:
            return []
        root_of = {m: i.who.person.pk for i in capped for m in i.who.cluster}
        fingerprints = {i.who.fingerprint for i in capped if i.who.fingerprint}
        query = Reward.objects.filter(
            Q(person_id__in=sorted(root_of)) | Q(iban_fingerprint__in=sorted(fingerprints)),
            rule_id__in=sorted({i.rule.pk for i in capped}),
            status__in=LIVE_STATUSES,
        ).values_list("rule_id", "person_id", "iban_fingerprint", "occurred_at", "amount_minor")

        def parse(rows: list[tuple]) -> None:
            for rule_id, person_id, fingerprint, occurred_at, amount in rows:
                self.uses.add(
                    rule_id=rule_id,
                    root=root_of.get(person_id),
                    fingerprint=fingerprint if fingerprint in fingerprints else "",
                    occurred_at=occurred_at,
                    amount=amount,
                )

        return [(query, parse)]

    def _not_new_reads(self) -> list[Read]:
        """Roots (among those of "new people only" rules) with a live reward from this brand."""
        asking = [i for i in self.items if i.rule.new_people_only]
        if not asking:
            return []
        root_of = {m: i.who.person.pk for i in asking for m in i.who.cluster}
        query = (
            Reward.objects.filter(campaign__brand=self.brand, person_id__in=sorted(root_of), status__in=LIVE_STATUSES)
            .values_list("person_id")
            .distinct()
        )
        return [(query, lambda rows: self.not_new.update(root_of[person_id] for (person_id,) in rows))]

    def _signals_reads(self) -> list[Read]:
        """The velocity counts for every IP, device and IBAN of the batch whose campaign has that
        threshold on: one grouped query each.

        Another brand's data decides nothing here unless it is proven (DESIGN §5): the velocity
        counts are the brand's own events and rewards (another brand's events only say what
        that brand asserted about an IP, a device or an IBAN), and the people sharing an IBAN
        count another brand's holders only with proof that they are paid there
        (``recipients.selectors.people_sharing_iban_counts``)."""
        items, hour_ago = self.items, self.now - timedelta(hours=1)
        ips = {i.p.ip for i in items if i.p.ip and i.ctx.campaign.fraud_max_events_per_ip_hour is not None}
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
            {
                i.who.fingerprint
                for i in items
                if i.who.fingerprint and i.ctx.campaign.fraud_max_people_per_iban is not None
            }
        )
        reads: list[Read] = []
        if ips:
            query = TriggerEvent.objects.filter(brand=self.brand, ip__in=sorted(ips), received_at__gte=hour_ago)
            query = _counted(query, "ip")
            # str(): the address as the event stored it, whatever type the driver hands back.
            reads.append((query, lambda rows: self.ip.update((ip_key(str(ip)), n) for ip, n in rows)))
        if devices:
            query = TriggerEvent.objects.filter(
                brand=self.brand, device_fingerprint__in=sorted(devices), received_at__gte=hour_ago
            )
            reads.append((_counted(query, "device_fingerprint"), self.device.update))
        if day_fps:
            query = Reward.objects.filter(
                campaign__brand=self.brand,
                iban_fingerprint__in=sorted(day_fps),
                created_at__gte=self.now - timedelta(days=1),
                status__in=LIVE_STATUSES,
            )
            reads.append((_counted(query, "iban_fingerprint"), self.iban_day.update))
        if sharing_fps:
            statement = people_sharing_iban_statement(brand_id=self.brand.pk, fingerprints=sharing_fps)
            if statement is None:  # no one-statement form on this database
                self.sharing = people_sharing_iban_counts(brand_id=self.brand.pk, fingerprints=sharing_fps)
            else:
                self.sharing = dict.fromkeys(sharing_fps, 0)
                reads.append((statement, lambda rows: self.sharing.update((fp, int(n)) for fp, n in rows)))
        return reads


def _counted(query, column: str):
    """(value, rows) of ``column`` over ``query``: a velocity count."""
    return query.order_by().values(column).annotate(n=Count("*")).values_list(column, "n")
