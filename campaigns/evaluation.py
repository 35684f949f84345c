"""Rule evaluation as pure functions: amounts, fees, conditions, caps, periods, fraud signals,
and ``decide``, which applies them to one event in the engine's order.

No database access here, so every rule can be tested table-driven and every path that decides
an event shares exactly one implementation. Ingestion gathers the ``Facts`` (under the locks
described in ``campaigns.locks``) and acts on the ``Decision``. A rule that needs a new fact
about the database is one read in ``campaigns.services.ingest_reads.Known`` and one check here.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from decimal import Decimal

from campaigns.models import AmountType, ApprovalPolicy, CampaignStatus, RewardRule, Trigger, Verification
from campaigns.models.events import EventSource
from campaigns.models.plans import Plan
from campaigns.triggers import first_party_platforms
from core.money import currency_exponent, round_to_minor

# Sources whose adapters verified the action themselves (OAuth login, signed webhook, Display API):
# the platforms of the first-party triggers (``campaigns.triggers``), and the claim page.
FIRST_PARTY_SOURCES = frozenset({*map(EventSource, first_party_platforms()), EventSource.CLAIM_PAGE})
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


def fee_for(*, plan: Plan | None, amount_minor: int, currency: str) -> int:
    """The platform fee on one reward under the brand's plan: fixed + basis points of the amount,
    ROUND_HALF_UP (no plan: no fee). The fixed part is in minor units of the reward's currency."""
    if plan is None:
        return 0
    percent = Decimal(amount_minor) * Decimal(plan.fee_bps) / Decimal(10000)
    return int(plan.fee_fixed_minor) + round_to_minor(percent.scaleb(-currency_exponent(currency)), currency)


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


@dataclass(frozen=True)
class Signals:
    """Fraud and velocity observations, counted before this event."""

    people_sharing_iban: int = 0
    events_from_ip_last_hour: int = 0
    events_from_device_last_hour: int = 0
    iban_rewards_last_day: int = 0
    # The event's e-mail mixes scripts in one label (``recipients.normalise.email_mixed_script``).
    email_mixed_script: bool = False


@dataclass(frozen=True)
class Facts:
    """Everything the rules may read about one event when it is evaluated."""

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
    # What the person, their IBAN, the IP and the device took or did before this event.
    usage: Usage = field(default_factory=Usage)
    signals: Signals = field(default_factory=Signals)
    # The campaign as its tally lock shows it: status, what its budget can still reserve (None:
    # not checked) and its rule's campaign-wide counts by period ("all" or the local day).
    campaign_status: str = CampaignStatus.ACTIVE
    budget_available_minor: int | None = None
    campaign_counts: Mapping[str, int] = field(default_factory=dict)
    # What the brand's plan still allows this calendar month (None: no limit), as its usage row
    # (``BrandUsage``) and the batch's events before this one say.
    plan_actions_left: int | None = None
    plan_payouts_left_minor: int | None = None


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


# The fraud signals ``fraud_reasons`` may trip, one name each: a brand reads none of them
# (``brand_visible_reasons``), so a new signal is added here or a brand would read it.
IBAN_SHARED = "iban_shared_by_many_people"
IP_VELOCITY = "ip_velocity"
DEVICE_VELOCITY = "device_velocity"
IBAN_CLAIMS_PER_DAY = "iban_claims_per_day"
EMAIL_MIXED_SCRIPT = "email_mixed_script"
FRAUD_SIGNALS = frozenset({IBAN_SHARED, IP_VELOCITY, DEVICE_VELOCITY, IBAN_CLAIMS_PER_DAY, EMAIL_MIXED_SCRIPT})


def fraud_reasons(*, campaign, signals: Signals) -> list[str]:
    """Every tripped signal: the event goes to review with these stored. Each is one of
    ``FRAUD_SIGNALS``: ops read them, a brand never does (``brand_visible_reasons``)."""
    reasons = []
    if (
        campaign.fraud_max_people_per_iban is not None
        and signals.people_sharing_iban > campaign.fraud_max_people_per_iban
    ):
        reasons.append(IBAN_SHARED)
    if (
        campaign.fraud_max_events_per_ip_hour is not None
        and signals.events_from_ip_last_hour >= campaign.fraud_max_events_per_ip_hour
    ):
        reasons.append(IP_VELOCITY)
    if (
        campaign.fraud_max_events_per_device_hour is not None
        and signals.events_from_device_last_hour >= campaign.fraud_max_events_per_device_hour
    ):
        reasons.append(DEVICE_VELOCITY)
    if (
        campaign.fraud_max_iban_claims_per_day is not None
        and signals.iban_rewards_last_day >= campaign.fraud_max_iban_claims_per_day
    ):
        reasons.append(IBAN_CLAIMS_PER_DAY)
    if signals.email_mixed_script:
        reasons.append(EMAIL_MIXED_SCRIPT)
    return reasons


