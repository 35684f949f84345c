"""What ``ingest_batch`` reads before deciding: the facts the rules need (earlier rewards under
the caps, "new to the brand", velocity signals) and, under the tally lock, the tallies and the
campaign-wide counters — each a ``core.bulk.Read``, sent together in one round trip."""

import ipaddress
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection

from campaigns.evaluation import Periods, Usage, periods_for
from campaigns.locks import tally_lock_parse
from campaigns.models import Campaign, Reward, RewardRule, RuleCounter, TriggerEvent
from campaigns.models.events import LIVE_STATUSES
from campaigns.services.ingest_types import Item
from core.bulk import Read, any_of, as_datetime
from recipients.selectors import people_sharing_iban_counts, people_sharing_iban_statement


@dataclass
class Tally:
    funded: int
    status: str
    available: int


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


def tally_parse(tallies: dict, campaign_id: int, rows: list[tuple]) -> None:
    t = tally_lock_parse(rows)
    tallies[campaign_id] = Tally(t.funded_minor, t.status, t.budget_available_minor)


def uses_reads(items: list[Item], uses: Uses) -> list[Read]:
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


def not_new_reads(brand, items: list[Item], not_new: set[int]) -> list[Read]:
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


def ip_key(ip: str) -> str:
    """An address as the database compares it (``::FFFF:A`` and ``::ffff:a`` are one address): the
    velocity counts are keyed by it, from the rows and from the batch's own events alike."""
    try:
        return str(ipaddress.ip_address(ip.strip()))
    except ValueError:
        return ip


def signals_reads(items: list[Item], signals: SignalCounts, *, now: datetime) -> list[Read]:
    """The velocity counts for every IP, device and IBAN of the batch whose campaign has that
    threshold on: one grouped query each."""
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
        reads.append((query, lambda rows: signals.ip.update((ip_key(str(ip)), n) for ip, n in rows)))
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


def counter_limits(rule: RewardRule, day_key: str) -> list[tuple[int, str, str]]:
    return [
        (limit, period, reason)
        for limit, period, reason in (
            (rule.campaign_count, "all", "cap_campaign_count"),
            (rule.campaign_count_per_day, day_key, "cap_campaign_day_count"),
        )
        if limit is not None
    ]


def counters_reads(items: list[Item], counters: dict[tuple[int, str], int]) -> list[Read]:
    """The campaign-wide counters the batch may take, locked (after the tallies: the documented
    order), so a concurrent void's decrement waits rather than being lost."""
    keys = set()
    for item in items:
        periods = periods_for(item.p.occurred_at, item.ctx.campaign.tz)
        keys |= {(item.rule.pk, period) for _, period, _ in counter_limits(item.rule, periods.day_key)}
    if not keys:
        return []
    query = RuleCounter.objects.filter(
        rule_id__in={rule_id for rule_id, _ in keys}, period__in={period for _, period in keys}
    ).values_list("rule_id", "period", "rewards_count")
    if connection.vendor == "postgresql":
        query = query.select_for_update()
    return [(query, lambda rows: counters.update(((rule_id, period), n) for rule_id, period, n in rows))]
