"""Rule evaluation as pure functions: amounts, fees, conditions, caps, periods, fraud signals.

No database access here, so every rule can be tested table-driven and the single and bulk
ingestion paths share exactly one implementation. The callers gather the facts (under the locks
described in ``campaigns.locks``) and act on the verdict.
"""

from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from decimal import Decimal

from campaigns.models import AmountType, ApprovalPolicy, Brand, RewardRule, Trigger, Verification
from campaigns.models.events import EventSource
from core.money import currency_exponent, round_to_minor

# Sources whose adapters verified the action themselves (OAuth login, signed webhook, Display API).
FIRST_PARTY_SOURCES = frozenset({EventSource.TIKTOK, EventSource.WHATSAPP, EventSource.CLAIM_PAGE})
# A partner's authenticated API call attests; an admin entering an event is a manual decision.
PARTNER_SOURCES = FIRST_PARTY_SOURCES | {EventSource.API, EventSource.ADMIN}


def reward_amount(*, rule: RewardRule, purchase_amount_minor: int | None, currency: str) -> int:
    """The reward in minor units. Percent: ``purchase × bps / 10000`` rounded ROUND_HALF_UP to the
    minor unit once (``core.money.round_to_minor``), then clamped to min/max. Fixed: the amount
    (min/max do not apply). 0 means "nothing to pay" (a percentage of a missing purchase)."""
    if rule.amount_type == AmountType.FIXED:
        return int(rule.fixed_minor or 0)
    if not purchase_amount_minor:
        return 0
    exact = Decimal(purchase_amount_minor) * Decimal(rule.percent_bps) / Decimal(10000)
    # round_to_minor takes a major-unit Decimal; the purchase is in minor units already.
    amount = round_to_minor(exact.scaleb(-currency_exponent(currency)), currency)
    if rule.min_minor is not None:
        amount = max(amount, rule.min_minor)
    if rule.max_minor is not None:
        amount = min(amount, rule.max_minor)
    return amount


def fee_for(*, brand: Brand, amount_minor: int, currency: str) -> int:
    """The platform fee on one reward: fixed + basis points of the amount, ROUND_HALF_UP."""
    percent = Decimal(amount_minor) * Decimal(brand.fee_bps) / Decimal(10000)
    return int(brand.fee_fixed_minor) + round_to_minor(percent.scaleb(-currency_exponent(currency)), currency)


@dataclass(frozen=True)
class Facts:
    """What is known about one event when its rule is evaluated."""

    trigger: str
    source: str
    occurred_at: datetime
    purchase_amount_minor: int | None = None
    purchase_currency: str = ""
    view_count: int | None = None
    code: str = ""
    evidence_text: str = ""
    iban_fingerprint: str = ""
    iban_country: str = ""
    person_is_new_to_brand: bool = True


def condition_failure(*, rule: RewardRule, facts: Facts, currency: str) -> str | None:
    """The reason code of the first condition the event fails, or None."""
    if rule.verification == Verification.FIRST_PARTY and facts.source not in FIRST_PARTY_SOURCES:
        return "not_first_party"
    if rule.verification == Verification.PARTNER_ATTESTED and facts.source not in PARTNER_SOURCES:
        return "not_attested"
    if rule.trigger == Trigger.PURCHASE:
        if not facts.purchase_amount_minor:
            return "purchase_amount_missing"
        if facts.purchase_currency and facts.purchase_currency != currency:
            return "purchase_currency_mismatch"
        if rule.min_purchase_minor is not None and facts.purchase_amount_minor < rule.min_purchase_minor:
            return "purchase_below_minimum"
    if rule.view_threshold is not None and (facts.view_count or 0) < rule.view_threshold:
        return "views_below_threshold"
    if rule.required_code:
        needle = rule.required_code.lower()
        haystack = f"{facts.code} {facts.evidence_text}".lower()
        if needle not in haystack:
            return "required_code_missing"
    if rule.requires_iban and not facts.iban_fingerprint:
        return "iban_required"
    if rule.allowed_iban_countries and facts.iban_country not in rule.allowed_iban_countries:
        return "iban_country_not_allowed"
    if rule.new_people_only and not facts.person_is_new_to_brand:
        return "not_a_new_person"
    return None


