"""Combined ingestion on PostgreSQL: concurrent single-event callers of a campaign share one
transaction (``campaigns.services.ingest_combine``). What must hold: the same outcomes as alone,
nothing lost when a caller dies after queueing, nothing applied twice, no lock left behind."""

import json
from datetime import timedelta

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from campaigns.models import IngestRequest, Reward, TriggerEvent
from campaigns.services import EventInput, event_ingest
from campaigns.services import ingest_combine as combine
from campaigns.services.ingest import event_prepare
from campaigns.services.ingest_combine import ingest_requests_sweep
from core.exceptions import IdempotencyConflict, InvalidInput, NotFound, TemporaryFailure
from recipients.crypto import decrypt
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign, nl_iban

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def brand():
    brand = BrandFactory(name="Combine", slug="combine")
    funded_campaign(brand=brand, amount_minor=100_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}])
    return brand


def _queue_only(brand, payload: EventInput) -> None:
    """What a caller that died right after queueing its event leaves behind."""
    prepared = event_prepare(payload, now=timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(*combine._enqueue_statement(brand, prepared))


def _combining_locks_held() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
            "database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = %s",
            [combine._LOCK_CLASS],
        )
        return cursor.fetchone()[0]


def test_the_path_is_taken_outside_a_transaction(brand):
    assert combine.combining_available()


def test_one_caller_ingests_everything_queued_before_it_in_one_transaction(brand, monkeypatch):
    # given three events queued by callers that died before combining them
    orphans = [event(iban=nl_iban(i)) for i in range(3)]
    for payload in orphans:
        _queue_only(brand, payload)
    assert IngestRequest.objects.filter(state="pending").count() == 3
    batches = []
    real = combine.ingest_prepared
    monkeypatch.setattr(combine, "ingest_prepared", lambda **kw: batches.append(len(kw["prepared"])) or real(**kw))

    # when a fourth caller sends its event
    result = event_ingest(brand=brand, payload=event(iban=nl_iban(9)))

    # then all four were ingested together, in arrival order, and nothing is left queued
    assert batches == [4]
    assert (result.outcome, result.replayed, result.reward.amount_minor) == ("rewarded", False, 500)
    stored = list(TriggerEvent.objects.order_by("id").values_list("external_id", flat=True))
    assert stored == [p.external_id for p in orphans] + [result.event.external_id]
    assert Reward.objects.count() == 4
    assert not IngestRequest.objects.exists()
    assert _combining_locks_held() == 0
    assert ledger_verify_report().ok


def test_a_request_whose_caller_died_is_ingested_by_the_sweep_and_replays_later(brand):
    payload = event(iban=nl_iban(1))
    _queue_only(brand, payload)
    IngestRequest.objects.update(created_at=timezone.now() - timedelta(minutes=1))

    assert ingest_requests_sweep() == 1
    assert not IngestRequest.objects.exists()
    assert TriggerEvent.objects.get().external_id == payload.external_id

    # the partner's retry of the same event is a replay: one reward
    again = event_ingest(brand=brand, payload=payload)
    assert (again.outcome, again.replayed) == ("rewarded", True)
    assert Reward.objects.count() == 1
    assert not IngestRequest.objects.exists()
    assert ingest_requests_sweep() == 0


def test_the_sweep_leaves_fresh_requests_to_their_callers(brand):
    _queue_only(brand, event())
    assert ingest_requests_sweep() == 0
    assert IngestRequest.objects.filter(state="pending").count() == 1


def test_replay_and_idempotency_conflict_behave_as_alone(brand):
    payload = event(iban=nl_iban(2))
    first = event_ingest(brand=brand, payload=payload)
    second = event_ingest(brand=brand, payload=payload)
    assert (first.replayed, second.replayed) == (False, True)
    assert first.event.pk == second.event.pk and first.reward.pk == second.reward.pk

    changed = EventInput(**{**payload.__dict__, "email": "someone.else@example.com"})
    with pytest.raises(IdempotencyConflict):
        event_ingest(brand=brand, payload=changed)
    assert TriggerEvent.objects.count() == 1 and Reward.objects.count() == 1
    assert not IngestRequest.objects.exists()
    assert _combining_locks_held() == 0


