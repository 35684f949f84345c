"""Rule evaluation, table-driven: amounts (fixed, percent, min/max, rounding), fees, conditions,
caps, periods and fraud signals. Pure functions: unsaved model instances are enough."""

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from campaigns.evaluation import (
    FRAUD_SIGNALS,
    Facts,
    Signals,
    Usage,
    approval_verdict,
    brand_visible_reason,
    brand_visible_reasons,
    cap_failure,
    condition_failure,
    fee_for,
    fraud_reasons,
    periods_for,
    reward_amount,
)
from campaigns.models import Campaign, Plan, RewardRule

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=ZoneInfo("UTC"))


def rule(**fields) -> RewardRule:
    fields.setdefault("trigger", "tiktok_login")
    if fields.get("amount_type") != "percent":
        fields.setdefault("fixed_minor", 500)
    return RewardRule(**fields)


def facts(**fields) -> Facts:
    fields.setdefault("trigger", "tiktok_login")
    fields.setdefault("source", "tiktok")
    fields.setdefault("occurred_at", NOW)
    return Facts(**fields)


@pytest.mark.parametrize(
    ("fields", "purchase", "currency", "expected"),
    [
        ({"trigger": "tiktok_login"}, None, "EUR", 500),
        ({"trigger": "whatsapp_optin", "fixed_minor": 250}, None, "EUR", 250),
        ({"trigger": "ugc_share", "fixed_minor": 1000}, None, "EUR", 1000),
        ({"trigger": "like", "fixed_minor": 10}, None, "EUR", 10),
        ({"trigger": "comment", "fixed_minor": 20}, None, "EUR", 20),
        ({"trigger": "view_threshold", "fixed_minor": 700}, None, "EUR", 700),
        ({"trigger": "custom", "custom_name": "quiz", "fixed_minor": 300}, None, "EUR", 300),
        ({"trigger": "purchase", "fixed_minor": 400}, 9_999, "EUR", 400),
        # percent of the purchase: 5 % of 49.90 = 2.495 → 2.50 (ROUND_HALF_UP)
        ({"trigger": "purchase", "amount_type": "percent", "percent_bps": 500}, 4_990, "EUR", 250),
        # 5 % of 49.70 = 2.485 → 2.49 (half up, not banker's 2.48)
        ({"trigger": "purchase", "amount_type": "percent", "percent_bps": 500}, 4_970, "EUR", 249),
        # 3.33 % of 10.00 = 0.333 → 0.33
        ({"trigger": "purchase", "amount_type": "percent", "percent_bps": 333}, 1_000, "EUR", 33),
        # min and max clamp after rounding
        ({"trigger": "purchase", "amount_type": "percent", "percent_bps": 100, "min_minor": 200}, 5_000, "EUR", 200),
        (
            {"trigger": "purchase", "amount_type": "percent", "percent_bps": 2000, "max_minor": 1_500},
            50_000,
            "EUR",
            1_500,
        ),
        (
            {"trigger": "purchase", "amount_type": "percent", "percent_bps": 1000, "min_minor": 100, "max_minor": 900},
            5_000,
            "EUR",
            500,
        ),
        # no purchase amount: nothing to pay (the condition check reports why)
        ({"trigger": "purchase", "amount_type": "percent", "percent_bps": 500}, None, "EUR", 0),
    ],
)
def test_reward_amount(fields, purchase, currency, expected):
    assert reward_amount(rule=rule(**fields), purchase_amount_minor=purchase, currency=currency) == expected


@pytest.mark.parametrize(
    ("fixed", "bps", "amount", "expected"),
    [(0, 0, 500, 0), (10, 0, 500, 10), (0, 200, 500, 10), (10, 200, 500, 20), (0, 250, 101, 3), (0, 250, 99, 2)],
)
def test_fee(fixed, bps, amount, expected):
    # 2.5 % of 1.01 = 0.02525 → 0.03 (half up); of 0.99 = 0.02475 → 0.02
    plan = Plan(fee_fixed_minor=fixed, fee_bps=bps)
    assert fee_for(plan=plan, amount_minor=amount, currency="EUR") == expected