@dataclass(frozen=True)
class Periods:
    """[start, end) of the calendar day and ISO week (Monday) holding a moment, in a time zone."""

    day_start: datetime
    day_end: datetime
    week_start: datetime
    week_end: datetime
    day_key: str


def periods_for(moment: datetime, tz) -> Periods:
    local = moment.astimezone(tz)
    day = local.date()
    monday = day - timedelta(days=day.weekday())

    def at_midnight(d):
        # Built from the local date so a DST change inside the period keeps midnight at midnight.
        return datetime.combine(d, time.min, tzinfo=tz)

    return Periods(
        day_start=at_midnight(day),
        day_end=at_midnight(day + timedelta(days=1)),
        week_start=at_midnight(monday),
        week_end=at_midnight(monday + timedelta(days=7)),
        day_key=day.isoformat(),
    )


@dataclass
class Usage:
    """Live rewards (review, held, payable, paid) already counted against a cap."""

    person_day_count: int = 0
    person_week_count: int = 0
    person_campaign_count: int = 0
    person_day_amount: int = 0
    person_week_amount: int = 0
    person_campaign_amount: int = 0
    iban_day_count: int = 0
    iban_campaign_count: int = 0


def cap_failure(*, rule: RewardRule, usage: Usage, amount_minor: int) -> str | None:
    """The reason code of the first per-person or per-IBAN cap this reward would exceed."""
    checks = (
        (rule.person_count_per_day, usage.person_day_count + 1, "cap_person_day_count"),
        (rule.person_count_per_week, usage.person_week_count + 1, "cap_person_week_count"),
        (rule.person_count_per_campaign, usage.person_campaign_count + 1, "cap_person_campaign_count"),
        (rule.person_amount_per_day_minor, usage.person_day_amount + amount_minor, "cap_person_day_amount"),
        (rule.person_amount_per_week_minor, usage.person_week_amount + amount_minor, "cap_person_week_amount"),
        (
            rule.person_amount_per_campaign_minor,
            usage.person_campaign_amount + amount_minor,
            "cap_person_campaign_amount",
        ),
        (rule.iban_count_per_day, usage.iban_day_count + 1, "cap_iban_day_count"),
        (rule.iban_count_per_campaign, usage.iban_campaign_count + 1, "cap_iban_campaign_count"),
    )
    for limit, would_be, reason in checks:
        if limit is not None and would_be > limit:
            return reason
    return None


@dataclass(frozen=True)
class Signals:
    """Fraud and velocity observations, counted before this event."""

    people_sharing_iban: int = 0
    events_from_ip_last_hour: int = 0
    events_from_device_last_hour: int = 0
    iban_rewards_last_day: int = 0


def fraud_reasons(*, campaign, signals: Signals) -> list[str]:
    """Every tripped signal: the event goes to review with these stored."""
    reasons = []
    if (
        campaign.fraud_max_people_per_iban is not None
        and signals.people_sharing_iban > campaign.fraud_max_people_per_iban
    ):
        reasons.append("iban_shared_by_many_people")
    if (
        campaign.fraud_max_events_per_ip_hour is not None
        and signals.events_from_ip_last_hour >= campaign.fraud_max_events_per_ip_hour
    ):
        reasons.append("ip_velocity")
    if (
        campaign.fraud_max_events_per_device_hour is not None
        and signals.events_from_device_last_hour >= campaign.fraud_max_events_per_device_hour
    ):
        reasons.append("device_velocity")
    if (
        campaign.fraud_max_iban_claims_per_day is not None
        and signals.iban_rewards_last_day >= campaign.fraud_max_iban_claims_per_day
    ):
        reasons.append("iban_claims_per_day")
    return reasons


@dataclass
class Verdict:
    needs_review: bool
    review_reasons: list[str] = field(default_factory=list)


def approval_verdict(*, rule: RewardRule, amount_minor: int, fraud: list[str]) -> Verdict:
    reasons = list(fraud)
    if rule.verification == Verification.MANUAL:
        reasons.append("manual_verification")
    if rule.approval_policy == ApprovalPolicy.ALWAYS_REVIEW:
        reasons.append("always_review")
    elif rule.approval_policy == ApprovalPolicy.REVIEW_ABOVE and amount_minor > (rule.review_above_minor or 0):
        reasons.append("above_review_amount")
    return Verdict(needs_review=bool(reasons), review_reasons=reasons)