def test_a_refused_event_raises_its_error_and_stores_nothing(brand):
    # no identifier at all: person resolution, inside the combined transaction, refuses it
    bare = EventInput(external_id="bare-1", campaign="summer", type="tiktok_login", source="tiktok")
    with pytest.raises(InvalidInput) as raised:
        event_ingest(brand=brand, payload=bare)
    assert raised.value.code == "no_identifier"
    assert not TriggerEvent.objects.exists()
    assert not IngestRequest.objects.exists()
    assert _combining_locks_held() == 0
    # and the same id can be sent again, corrected
    fixed = EventInput(**{**bare.__dict__, "email": "fixed@example.com"})
    assert event_ingest(brand=brand, payload=fixed).outcome == "rewarded"


def test_an_unknown_campaign_queues_nothing(brand):
    with pytest.raises(NotFound):
        event_ingest(brand=brand, payload=event(campaign="nope"))
    assert not IngestRequest.objects.exists()
    assert _combining_locks_held() == 0


def test_a_failing_batch_falls_back_to_each_caller_alone_and_loses_nothing(brand, monkeypatch):
    # given an orphaned request and a batch path that fails for an unexpected reason
    orphan = event(iban=nl_iban(3))
    _queue_only(brand, orphan)

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(combine, "ingest_prepared", broken)

    # when a caller sends its event
    result = event_ingest(brand=brand, payload=event(iban=nl_iban(4)))

    # then its own event is ingested alone; the orphan waits, untouched, for the next combiner
    assert result.outcome == "rewarded"
    assert TriggerEvent.objects.count() == 1
    assert IngestRequest.objects.get().external_id == orphan.external_id
    assert _combining_locks_held() == 0

    # and once batches work again the sweep ingests it
    monkeypatch.undo()
    IngestRequest.objects.update(created_at=timezone.now() - timedelta(minutes=1))
    assert ingest_requests_sweep() == 1
    assert TriggerEvent.objects.count() == 2 and Reward.objects.count() == 2
    assert ledger_verify_report().ok


def test_a_caller_whose_own_event_fails_alone_withdraws_it_and_raises(brand, monkeypatch):
    monkeypatch.setattr(combine, "ingest_prepared", lambda **kw: (_ for _ in ()).throw(RuntimeError("batch")))
    monkeypatch.setattr(combine, "ingest_one", lambda **kw: (_ for _ in ()).throw(RuntimeError("alone")))
    with pytest.raises(RuntimeError, match="alone"):
        event_ingest(brand=brand, payload=event())
    assert not IngestRequest.objects.exists()
    assert not TriggerEvent.objects.exists()
    assert _combining_locks_held() == 0


def _own_combining_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
            "database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = %s AND pid = pg_backend_pid()",
            [combine._LOCK_CLASS],
        )
        return cursor.fetchone()[0]


@pytest.mark.parametrize("via", ["caller", "sweep"])
def test_a_hook_recycling_connections_mid_batch_does_not_drop_the_lock(brand, monkeypatch, via):
    # django-q2's enqueue, run by on-commit hooks, calls close_old_connections(); with
    # CONN_MAX_AGE=0 that closes the connection — and with it the session lock — unless pinned
    held_during_batch = []
    real = combine.ingest_prepared

    def batch_then_recycle(**kwargs):
        real(**kwargs)
        close_old_connections()
        held_during_batch.append(_own_combining_locks())

    monkeypatch.setattr(combine, "ingest_prepared", batch_then_recycle)
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    if via == "caller":
        event_ingest(brand=brand, payload=event())
    else:
        _queue_only(brand, event())
        IngestRequest.objects.update(created_at=timezone.now() - timedelta(minutes=1))
        assert ingest_requests_sweep() == 1
    assert held_during_batch == [1]
    assert _combining_locks_held() == 0


def test_a_queued_request_keeps_everything_prepared_including_the_normalised_iban(brand):
    """The combiner works from the queued JSON: what it loads is what the caller prepared —
    the IBAN already validated and normalised (no second parse, no cache of clear IBANs) and the
    canonical IP."""
    payload = event(iban=" nl91 abna 0417 1643 00 ", ip="2001:DB8:0:0::0001", evidence={"video": {"id": 7}})
    prepared = event_prepare(payload, now=timezone.now())
    assert prepared.iban_info.normalised == "NL91ABNA0417164300" and prepared.ip == "2001:db8::1"
    assert combine._load(combine._dump(prepared)) == prepared