# What a brand reads instead of a fraud signal.
BRAND_REVIEW_REASON = "review"


def brand_visible_reasons(reasons: list[str]) -> list[str]:
    """The reasons a brand may read (API, webhooks, portal) for what ops read in full (the admin).

    A fraud signal may be made of other brands' data (people paid into one IBAN), and naming it
    would tell a brand that someone elsewhere holds that IBAN; the others are generic too, so
    the generic word never singles the cross-brand one out. Every fraud signal is therefore
    ``review``, once; the reasons that come from the brand's own rule (``always_review``,
    ``above_review_amount``, a rejection's condition or cap) are kept as they are."""
    visible: list[str] = []
    for reason in reasons:
        shown = BRAND_REVIEW_REASON if reason in FRAUD_SIGNALS else reason
        if shown != BRAND_REVIEW_REASON or shown not in visible:
            visible.append(shown)
    return visible


def brand_visible_reason(text: str) -> str:
    """``brand_visible_reasons`` of a stored comma-joined reason (an audit row's); any other text
    (a reviewer's words) comes back as it was."""
    return ",".join(brand_visible_reasons(text.split(","))) if text else ""


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


def counter_periods(day_key: str) -> tuple[str, str]:
    """The periods a rule's campaign-wide counters (``RuleCounter.period``) count by: the whole
    campaign ("all") and the local day of ``day_key`` (``periods_for``)."""
    return ("all", day_key)


def campaign_cap_limits(rule: RewardRule, day_key: str) -> list[tuple[int, str, str]]:
    """The rule's campaign-wide count caps as (limit, counter period, reason)."""
    whole, day = counter_periods(day_key)
    return [
        (limit, period, reason)
        for limit, period, reason in (
            (rule.campaign_count, whole, "cap_campaign_count"),
            (rule.campaign_count_per_day, day, "cap_campaign_day_count"),
        )
        if limit is not None
    ]


@dataclass(frozen=True)
class Decision:
    """``reason`` is a rejection's code; without one the event is rewarded with ``amount_minor``
    (plus ``fee_minor`` for the platform), in review when ``review_reasons`` says why."""

    reason: str = ""
    amount_minor: int = 0
    fee_minor: int = 0
    review_reasons: list[str] = field(default_factory=list)


def decide(*, rule: RewardRule, campaign, plan: Plan | None, facts: Facts) -> Decision:
    """Decide one event in the order the engine has always checked: the campaign's status,
    the conditions, the amount, the person and IBAN caps, fraud signals and the approval policy,
    then what only the campaign's lock makes exact: its budget and campaign-wide counts, and
    last the plan's monthly allowances (``plan_monthly_actions``, ``plan_monthly_payouts``).
    The fee is the plan's (``fee_for``)."""
    if facts.campaign_status != CampaignStatus.ACTIVE:
        return Decision(reason="campaign_not_active")
    reason = condition_failure(rule=rule, facts=facts, currency=campaign.currency)
    if reason:
        return Decision(reason=reason)
    amount = reward_amount(rule=rule, purchase_amount_minor=facts.purchase_amount_minor, currency=campaign.currency)
    if amount <= 0:
        return Decision(reason="amount_zero")
    if rule.has_person_caps or (rule.has_iban_caps and facts.iban_fingerprint):
        reason = cap_failure(rule=rule, usage=facts.usage, amount_minor=amount)
        if reason:
            return Decision(reason=reason)
    verdict = approval_verdict(
        rule=rule, amount_minor=amount, fraud=fraud_reasons(campaign=campaign, signals=facts.signals)
    )
    fee = fee_for(plan=plan, amount_minor=amount, currency=campaign.currency)
    if facts.budget_available_minor is not None and facts.budget_available_minor < amount + fee:
        return Decision(reason="budget_exhausted")
    for limit, period, reason in campaign_cap_limits(rule, periods_for(facts.occurred_at, campaign.tz).day_key):
        if facts.campaign_counts.get(period, 0) >= limit:
            return Decision(reason=reason)
    if facts.plan_actions_left is not None and facts.plan_actions_left < 1:
        return Decision(reason="plan_monthly_actions")
    if facts.plan_payouts_left_minor is not None and facts.plan_payouts_left_minor < amount:
        return Decision(reason="plan_monthly_payouts")
    return Decision(amount_minor=amount, fee_minor=fee, review_reasons=verdict.review_reasons)
