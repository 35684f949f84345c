"""Set-wise ingestion decides exactly what one-by-one ingestion decides.

``event_ingest_bulk`` evaluates a chunk in memory (caps, counters, budget, velocity) and writes
it with one statement per table; ``event_ingest`` is a batch of one. The same scripted stream of
events — returning people, new people, identities that link two people (a merge), shared IBANs,
caps, a campaign-wide count, fraud signals and a budget that runs out — is sent one by one to one
brand and in bulk (small chunks, so the stream crosses chunk boundaries) to another, with the
same rules; every decision must match, in order.
"""

import random

import pytest
from django.db import IntegrityError

from campaigns.models import BudgetAlert, Campaign, Reward, RewardStatus, TriggerEvent
from campaigns.selectors import campaign_budget
from campaigns.services import EventInput, event_ingest, event_ingest_bulk, reward_void
from campaigns.services import ingest as ingest_module
from campaigns.services import ingest_batch as ingest_batch_module
from recipients.models import Person
from recipients.services import IdentityInput, person_resolve
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.factories import BrandFactory, funded_campaign, nl_iban

pytestmark = pytest.mark.django_db

RULES = [
    {
        "trigger": "tiktok_login",
        "fixed_minor": 100,
        "person_count_per_day": 2,
        "person_count_per_campaign": 3,
        "iban_count_per_campaign": 4,
        "campaign_count": 30,
    },
    {
        "trigger": "purchase",
        "amount_type": "percent",
        "percent_bps": 1000,
        "min_minor": 50,
        "max_minor": 400,
        "person_amount_per_week_minor": 700,
        "new_people_only": False,
        "verification": "partner_attested",
        "approval_policy": "review_above",
        "review_above_minor": 300,
    },
    {"trigger": "whatsapp_optin", "fixed_minor": 150, "new_people_only": True, "allowed_iban_countries": ["NL"]},
]
FRAUD = {
    "fraud_max_events_per_ip_hour": 4,
    "fraud_max_events_per_device_hour": 3,
    "fraud_max_people_per_iban": 2,
    "fraud_max_iban_claims_per_day": 3,
}


