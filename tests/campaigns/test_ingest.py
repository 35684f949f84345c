"""event_ingest: outcomes, idempotency, caps across linked identities, per-IBAN caps, period
boundaries in the campaign's time zone, fraud review, auto-pause and budget alerts."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from campaigns.models import BudgetAlert, CampaignEvent, CampaignStatus, Reward, RewardStatus, TriggerEvent
from campaigns.selectors import campaign_budget
from campaigns.services import event_ingest, event_ingest_bulk
from core.exceptions import IdempotencyConflict, InvalidInput
from reconciliation.models import Hold
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.conftest import event
from tests.campaigns.factories import IBAN_DE, IBAN_NL, IBAN_NL_2, funded_campaign

LOGIN_500 = {"trigger": "tiktok_login", "fixed_minor": 500}

pytestmark = pytest.mark.django_db


def test_login_is_reserved_on_the_budget_with_its_fee(brand):
    # given a campaign paying 5.00 per TikTok login, fee 0.10 + 2 % = 0.20
    campaign = funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    # when a login arrives
    result = event_ingest(brand=brand, payload=event(iban=IBAN_NL))
    # then 5.20 is held on the budget and the reward is held with no hold period
    assert result.outcome == "rewarded" and not result.replayed
    reward = result.reward
    assert (reward.amount_minor, reward.fee_minor, reward.status) == (500, 20, RewardStatus.HELD)
    assert reward.hold.amount_minor == 520
    budget = campaign_budget(campaign=campaign)
    assert (budget.held_minor, budget.available_minor) == (520, 9_480)
    assert reward.audit.get().kind == "reward.held"
    assert ledger_verify_report().ok


def test_same_event_twice_is_one_reward_and_the_second_call_returns_the_first_outcome(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    payload = event(email="ada@example.com")
    first = event_ingest(brand=brand, payload=payload)
    second = event_ingest(brand=brand, payload=payload)
    assert second.replayed and second.outcome == first.outcome
    assert second.reward.pk == first.reward.pk
    assert Reward.objects.count() == 1 and Hold.objects.count() == 1


def test_same_external_id_with_other_content_is_refused(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    event_ingest(brand=brand, payload=event(external_id="x-1", email="ada@example.com"))
    with pytest.raises(IdempotencyConflict):
        event_ingest(brand=brand, payload=event(external_id="x-1", email="bob@example.com"))
    assert TriggerEvent.objects.count() == 1


def test_invalid_identifier_stores_nothing(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    with pytest.raises(InvalidInput) as exc:
        event_ingest(brand=brand, payload=event(iban="NL00 BAD"))
    assert exc.value.code == "invalid_iban"
    assert TriggerEvent.objects.count() == 0 and Hold.objects.count() == 0


def test_rejection_is_stored_with_its_reason_and_reserves_nothing(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    result = event_ingest(brand=brand, payload=event(type="whatsapp_optin", source="whatsapp"))
    assert (result.outcome, result.reason) == ("rejected", "no_matching_rule")
    assert result.event.outcome == "rejected" and Hold.objects.count() == 0


def test_person_cap_counts_linked_identities_once(brand):
    # given one reward per person, and a person known by email and IBAN
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{**LOGIN_500, "person_count_per_campaign": 1}])
    assert event_ingest(brand=brand, payload=event(email="ada@example.com", iban=IBAN_NL)).outcome == "rewarded"
    # when the same human comes back with a second email but the same IBAN (linked)
    again = event_ingest(brand=brand, payload=event(email="ada.other@example.com", iban=IBAN_NL))
    # and once more with only the second email (linked through the previous event)
    third = event_ingest(brand=brand, payload=event(email="ada.other@example.com"))
    # then both are refused by the per-person cap
    assert (again.outcome, again.reason) == ("rejected", "cap_person_campaign_count")
    assert third.reason == "cap_person_campaign_count"
    assert Reward.objects.count() == 1


def test_person_amount_cap(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{**LOGIN_500, "person_amount_per_week_minor": 1_000}])
    outcomes = [event_ingest(brand=brand, payload=event(email="ada@example.com")).reason for _ in range(3)]
    assert outcomes == ["", "", "cap_person_week_amount"]


def test_per_iban_cap_counts_the_account_not_the_claimant(brand):
    # given one reward per IBAN per day
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{**LOGIN_500, "iban_count_per_day": 1}])
    assert event_ingest(brand=brand, payload=event(iban=IBAN_NL)).outcome == "rewarded"
    # then another claim paying into the same IBAN is refused, another IBAN is fine
    assert event_ingest(brand=brand, payload=event(iban=IBAN_NL)).reason == "cap_iban_day_count"
    assert event_ingest(brand=brand, payload=event(iban=IBAN_NL_2)).outcome == "rewarded"


def test_iban_rule_without_iban_is_rejected(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{**LOGIN_500, "allowed_iban_countries": ["NL"]}])
    assert event_ingest(brand=brand, payload=event()).reason == "iban_required"
    assert event_ingest(brand=brand, payload=event(iban=IBAN_DE)).reason == "iban_country_not_allowed"
    assert event_ingest(brand=brand, payload=event(iban=IBAN_NL)).outcome == "rewarded"


def test_day_cap_follows_the_campaign_time_zone(brand):
    # given a campaign in Rome with one login per person per day
    funded_campaign(
        brand=brand, amount_minor=10_000, rules=[{**LOGIN_500, "person_count_per_day": 1}], timezone="Europe/Rome"
    )
    rome = ZoneInfo("Europe/Rome")
    # two days back: with "yesterday", 00:10 today is still in the future just after midnight
    day = (timezone.now().astimezone(rome) - timedelta(days=2)).date()
    late = datetime(day.year, day.month, day.day, 23, 30, tzinfo=rome)
    # 23:30 and 23:59 Rome time are the same local day; 00:10 the next local day (22:10/23:10 UTC
    # the same UTC day, which a UTC day boundary would wrongly count together)
    r1 = event_ingest(brand=brand, payload=event(email="ada@example.com", occurred_at=late))
    r2 = event_ingest(brand=brand, payload=event(email="ada@example.com", occurred_at=late + timedelta(minutes=29)))
    r3 = event_ingest(brand=brand, payload=event(email="ada@example.com", occurred_at=late + timedelta(minutes=40)))
    assert [r1.reason, r2.reason, r3.reason] == ["", "cap_person_day_count", ""]


def test_week_cap_resets_on_monday_local_time(brand):
    funded_campaign(
        brand=brand, amount_minor=10_000, rules=[{**LOGIN_500, "person_count_per_week": 1}], timezone="Europe/Rome"
    )
    rome = ZoneInfo("Europe/Rome")
    today = timezone.now().astimezone(rome).date()
    # the Monday two weeks back: one week back, Monday 00:10 is in the future early on a Monday
    last_monday = today - timedelta(days=today.weekday() + 14)
    sunday_night = datetime.combine(last_monday + timedelta(days=6), datetime.min.time(), tzinfo=rome) + timedelta(
        hours=23, minutes=50
    )
    results = [
        event_ingest(brand=brand, payload=event(email="ada@example.com", occurred_at=at)).reason
        for at in (sunday_night - timedelta(days=2), sunday_night, sunday_night + timedelta(minutes=20))
    ]
    assert results == ["", "cap_person_week_count", ""]


def test_campaign_count_cap(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{**LOGIN_500, "campaign_count": 2}])
    reasons = [event_ingest(brand=brand, payload=event()).reason for _ in range(3)]
    assert reasons == ["", "", "cap_campaign_count"]


def test_campaign_day_cap_is_freed_by_a_void(brand):
    from campaigns.services import reward_void

    funded_campaign(brand=brand, amount_minor=10_000, rules=[{**LOGIN_500, "campaign_count_per_day": 1}])
    first = event_ingest(brand=brand, payload=event())
    assert event_ingest(brand=brand, payload=event()).reason == "cap_campaign_day_count"
    reward_void(reward=first.reward, reason="action undone")
    assert event_ingest(brand=brand, payload=event()).outcome == "rewarded"


@pytest.mark.parametrize("bulk", [False, True], ids=["one-by-one", "bulk"])
def test_ip_velocity_counts_one_address_however_it_is_spelled(brand, bulk):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500], fraud_max_events_per_ip_hour=2)
    payloads = [event(ip=ip) for ip in ("2001:DB8::1", "2001:db8:0:0::1", "2001:0db8::0001")]
    if bulk:
        results = event_ingest_bulk(brand=brand, payloads=payloads)
    else:
        results = [event_ingest(brand=brand, payload=p) for p in payloads]
    assert [r.outcome for r in results] == ["rewarded", "rewarded", "review"]
    assert results[2].reward.review_reasons == ["ip_velocity"]


def test_fraud_signal_sends_to_review_with_reasons_and_reserves(brand):
    campaign = funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500], fraud_max_events_per_ip_hour=2)
    results = [event_ingest(brand=brand, payload=event(ip="203.0.113.9")) for _ in range(3)]
    assert [r.outcome for r in results] == ["rewarded", "rewarded", "review"]
    review = results[2].reward
    assert review.status == RewardStatus.REVIEW and review.review_reasons == ["ip_velocity"]
    assert results[2].event.review_reasons == ["ip_velocity"]
    assert campaign_budget(campaign=campaign).held_minor == 3 * 520


def test_review_above_amount(brand):
    funded_campaign(
        brand=brand,
        amount_minor=100_000,
        mode="cashback",
        rules=[
            {
                "trigger": "purchase",
                "amount_type": "percent",
                "percent_bps": 1000,
                "approval_policy": "review_above",
                "review_above_minor": 1_000,
                "verification": "partner_attested",
            }
        ],
    )
    small = event_ingest(brand=brand, payload=event(type="purchase", source="api", purchase_amount_minor=5_000))
    big = event_ingest(brand=brand, payload=event(type="purchase", source="api", purchase_amount_minor=50_000))
    assert (small.outcome, big.outcome) == ("rewarded", "review")
    assert big.reward.review_reasons == ["above_review_amount"]


def test_first_party_rule_refuses_a_partner_claim(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500])
    assert event_ingest(brand=brand, payload=event(source="api")).reason == "not_first_party"


def test_budget_exhausted_pauses_the_campaign(free_brand):
    # given a budget for exactly two 5.00 rewards
    campaign = funded_campaign(brand=free_brand, amount_minor=1_000, rules=[LOGIN_500])
    results = [event_ingest(brand=free_brand, payload=event()) for _ in range(3)]
    # then two are held, the campaign paused itself after the second, the third is refused
    assert [r.outcome for r in results] == ["rewarded", "rewarded", "rejected"]
    assert results[2].reason == "campaign_not_active"
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    pause = CampaignEvent.objects.get(campaign=campaign, kind="campaign.paused")
    assert pause.reason == "budget_exhausted" and pause.actor is None
    assert campaign_budget(campaign=campaign).available_minor == 0


def test_auto_pause_when_the_rest_cannot_cover_the_smallest_reward(free_brand):
    # 12.00 budget, 5.00 rewards: after two, 2.00 is left — less than one reward
    campaign = funded_campaign(brand=free_brand, amount_minor=1_200, rules=[LOGIN_500])
    event_ingest(brand=free_brand, payload=event())
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.ACTIVE
    event_ingest(brand=free_brand, payload=event())
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    assert campaign_budget(campaign=campaign).available_minor == 200


def test_budget_alerts_fire_once_per_crossing(free_brand):
    # given 10 rewards of 1.00 on a 10.00 budget
    campaign = funded_campaign(
        brand=free_brand, amount_minor=1_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 100}]
    )
    fired_after = []
    for _ in range(10):
        event_ingest(brand=free_brand, payload=event())
        fired_after.append(
            sorted(BudgetAlert.objects.filter(campaign=campaign).values_list("threshold_pct", flat=True))
        )
    # then 50 % fires at the 5th, 80 % at the 8th, 100 % at the 10th — each exactly once
    assert fired_after[3] == [] and fired_after[4] == [50]
    assert fired_after[7] == [50, 80] and fired_after[9] == [50, 80, 100]
    assert CampaignEvent.objects.filter(campaign=campaign, kind="campaign.budget_threshold").count() == 3


def test_inactive_campaign_rejects(free_brand):
    from campaigns.services import campaign_pause

    campaign = funded_campaign(brand=free_brand, amount_minor=1_000, rules=[LOGIN_500])
    campaign_pause(campaign=campaign)
    assert event_ingest(brand=free_brand, payload=event()).reason == "campaign_not_active"
    assert Hold.objects.count() == 0


def test_bulk_reports_each_outcome_and_isolates_failures(free_brand):
    funded_campaign(brand=free_brand, amount_minor=10_000, rules=[LOGIN_500])
    dup = event(email="ada@example.com")
    payloads = [event(), event(iban="not an iban"), dup, event(type="like", source="api"), dup]
    results = event_ingest_bulk(brand=free_brand, payloads=payloads)
    assert [r.outcome for r in results] == ["rewarded", "error", "rewarded", "rejected", "rewarded"]
    assert results[1].reason == "invalid_iban"
    assert results[4].replayed and results[4].reward.pk == results[2].reward.pk
    assert Reward.objects.count() == 2
    assert ledger_verify_report().ok


def test_a_reward_too_big_for_the_rest_is_refused_without_pausing(free_brand):
    # given 10 % cashback with a 1.00 minimum, on a 10.00 budget
    campaign = funded_campaign(
        brand=free_brand,
        amount_minor=1_000,
        mode="cashback",
        rules=[
            {
                "trigger": "purchase",
                "amount_type": "percent",
                "percent_bps": 1000,
                "min_minor": 100,
                "verification": "partner_attested",
            }
        ],
    )
    purchase = {"type": "purchase", "source": "api"}
    assert event_ingest(brand=free_brand, payload=event(purchase_amount_minor=8_000, **purchase)).outcome == "rewarded"
    # when a 5.00 cashback arrives with 2.00 left: refused, but 1.00 rewards still fit
    big = event_ingest(brand=free_brand, payload=event(purchase_amount_minor=5_000, **purchase))
    assert (big.outcome, big.reason) == ("rejected", "budget_exhausted")
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.ACTIVE
    assert event_ingest(brand=free_brand, payload=event(purchase_amount_minor=1_500, **purchase)).outcome == "rewarded"


def test_request_hash_is_the_one_stored_events_were_hashed_with():
    """Replays compare against hashes stored by earlier releases: the hash of a payload must not
    change. Reference: sha256 of the JSON of ``dataclasses.asdict`` with ``occurred_at`` ISO."""
    import hashlib
    import json
    from dataclasses import asdict
    from datetime import UTC, datetime

    from campaigns.services.ingest import _request_hash

    def reference(payload):
        data = asdict(payload)
        data["occurred_at"] = payload.occurred_at.isoformat() if payload.occurred_at else None
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()

    payloads = [
        event(evidence={"post": {"tags": ["#joy", {"at": datetime(2026, 5, 1, tzinfo=UTC)}]}, "note": "é"}),
        event(type="purchase", purchase_amount_minor=1999, occurred_at=datetime(2026, 6, 1, 12, tzinfo=UTC)),
        event(),
    ]
    assert [_request_hash(p) for p in payloads] == [reference(p) for p in payloads]
