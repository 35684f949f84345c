"""Real concurrency on PostgreSQL: the budget and the caps hold under parallel ingestion."""

import threading

import pytest
from django.db import connection
from django.db.models import Count

from campaigns.models import CampaignStatus, Reward, RewardStatus, TriggerEvent
from campaigns.selectors import campaign_budget
from campaigns.services import event_ingest
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign, nl_iban

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _run_in_threads(n_threads: int, work) -> list[Exception]:
    errors: list[Exception] = []
    barrier = threading.Barrier(n_threads)

    def runner(idx: int) -> None:
        try:
            barrier.wait()
            work(idx)
        except Exception as exc:  # noqa: BLE001 - collected and asserted on by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_eight_threads_1000_events_budget_for_600():
    # given a budget of exactly 600 rewards of 5.00 + 0.20 fee, one reward per person and per IBAN
    brand = BrandFactory(name="Race", slug="race", fee_fixed_minor=10, fee_bps=200)
    campaign = funded_campaign(
        brand=brand,
        amount_minor=600 * 520,
        rules=[
            {
                "trigger": "tiktok_login",
                "fixed_minor": 500,
                "person_count_per_campaign": 1,
                "iban_count_per_campaign": 1,
            }
        ],
    )
    payloads = [event(email=f"p{i}@example.com", iban=nl_iban(i)) for i in range(1000)]
    outcomes: list[str] = []

    def work(idx: int) -> None:
        for payload in payloads[idx::8]:
            outcomes.append(event_ingest(brand=brand, payload=payload).outcome)

    # when 8 threads ingest 1,000 distinct people at once
    errors = _run_in_threads(8, work)

    # then exactly 600 are held, nothing is left, the campaign paused itself
    assert errors == []
    assert len(outcomes) == 1000
    assert Reward.objects.filter(status=RewardStatus.HELD).count() == 600
    assert outcomes.count("rewarded") == 600 and outcomes.count("rejected") == 400
    assert TriggerEvent.objects.count() == 1000
    budget = campaign_budget(campaign=campaign)
    assert (budget.available_minor, budget.held_minor) == (0, 600 * 520)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    # no cap exceeded: one reward per person and per IBAN
    assert not Reward.objects.values("person").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert not Reward.objects.values("iban_fingerprint").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert ledger_verify_report().ok


def test_one_person_from_many_threads_gets_the_cap_exactly():
    # given one reward per person per campaign
    brand = BrandFactory(name="Race2", slug="race2")
    funded_campaign(
        brand=brand,
        amount_minor=100_000,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 500, "person_count_per_campaign": 2}],
    )
    # when the same person (one IBAN, different emails: all linked) sends 16 events at once
    payloads = [event(email=f"ada{i}@example.com", iban=nl_iban(42)) for i in range(16)]

    def work(idx: int) -> None:
        for payload in payloads[idx::8]:
            event_ingest(brand=brand, payload=payload)

    errors = _run_in_threads(8, work)
    # then exactly two rewards exist
    assert errors == []
    assert Reward.objects.count() == 2
    assert TriggerEvent.objects.filter(reason="cap_person_campaign_count").count() == 14
    assert ledger_verify_report().ok


def test_a_person_without_an_iban_from_many_threads_gets_the_cap_exactly():
    # given one e-mail, no IBAN (so no IBAN lock serialises them): only the person's row lock can
    brand = BrandFactory(name="Race4", slug="race4")
    funded_campaign(
        brand=brand,
        amount_minor=100_000,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 500, "person_count_per_campaign": 2}],
    )
    event_ingest(brand=brand, payload=event(email="bo@example.com", external_id="first"))  # now known
    payloads = [event(email="bo@example.com") for _ in range(24)]

    def work(idx: int) -> None:
        for payload in payloads[idx::8]:
            event_ingest(brand=brand, payload=payload)

    errors = _run_in_threads(8, work)
    assert errors == []
    assert Reward.objects.count() == 2
    assert TriggerEvent.objects.filter(reason="cap_person_campaign_count").count() == 23
    assert ledger_verify_report().ok


def test_the_same_event_delivered_by_many_threads_is_one_reward():
    brand = BrandFactory(name="Race3", slug="race3")
    funded_campaign(brand=brand, amount_minor=100_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}])
    payload = event(email="ada@example.com")
    results = []

    errors = _run_in_threads(8, lambda idx: results.append(event_ingest(brand=brand, payload=payload)))
    assert errors == []
    assert Reward.objects.count() == 1
    assert {r.reward.pk for r in results} == {Reward.objects.get().pk}
    assert sum(not r.replayed for r in results) == 1