def script(seed: int, tag: str, n: int = 90) -> list[EventInput]:
    """A deterministic stream of events; ``tag`` makes the identities (and IPs) of one run
    disjoint from the other's while keeping the same linking structure."""
    rng = random.Random(seed)
    offset = 1_000 if tag == "a" else 2_000
    net = 10 if tag == "a" else 20
    events = []
    for i in range(n):
        who = rng.randrange(14)
        kind = rng.choice(["tiktok_login", "tiktok_login", "purchase", "whatsapp_optin"])
        fields = {
            "external_id": f"{tag}-{seed}-{i}",
            "campaign": "summer",
            "type": kind,
            "name": f"Person {who}",
            "email": f"p{who}.{tag}@example.com",
            "iban": nl_iban(offset + who // 2) if who < 10 else nl_iban(offset + 100 + who),
            "ip": f"10.{net}.0.{rng.randrange(6)}",
            "device_fingerprint": f"dev-{tag}-{rng.randrange(8)}",
        }
        if who >= 12:  # a German account: the WhatsApp rule refuses its country
            fields["iban"] = "DE89370400440532013000" if tag == "a" else "DE02120300000000202051"
        if rng.random() < 0.15:  # a second identity of the same human: links (and merges) people
            fields["social_provider"], fields["social_uid"] = "tiktok", f"open-{tag}-{rng.randrange(4)}"
        if kind == "purchase":
            fields["source"] = "api"
            fields["purchase_amount_minor"] = rng.choice([300, 1200, 2500, 9000])
        elif kind == "whatsapp_optin":
            fields["source"] = "whatsapp"
        else:
            fields["source"] = "tiktok"
        events.append(EventInput(**fields))
    return events


def decisions(results) -> list[tuple]:
    return [
        (
            r.outcome,
            r.reason,
            r.reward.amount_minor if r.reward else None,
            r.reward.fee_minor if r.reward else None,
            tuple(r.reward.review_reasons) if r.reward else (),
        )
        for r in results
    ]


def preregister(brand, payloads: list[EventInput]) -> None:
    """Everyone of the stream known beforehand (merges done): the chunks then take the set-wise
    path throughout instead of going one by one for identities that need writes."""
    for p in payloads:
        person_resolve(
            brand_id=brand.pk,
            identity=IdentityInput(
                name=p.name, email=p.email, iban=p.iban, social_provider=p.social_provider, social_uid=p.social_uid
            ),
            source="api",
        )


@pytest.mark.parametrize("known", [False, True], ids=["people-new", "people-known"])
@pytest.mark.parametrize("seed", [7, 11, 23])
def test_bulk_in_chunks_decides_exactly_as_one_by_one(monkeypatch, seed, known):
    # Small chunks: the stream crosses several transactions, and PostgreSQL's COPY path (≥ 8 rows) runs.
    monkeypatch.setattr(ingest_module, "BULK_CHUNK", 16)
    budget = 4_000  # runs out part-way: budget_exhausted and the automatic pause are compared too
    one = BrandFactory(fee_fixed_minor=10, fee_bps=200)
    bulk = BrandFactory(fee_fixed_minor=10, fee_bps=200)
    campaign_one = funded_campaign(brand=one, amount_minor=budget, rules=RULES, **FRAUD)
    campaign_bulk = funded_campaign(brand=bulk, amount_minor=budget, rules=RULES, **FRAUD)

    if known:
        preregister(one, script(seed, "a"))
        preregister(bulk, script(seed, "b"))
    setwise = []
    real_people = ingest_batch_module._people

    def spy(brand, items, *, simple_only):
        real_people(brand, items, simple_only=simple_only)
        setwise.append(len(items))

    monkeypatch.setattr(ingest_batch_module, "_people", spy)

    singles = [event_ingest(brand=one, payload=p) for p in script(seed, "a")]
    bulked = event_ingest_bulk(brand=bulk, payloads=script(seed, "b"))

    assert decisions(bulked) == decisions(singles)
    chunks = sorted(n for n in setwise if n > 1)  # a batch of one is how event_ingest runs
    if known:  # every chunk was decided set-wise
        assert chunks == [10] + [16] * 5
    else:  # some set-wise, the rest one event per transaction (people linked or merged in them)
        assert chunks and sum(chunks) < 90
    outcomes = {d[0] for d in decisions(singles)}
    assert {"rejected", "held", "rewarded"} & outcomes and "rejected" in outcomes  # the script exercises both
    for campaign in (campaign_one, campaign_bulk):
        campaign.refresh_from_db()
    assert campaign_bulk.status == campaign_one.status
    assert (
        campaign_budget(campaign=campaign_bulk).available_minor
        == campaign_budget(campaign=campaign_one).available_minor
    )
    held_one = Reward.objects.filter(campaign=campaign_one, status=RewardStatus.HELD).count()
    assert Reward.objects.filter(campaign=campaign_bulk, status=RewardStatus.HELD).count() == held_one
    assert ledger_verify_report().ok


def test_bulk_replayed_is_the_first_outcome_and_writes_nothing(monkeypatch):
    monkeypatch.setattr(ingest_module, "BULK_CHUNK", 16)
    brand = BrandFactory()
    campaign = funded_campaign(brand=brand, amount_minor=100_000, rules=RULES, **FRAUD)
    payloads = script(5, "a", n=40)
    first = event_ingest_bulk(brand=brand, payloads=payloads)
    counts = (Reward.objects.count(), Person.objects.count(), campaign_budget(campaign=campaign).available_minor)

    again = event_ingest_bulk(brand=brand, payloads=payloads)

    assert all(r.replayed for r in again)
    assert decisions(again) == decisions(first)
    assert (Reward.objects.count(), Person.objects.count(), campaign_budget(campaign=campaign).available_minor) == (
        counts
    )
    assert Campaign.objects.get(pk=campaign.pk).status == "active"


def test_a_replayed_bulk_call_reads_its_events_and_rewards_in_a_constant_number_of_queries(
    django_assert_max_num_queries,
):
    """A partner retrying a whole bulk call: one query for what is stored, one for the events with
    their rewards — not two per event (40 here, a thousand in a real retry)."""
    brand = BrandFactory()
    funded_campaign(brand=brand, amount_minor=100_000, rules=RULES, **FRAUD)
    payloads = script(6, "q", n=40)
    first = event_ingest_bulk(brand=brand, payloads=payloads)
    with django_assert_max_num_queries(3):
        again = event_ingest_bulk(brand=brand, payloads=payloads)
    assert all(r.replayed for r in again)
    assert [(r.event.pk, r.reward.pk if r.reward else None) for r in again] == [
        (r.event.pk, r.reward.pk if r.reward else None) for r in first
    ]


def test_a_copy_of_a_refused_event_in_the_same_call_gets_the_same_refusal():
    brand = BrandFactory()
    funded_campaign(brand=brand, amount_minor=100_000, rules=RULES, **FRAUD)
    bad = EventInput(external_id="dup-1", campaign="nope", type="tiktok_login", email="d@example.com")
    results = event_ingest_bulk(brand=brand, payloads=[bad, bad])
    assert [(r.outcome, r.reason) for r in results] == [("error", "campaign_not_found")] * 2
    assert not TriggerEvent.objects.exists()


def test_an_event_that_keeps_losing_its_race_is_answered_retry_not_nothing(monkeypatch):
    """Other callers store one of the chunk's events first, every time it runs: after the last
    retry the events not stored get a temporary failure, never no answer and never a crash."""
    brand = BrandFactory()
    funded_campaign(brand=brand, amount_minor=100_000, rules=RULES, **FRAUD)
    payloads = [_login(i) for i in range(2)]
    real_stored, tries = ingest_module.stored_events, []

    def always_lose(**kwargs):
        tries.append(1)
        raise IntegrityError("duplicate key value")

    def someone_elses(brand, external_ids):
        # Each failed run finds a stored event, though never one of these two.
        return real_stored(brand, external_ids) or ({f"other-{len(tries)}": None} if tries else {})

    monkeypatch.setattr(ingest_module, "ingest_batch", always_lose)
    monkeypatch.setattr(ingest_module, "stored_events", someone_elses)
    results = event_ingest_bulk(brand=brand, payloads=payloads)

    assert len(tries) == ingest_module._DUPLICATE_RETRIES
    assert [(r.outcome, r.reason, r.error.http_status) for r in results] == [("error", "event_contended", 503)] * 2
    assert not TriggerEvent.objects.exists()


def test_an_integrity_error_that_is_no_lost_race_is_raised_and_stores_nothing(monkeypatch):
    brand = BrandFactory()
    funded_campaign(brand=brand, amount_minor=100_000, rules=RULES, **FRAUD)

    def broken(**kwargs):
        raise IntegrityError("some other constraint")

    monkeypatch.setattr(ingest_module, "ingest_batch", broken)
    with pytest.raises(IntegrityError):
        event_ingest_bulk(brand=brand, payloads=[_login(1)])
    assert not TriggerEvent.objects.exists()


def test_a_bulk_call_that_crashes_part_way_is_retried_whole_and_pays_each_event_once(monkeypatch):
    """At least once: the caller retries the same call after a crash in its second chunk. The first
    chunk was committed and replays; the rest is taken for the first time; no event is paid twice."""
    monkeypatch.setattr(ingest_module, "BULK_CHUNK", 10)
    brand = BrandFactory()
    campaign = funded_campaign(
        brand=brand, amount_minor=100_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 100}]
    )
    payloads = [
        EventInput(
            external_id=f"crash-{i}",
            campaign="summer",
            type="tiktok_login",
            source="tiktok",
            email=f"c{i}@example.com",
            iban=nl_iban(5_000 + i),
        )
        for i in range(30)
    ]
    real, calls = ingest_module.ingest_batch, []

    def crash_on_second_chunk(**kwargs):
        calls.append(len(kwargs["items"]))
        real(**kwargs)
        if len(calls) == 2:
            raise RuntimeError("worker killed after writing, before commit")

    monkeypatch.setattr(ingest_module, "ingest_batch", crash_on_second_chunk)
    with pytest.raises(RuntimeError):
        event_ingest_bulk(brand=brand, payloads=payloads)
    assert Reward.objects.filter(campaign=campaign).count() == 10  # the first chunk only

    monkeypatch.setattr(ingest_module, "ingest_batch", real)
    again = event_ingest_bulk(brand=brand, payloads=payloads)

    assert [r.replayed for r in again] == [True] * 10 + [False] * 20
    assert {r.outcome for r in again} == {"rewarded"}
    assert Reward.objects.filter(campaign=campaign).count() == 30
    assert campaign_budget(campaign=campaign).held_minor == 30 * 100
    assert ledger_verify_report().ok