def test_a_request_queued_without_the_normalised_iban_is_still_ingested(brand):
    """Requests queued in clear JSON by the versions before sealing and before ``iban_info`` was
    kept: read as they are, the IBAN parsed again."""
    payload = event(iban=nl_iban(5))
    _queue_only(brand, payload)
    request = IngestRequest.objects.get()
    data = json.loads(decrypt(request.prepared))
    del data["iban_info"]
    IngestRequest.objects.filter(pk=request.pk).update(prepared=json.dumps(data))
    IngestRequest.objects.update(created_at=timezone.now() - combine.SWEEP_AFTER - timedelta(seconds=1))
    assert ingest_requests_sweep() == 1
    assert TriggerEvent.objects.get().iban_country == "NL"


def test_the_queued_event_is_sealed_and_dropped_once_failed(brand, monkeypatch):
    """The queue holds the person's identifiers only encrypted, and not at all once the request
    has failed: a failed row waits only for its caller to read the error."""
    payload = event(name="Ada Lovelace", email="ada@example.com", whatsapp="+31612345678", iban=nl_iban(9))
    _queue_only(brand, payload)
    with connection.cursor() as cursor:
        cursor.execute("SELECT prepared FROM campaigns_ingestrequest")
        (raw,) = cursor.fetchone()
    for clear in ("Ada Lovelace", "ada@example.com", "31612345678", nl_iban(9)):
        assert clear not in raw
    assert combine._load(raw).payload == event_prepare(payload, now=timezone.now()).payload

    monkeypatch.setattr(combine, "ingest_prepared", lambda **kw: (_ for _ in ()).throw(RuntimeError("batch")))
    monkeypatch.setattr(combine, "ingest_one", lambda **kw: (_ for _ in ()).throw(RuntimeError("alone")))
    IngestRequest.objects.update(created_at=timezone.now() - timedelta(minutes=1))
    ingest_requests_sweep()
    assert IngestRequest.objects.values_list("state", "prepared").get() == ("failed", "")


def test_an_orphan_that_keeps_failing_is_marked_failed_and_the_others_are_swept(brand, monkeypatch):
    """Callers gone, batches failing: the sweep takes the requests one by one; the one that fails
    alone too is marked failed (a partner's retry takes it over) instead of failing every later
    sweep and combiner of the campaign."""
    good, bad = event(iban=nl_iban(7)), event(iban=nl_iban(8))
    _queue_only(brand, good)
    _queue_only(brand, bad)
    IngestRequest.objects.update(created_at=timezone.now() - timedelta(minutes=1))

    def broken(**kwargs):
        raise RuntimeError("boom")

    real_one = combine.ingest_one

    def one(*, item, **kwargs):
        if item.p.payload.external_id == bad.external_id:
            raise RuntimeError("still boom")
        return real_one(item=item, **kwargs)

    monkeypatch.setattr(combine, "ingest_prepared", broken)
    monkeypatch.setattr(combine, "ingest_one", one)

    assert ingest_requests_sweep() == 2
    assert list(TriggerEvent.objects.values_list("external_id", flat=True)) == [good.external_id]
    failed = IngestRequest.objects.get()
    assert (failed.external_id, failed.state, failed.error["code"]) == (bad.external_id, "failed", "ingest_failed")
    # Its caller, if still waiting, is told to send it again (503), not that the event is bad.
    with pytest.raises(TemporaryFailure) as refused:
        combine._outcome(
            brand,
            event_prepare(bad, now=timezone.now()),
            (failed.pk, "failed", json.dumps(failed.error), failed.request_hash),
            [],
            [],
            ours=True,
        )
    assert refused.value.http_status == 503
    assert _combining_locks_held() == 0
    assert ledger_verify_report().ok


def test_a_stored_event_of_other_content_is_never_reported_as_this_callers_own(brand):
    """The caller's request is gone and an event stands under its external_id, stored from another
    delivery's content (a retry that took over the request, a race its fallback lost): that is a
    conflict for this caller, not its success."""
    stored = event_ingest(brand=brand, payload=event(iban=nl_iban(11)))
    other = event_prepare(event(external_id=stored.event.external_id, iban=nl_iban(12)), now=timezone.now())
    request, events, rewards = [], [], []
    statement, parse = combine._request_and_outcome_read(brand, stored.event.external_id, request, events, rewards)
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        parse(cursor.fetchall())
    with pytest.raises(IdempotencyConflict):
        combine._outcome(brand, other, None, events, rewards, ours=True)