@pytest.mark.parametrize(
    ("rule_fields", "fact_fields", "reason"),
    [
        ({}, {}, None),
        ({}, {"source": "api"}, "not_first_party"),
        ({"trigger": "like", "verification": "partner_attested"}, {"trigger": "like", "source": "api"}, None),
        ({"trigger": "like", "verification": "partner_attested"}, {"trigger": "like", "source": "tiktok"}, None),
        (
            {"trigger": "purchase", "verification": "partner_attested"},
            {"trigger": "purchase", "source": "api"},
            "purchase_amount_missing",
        ),
        (
            {"trigger": "purchase", "verification": "partner_attested", "min_purchase_minor": 2_000},
            {"trigger": "purchase", "source": "api", "purchase_amount_minor": 1_999},
            "purchase_below_minimum",
        ),
        (
            {"trigger": "purchase", "verification": "partner_attested", "min_purchase_minor": 2_000},
            {"trigger": "purchase", "source": "api", "purchase_amount_minor": 2_000},
            None,
        ),
        (
            {"trigger": "purchase", "verification": "partner_attested"},
            {"trigger": "purchase", "source": "api", "purchase_amount_minor": 2_000, "purchase_currency": "USD"},
            "purchase_currency_mismatch",
        ),
        (
            {"trigger": "view_threshold", "view_threshold": 10_000},
            {"trigger": "view_threshold", "view_count": 9_999},
            "views_below_threshold",
        ),
        (
            {"trigger": "view_threshold", "view_threshold": 10_000},
            {"trigger": "view_threshold", "view_count": 10_000},
            None,
        ),
        (
            {"trigger": "ugc_share", "required_code": "#JoyShoes"},
            {"trigger": "ugc_share", "evidence_text": "love my #joyshoes"},
            None,
        ),
        ({"trigger": "ugc_share", "required_code": "#JoyShoes"}, {"trigger": "ugc_share", "code": "#JOYSHOES"}, None),
        (
            {"trigger": "ugc_share", "required_code": "#JoyShoes"},
            {"trigger": "ugc_share", "evidence_text": "#other"},
            "required_code_missing",
        ),
        ({"allowed_iban_countries": ["NL"]}, {}, "iban_required"),
        (
            {"allowed_iban_countries": ["NL"]},
            {"iban_fingerprint": "f", "iban_country": "DE"},
            "iban_country_not_allowed",
        ),
        ({"allowed_iban_countries": ["NL"]}, {"iban_fingerprint": "f", "iban_country": "NL"}, None),
        ({"iban_count_per_day": 1}, {}, "iban_required"),
        ({"new_people_only": True}, {"person_is_new_to_brand": False}, "not_a_new_person"),
        ({"new_people_only": True}, {"person_is_new_to_brand": True}, None),
    ],
)
def test_conditions(rule_fields, fact_fields, reason):
    assert condition_failure(rule=rule(**rule_fields), facts=facts(**fact_fields), currency="EUR") == reason


@pytest.mark.parametrize(
    ("caps", "usage", "amount", "reason"),
    [
        ({}, Usage(person_campaign_count=99), 500, None),
        ({"person_count_per_day": 1}, Usage(person_day_count=0), 500, None),
        ({"person_count_per_day": 1}, Usage(person_day_count=1), 500, "cap_person_day_count"),
        ({"person_count_per_week": 3}, Usage(person_week_count=3), 500, "cap_person_week_count"),
        ({"person_count_per_campaign": 3}, Usage(person_campaign_count=2), 500, None),
        ({"person_amount_per_day_minor": 1_000}, Usage(person_day_amount=500), 500, None),
        ({"person_amount_per_day_minor": 1_000}, Usage(person_day_amount=501), 500, "cap_person_day_amount"),
        ({"person_amount_per_week_minor": 1_000}, Usage(person_week_amount=600), 500, "cap_person_week_amount"),
        ({"person_amount_per_campaign_minor": 1_000}, Usage(), 1_001, "cap_person_campaign_amount"),
        ({"iban_count_per_day": 2}, Usage(iban_day_count=2), 500, "cap_iban_day_count"),
        ({"iban_count_per_campaign": 2}, Usage(iban_campaign_count=1), 500, None),
    ],
)
def test_caps(caps, usage, amount, reason):
    assert cap_failure(rule=rule(**caps), usage=usage, amount_minor=amount) == reason