def test_a_pause_rolled_back_with_a_lost_race_does_not_refuse_the_retried_events(monkeypatch):
    # given a budget for two rewards, and a chunk that loses a duplicate race once — after its
    # evaluation had auto-paused the campaign in that (rolled back) transaction
    brand = BrandFactory()
    campaign = funded_campaign(brand=brand, amount_minor=250, rules=[{"trigger": "tiktok_login", "fixed_minor": 100}])
    real, calls = ingest_module.ingest_batch, []

    def lose_a_race_once(**kwargs):
        calls.append(1)
        real(**kwargs)
        if len(calls) == 1:
            raise IntegrityError('duplicate key value violates unique constraint "trigger_event_external_id_unique"')

    real_stored = ingest_module.stored_events

    def third_taken_once(brand, external_ids):
        # The lost race: after the first run another caller has stored the third event.
        found = real_stored(brand, external_ids)
        if len(calls) == 1 and "login-2" in external_ids:
            calls.append(1)
            return {**found, "login-2": None}
        return found

    monkeypatch.setattr(ingest_module, "ingest_batch", lose_a_race_once)
    monkeypatch.setattr(ingest_module, "stored_events", third_taken_once)
    results = event_ingest_bulk(brand=brand, payloads=[_login(i) for i in range(3)])

    # then the retry decides afresh: the two left are rewarded, though the rolled-back run had
    # paused the campaign (the budget pays two); the third, stored by "someone else", is a retry
    assert [(r.outcome, r.reason) for r in results] == [
        ("rewarded", ""),
        ("rewarded", ""),
        ("error", "event_contended"),
    ]
    assert Reward.objects.filter(campaign=campaign).count() == 2
    assert Campaign.objects.get(pk=campaign.pk).status == "paused"


