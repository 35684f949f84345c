"""The database steps of one ingestion, each a query or two: the campaign and its rules, who the
person is, what they have already earned (caps), the velocity signals, and the campaign-wide
counters. ``campaigns.services.ingest`` calls them in the lock order of ``campaigns.locks``."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import F

from campaigns.evaluation import Signals, Usage, fee_for
from campaigns.models import Campaign, Reward, RewardRule, RuleCounter, Trigger, TriggerEvent
from campaigns.models.events import LIVE_STATUSES
from campaigns.services.ingest_types import EventInput
from core.exceptions import NotFound
from recipients.models import Person
from recipients.selectors import people_sharing_iban_count, person_cluster_ids, person_current_bank_account
from recipients.services import IdentityInput, person_resolve


@dataclass
class CampaignContext:
    campaign: Campaign
    rules: list[RewardRule]
    smallest_reservation: int | None

    def rule_for(self, payload: EventInput) -> RewardRule | None:
        custom = payload.custom_name if payload.type == Trigger.CUSTOM else ""
        return next((r for r in self.rules if r.trigger == payload.type and r.custom_name == custom), None)


def campaign_context(brand, slug: str) -> CampaignContext:
    """The campaign and its active rules: one query (rules joined to their campaign) unless the
    campaign has no active rule."""
    rules = list(
        RewardRule.objects.filter(campaign__brand=brand, campaign__slug=slug, is_active=True)
        .select_related("campaign__brand", "campaign__budget_account")
        .order_by("id")
    )
    if rules:
        campaign = rules[0].campaign
        for rule in rules:
            rule.campaign = campaign
    else:
        campaign = Campaign.objects.select_related("brand", "budget_account").filter(brand=brand, slug=slug).first()
        if campaign is None:
            raise NotFound(f"No campaign {slug!r} for this brand.", code="campaign_not_found")
    smallest = min(
        (
            r.smallest_reward_minor
            + fee_for(brand=campaign.brand, amount_minor=r.smallest_reward_minor, currency=campaign.currency)
            for r in rules
        ),
        default=None,
    )
    return CampaignContext(campaign=campaign, rules=rules, smallest_reservation=smallest)


def usage_of(*, rule: RewardRule, cluster: list[int], fingerprint: str, periods) -> Usage:
    """Live rewards of this rule per person cluster and per IBAN, in one aggregate query. Raw SQL:
    the ORM spends more time compiling eight filtered aggregates than the database spends on them
    (the OR is answered by two index scans, reward_rule_person_idx and reward_rule_iban_idx)."""
    if not (rule.has_person_caps or (rule.has_iban_caps and fingerprint)):
        return Usage()
    dt = connection.ops.adapt_datetimefield_value
    people = ", ".join(["%s"] * len(cluster))
    person = f"person_id IN ({people})"
    day = "occurred_at >= %s AND occurred_at < %s"
    week = day
    day_params = [dt(periods.day_start), dt(periods.day_end)]
    week_params = [dt(periods.week_start), dt(periods.week_end)]
    columns, params = [], []
    for what, cond, cond_params in (
        ("1", f"{person} AND {day}", [*cluster, *day_params]),
        ("1", f"{person} AND {week}", [*cluster, *week_params]),
        ("1", person, list(cluster)),
        ("amount_minor", f"{person} AND {day}", [*cluster, *day_params]),
        ("amount_minor", f"{person} AND {week}", [*cluster, *week_params]),
        ("amount_minor", person, list(cluster)),
        ("1", f"iban_fingerprint = %s AND {day}", [fingerprint, *day_params]),
        ("1", "iban_fingerprint = %s", [fingerprint]),
    ):
        columns.append(f"COALESCE(SUM(CASE WHEN {cond} THEN {what} ELSE 0 END), 0)")
        params += cond_params
    live = ", ".join(["%s"] * len(LIVE_STATUSES))
    sql = (
        f"SELECT {', '.join(columns)} FROM {Reward._meta.db_table} "  # noqa: S608 - placeholders only
        f"WHERE rule_id = %s AND status IN ({live}) AND ({person} OR iban_fingerprint = %s)"
    )
    params += [rule.pk, *LIVE_STATUSES, *cluster, fingerprint or "-"]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = [int(v) for v in cursor.fetchone()]
    return Usage(*row)


_SIGNALS_SQL = (
    "SELECT "
    "(SELECT COUNT(*) FROM {event} WHERE %s AND ip = %s AND received_at >= %s), "
    "(SELECT COUNT(*) FROM {event} WHERE %s AND device_fingerprint = %s AND received_at >= %s), "
    "(SELECT COUNT(*) FROM {reward} WHERE %s AND iban_fingerprint = %s AND created_at >= %s AND status IN ({live}))"
).format(
    event=TriggerEvent._meta.db_table,
    reward=Reward._meta.db_table,
    live=", ".join(f"'{s}'" for s in LIVE_STATUSES),
)


def signals_of(*, campaign: Campaign, payload: EventInput, fingerprint: str, now: datetime) -> Signals:
    """The velocity counts in one round trip (each sub-count switched off by a false guard when
    its threshold is off or the identifier is missing, so PostgreSQL skips it), plus the
    people-per-IBAN count from ``recipients``."""
    want_ip = bool(payload.ip) and campaign.fraud_max_events_per_ip_hour is not None
    want_device = bool(payload.device_fingerprint) and campaign.fraud_max_events_per_device_hour is not None
    want_iban = bool(fingerprint) and campaign.fraud_max_iban_claims_per_day is not None
    ip_count = device_count = iban_day = 0
    if want_ip or want_device or want_iban:
        dt = connection.ops.adapt_datetimefield_value
        hour_ago = dt(now - timedelta(hours=1))
        with connection.cursor() as cursor:
            cursor.execute(
                _SIGNALS_SQL,
                [
                    want_ip,
                    payload.ip or None,
                    hour_ago,
                    want_device,
                    payload.device_fingerprint,
                    hour_ago,
                    want_iban,
                    fingerprint,
                    dt(now - timedelta(days=1)),
                ],
            )
            ip_count, device_count, iban_day = cursor.fetchone()
    sharing = 0
    if fingerprint and campaign.fraud_max_people_per_iban is not None:
        sharing = people_sharing_iban_count(fingerprint=fingerprint)
    return Signals(
        people_sharing_iban=sharing,
        events_from_ip_last_hour=ip_count,
        events_from_device_last_hour=device_count,
        iban_rewards_last_day=iban_day,
    )


class Reject(Exception):
    """The event is refused with a stable reason code; it is stored as ``rejected``."""

    def __init__(self, reason: str):
        self.reason = reason


_COUNTER_TAKE_SQL = (
    f"INSERT INTO {RuleCounter._meta.db_table} (rule_id, period, rewards_count) VALUES (%s, %s, 1) "
    f"ON CONFLICT (rule_id, period) DO UPDATE SET rewards_count = {RuleCounter._meta.db_table}.rewards_count + 1 "
    f"WHERE {RuleCounter._meta.db_table}.rewards_count < %s RETURNING rewards_count"
)


def counters_take(*, rule: RewardRule, day_key: str) -> list[str]:
    """Count one more reward against the rule's campaign-wide caps, one conditional upsert per
    cap (the caller holds the tally lock). Returns the periods taken, for ``counters_give_back``.
    Raises Reject when a cap is full, after giving back what it took."""
    taken: list[str] = []
    for limit, period, reason in (
        (rule.campaign_count, "all", "cap_campaign_count"),
        (rule.campaign_count_per_day, day_key, "cap_campaign_day_count"),
    ):
        if limit is None:
            continue
        with connection.cursor() as cursor:
            cursor.execute(_COUNTER_TAKE_SQL, [rule.pk, period, limit])
            if cursor.fetchone() is None:
                counters_give_back(rule=rule, periods=taken)
                raise Reject(reason)
        taken.append(period)
    return taken


def counters_give_back(*, rule: RewardRule, periods: list[str]) -> None:
    if periods:
        RuleCounter.objects.filter(rule=rule, period__in=periods).update(rewards_count=F("rewards_count") - 1)


@dataclass(frozen=True)
class Who:
    """The person an event is about, with what the caps and conditions need."""

    person: Person
    cluster: list[int]
    fingerprint: str
    country: str


def who_resolve(payload: EventInput) -> Who:
    """Resolve the person inside the caller's transaction: ``person_resolve`` locks the root row
    until commit (the per-person lock of ``campaigns.locks``)."""
    person = person_resolve(
        identity=IdentityInput(
            name=payload.name,
            email=payload.email,
            whatsapp=payload.whatsapp,
            iban=payload.iban,
            social_provider=payload.social_provider,
            social_uid=payload.social_uid,
            phone_region=payload.phone_region,
        ),
        source=payload.source,
    )
    bank = person_current_bank_account(person=person)
    return Who(
        person=person,
        cluster=person_cluster_ids(person=person),
        fingerprint=bank.iban_fingerprint if bank else "",
        country=bank.country if bank else "",
    )