@pytest.mark.parametrize(
    ("moment", "tz", "day", "week_start"),
    [
        # 23:30 UTC on Sunday 8 March is already Monday 9 March in Rome: a new day and a new week
        (datetime(2026, 3, 8, 23, 30, tzinfo=ZoneInfo("UTC")), "Europe/Rome", "2026-03-09", "2026-03-09"),
        (datetime(2026, 3, 8, 22, 30, tzinfo=ZoneInfo("UTC")), "Europe/Rome", "2026-03-08", "2026-03-02"),
        (datetime(2026, 3, 9, 3, 0, tzinfo=ZoneInfo("UTC")), "America/New_York", "2026-03-08", "2026-03-02"),
    ],
)
def test_periods_in_the_campaign_time_zone(moment, tz, day, week_start):
    periods = periods_for(moment, ZoneInfo(tz))
    assert periods.day_key == day
    assert periods.week_start.date().isoformat() == week_start
    assert periods.day_start <= moment < periods.day_end


def test_day_with_a_dst_change_is_23_hours_long():
    periods = periods_for(datetime(2026, 3, 29, 12, 0, tzinfo=ZoneInfo("UTC")), ZoneInfo("Europe/Rome"))
    # Subtract in UTC: Python subtracts wall-clock times when both sides share one tzinfo.
    utc = ZoneInfo("UTC")
    assert (periods.day_end.astimezone(utc) - periods.day_start.astimezone(utc)).total_seconds() == 23 * 3600


@pytest.mark.parametrize(
    ("signals", "expected"),
    [
        (Signals(), []),
        (Signals(people_sharing_iban=4), ["iban_shared_by_many_people"]),
        (Signals(people_sharing_iban=3), []),
        (Signals(events_from_ip_last_hour=30), ["ip_velocity"]),
        (
            Signals(events_from_device_last_hour=30, iban_rewards_last_day=10),
            ["device_velocity", "iban_claims_per_day"],
        ),
        (Signals(email_mixed_script=True), ["email_mixed_script"]),
    ],
)
def test_fraud_signals_use_the_campaign_thresholds(signals, expected):
    campaign = Campaign()  # defaults: 3 people per IBAN, 30 per IP/device per hour, 10 per IBAN per day
    assert fraud_reasons(campaign=campaign, signals=signals) == expected


@pytest.mark.parametrize(
    ("fields", "amount", "fraud", "reasons"),
    [
        ({}, 500, [], []),
        ({}, 500, ["ip_velocity"], ["ip_velocity"]),
        ({"approval_policy": "always_review"}, 500, [], ["always_review"]),
        ({"approval_policy": "review_above", "review_above_minor": 500}, 500, [], []),
        ({"approval_policy": "review_above", "review_above_minor": 500}, 501, [], ["above_review_amount"]),
        ({"trigger": "comment", "verification": "manual"}, 500, [], ["manual_verification"]),
    ],
)
def test_approval(fields, amount, fraud, reasons):
    verdict = approval_verdict(rule=rule(**fields), amount_minor=amount, fraud=fraud)
    assert verdict.review_reasons == reasons and verdict.needs_review == bool(reasons)


def test_a_brand_reads_every_fraud_signal_as_review_and_its_own_rule_as_it_is():
    everything = Signals(
        people_sharing_iban=9,
        events_from_ip_last_hour=99,
        events_from_device_last_hour=99,
        iban_rewards_last_day=99,
        email_mixed_script=True,
    )
    tripped = fraud_reasons(campaign=Campaign(), signals=everything)
    verdict = approval_verdict(rule=rule(approval_policy="always_review"), amount_minor=500, fraud=tripped)

    assert set(tripped) == FRAUD_SIGNALS  # every signal there is, so a new one cannot slip past the mapping
    assert brand_visible_reasons(verdict.review_reasons) == ["review", "always_review"]
    assert brand_visible_reasons(["above_review_amount"]) == ["above_review_amount"]
    assert brand_visible_reason(",".join(verdict.review_reasons)) == "review,always_review"
    assert brand_visible_reason("cap_person_day_count") == "cap_person_day_count"
    assert brand_visible_reason("Refunded, says the shop") == "Refunded, says the shop"
    assert brand_visible_reason("") == ""