def test_events_after_a_pause_inside_one_batch_are_refused_as_one_by_one():
    rules = [{"trigger": "tiktok_login", "fixed_minor": 100, "person_count_per_campaign": 1}]
    decided = []
    for bulk in (False, True):
        brand = BrandFactory()
        funded_campaign(brand=brand, amount_minor=300, rules=rules)
        tag = "bulk" if bulk else "single"
        # three people spend the budget (the campaign pauses), then the first comes back, then a newcomer
        stream = [_login(n, email=f"{tag}{who}@example.com") for n, who in enumerate((0, 1, 2, 0, 3))]
        results = (
            event_ingest_bulk(brand=brand, payloads=stream)
            if bulk
            else [event_ingest(brand=brand, payload=p) for p in stream]
        )
        decided.append([(str(r.outcome), r.reason) for r in results])
    assert decided[0] == decided[1]
    assert decided[1][3:] == [("rejected", "campaign_not_active")] * 2


@pytest.mark.parametrize("bulk", [False, True])
def test_crossing_a_budget_threshold_again_after_a_void_is_no_new_alert_and_no_error(bulk):
    brand = BrandFactory()
    campaign = funded_campaign(brand=brand, amount_minor=1_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 100}])
    for i in range(5):
        assert event_ingest(brand=brand, payload=_login(i)).outcome == "rewarded"  # 50 % spent
    reward_void(reward=Reward.objects.order_by("-id").first(), reason="refund")  # back under 50 %
    again = [_login(10), _login(11)]
    outcomes = (
        [r.outcome for r in event_ingest_bulk(brand=brand, payloads=again)]
        if bulk
        else [event_ingest(brand=brand, payload=p).outcome for p in again]
    )
    assert outcomes == ["rewarded", "rewarded"]
    assert BudgetAlert.objects.filter(campaign=campaign, threshold_pct=50).count() == 1


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ({"purchase_currency": "EURO"}, "unknown_currency"),
        ({"ip": "not-an-ip"}, "invalid_ip"),
        ({"device_fingerprint": "x" * 129}, "invalid_field"),
        ({"custom_name": "y" * 61}, "invalid_field"),
        ({"order_id": "z" * 121}, "invalid_field"),
    ],
)
def test_one_bad_field_in_a_bulk_is_that_events_error_only(bad, code):
    brand = BrandFactory()
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 100}])
    results = event_ingest_bulk(brand=brand, payloads=[_login(1), _login(2, **bad), _login(3)])
    assert [(r.outcome, r.reason) for r in results] == [("rewarded", ""), ("error", code), ("rewarded", "")]
    assert TriggerEvent.objects.filter(brand=brand).count() == 2


def _login(n: int, **fields) -> EventInput:
    fields.setdefault("email", f"login{n}@example.com")
    return EventInput(external_id=f"login-{n}", campaign="summer", type="tiktok_login", source="tiktok", **fields)
