"""What ``ingest_batch`` reads before deciding, one query per fact for the whole batch: earlier
rewards under the caps, "new to the brand", the velocity signals, and — under the tally lock —
the campaign-wide counters. A rule that needs a new fact adds one read here and its use in
``ingest_batch._evaluate``."""

import ipaddress
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Q

from campaigns.evaluation import Periods, Usage, periods_for
from campaigns.models import Reward, RewardRule, RuleCounter, TriggerEvent
from campaigns.models.events import LIVE_STATUSES
from campaigns.services.ingest_types import Item
from recipients.selectors import people_sharing_iban_counts


class Uses:
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
class SignalCounts:
    """Velocity counts from the database plus the batch's own events before each one."""

    ip: dict[str, int] = field(default_factory=dict)
    device: dict[str, int] = field(default_factory=dict)
    iban_day: dict[str, int] = field(default_factory=dict)
    sharing: dict[str, int] = field(default_factory=dict)


def uses_read(items: list[Item]) -> Uses:
    """Live rewards of the batch's capped rules for its people and IBANs."""
    uses = Uses()
    capped = [i for i in items if i.rule.has_person_caps or (i.rule.has_iban_caps and i.who.fingerprint)]
    if not capped:
        return uses
    root_of = {m: i.who.person.pk for i in capped for m in i.who.cluster}
    fingerprints = {i.who.fingerprint for i in capped if i.who.fingerprint}
    rows = Reward.objects.filter(
        Q(person_id__in=root_of) | Q(iban_fingerprint__in=fingerprints),
        rule_id__in={i.rule.pk for i in capped},
        status__in=LIVE_STATUSES,
    ).values_list("rule_id", "person_id", "iban_fingerprint", "occurred_at", "amount_minor")
    for rule_id, person_id, fingerprint, occurred_at, amount in rows:
        uses.add(
            rule_id=rule_id,
            root=root_of.get(person_id),
            fingerprint=fingerprint if fingerprint in fingerprints else "",
            occurred_at=occurred_at,
            amount=amount,
        )
    return uses


def not_new_read(brand, items: list[Item]) -> set[int]:
    """Roots (among those of "new people only" rules) with a live reward from this brand."""
    asking = [i for i in items if i.rule.new_people_only]
    if not asking:
        return set()
    root_of = {m: i.who.person.pk for i in asking for m in i.who.cluster}
    rewarded = Reward.objects.filter(campaign__brand=brand, person_id__in=root_of, status__in=LIVE_STATUSES)
    return {root_of[person_id] for person_id in rewarded.values_list("person_id", flat=True).distinct()}


def ip_key(ip: str) -> str:
    """An address as the database compares it (``::FFFF:A`` and ``::ffff:a`` are one address): the
    velocity counts are keyed by it, from the rows and from the batch's own events alike."""
    try:
        return str(ipaddress.ip_address(ip.strip()))
    except ValueError:
        return ip


def signals_read(items: list[Item], *, now: datetime) -> SignalCounts:
    """The velocity counts for every IP, device and IBAN of the batch whose campaign has that
    threshold on: one grouped query each."""
    signals = SignalCounts()
    hour_ago, day_ago = now - timedelta(hours=1), now - timedelta(days=1)
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
    sharing_fps = {
        i.who.fingerprint for i in items if i.who.fingerprint and i.ctx.campaign.fraud_max_people_per_iban is not None
    }
    if ips:
        rows = _counted(TriggerEvent.objects.filter(ip__in=ips, received_at__gte=hour_ago), "ip")
        # str(): the address as the event stored it, whatever type the driver hands back.
        signals.ip = {ip_key(str(ip)): n for ip, n in rows}
    if devices:
        rows = _counted(
            TriggerEvent.objects.filter(device_fingerprint__in=devices, received_at__gte=hour_ago), "device_fingerprint"
        )
        signals.device = dict(rows)
    if day_fps:
        rows = _counted(
            Reward.objects.filter(iban_fingerprint__in=day_fps, created_at__gte=day_ago, status__in=LIVE_STATUSES),
            "iban_fingerprint",
        )
        signals.iban_day = dict(rows)
    if sharing_fps:
        signals.sharing = people_sharing_iban_counts(fingerprints=sorted(sharing_fps))
    return signals


def _counted(queryset, column: str):
    return queryset.order_by().values_list(column).annotate(n=Count("id"))


def counter_limits(rule: RewardRule, day_key: str) -> list[tuple[int, str, str]]:
    return [
        (limit, period, reason)
        for limit, period, reason in (
            (rule.campaign_count, "all", "cap_campaign_count"),
            (rule.campaign_count_per_day, day_key, "cap_campaign_day_count"),
        )
        if limit is not None
    ]


def counters_lock(items: list[Item]) -> dict[tuple[int, str], int]:
    """The campaign-wide counters the batch may take, locked (after the tallies: the documented
    order), so a concurrent void's decrement waits rather than being lost."""
    keys = set()
    for item in items:
        periods = periods_for(item.p.occurred_at, item.ctx.campaign.tz)
        keys |= {(item.rule.pk, period) for _, period, _ in counter_limits(item.rule, periods.day_key)}
    if not keys:
        return {}
    rows = (
        RuleCounter.objects.select_for_update()
        .filter(rule_id__in={rule_id for rule_id, _ in keys}, period__in={period for _, period in keys})
        .order_by("rule_id", "period")
        .values_list("rule_id", "period", "rewards_count")
    )
    return {(rule_id, period): n for rule_id, period, n in rows}
