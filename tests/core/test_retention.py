"""Retention (issue 18): each kind of personal data past its period is pseudonymised or deleted by
``retention_purge`` — exactly the rows past it; a dry run changes nothing and says how many; the
books and the audit chain still verify; ledger, rewards and payout amounts are never touched."""

from datetime import timedelta
from uuid import uuid4

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule, Task

from campaigns.models import Reward, TriggerEvent
from campaigns.services import event_ingest
from core.audit import audit_verify
from core.models import IdempotencyRecord, InboundWebhook
from core.retention import retention_purge
from payouts.models import Payout
from recipients.services import person_erase
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.payouts.payout_fixtures import debtor, sandbox  # noqa: F401 - fixtures
from tests.portal.conftest import brand_a, campaign_a, fake_tiktok  # noqa: F401 - fixtures
from tests.recipients.test_erasure_scan import NAME, giulia  # noqa: F401 - fixture

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=False)]

NOTHING = {
    "trigger_events": 0,
    "inbound_webhooks": 0,
    "task_records": 0,
    "idempotency_records": 0,
    "payout_names": 0,
    "marketing_consent_proofs": 0,
    "marketing_consent_unconfirmed_proofs": 0,
    "webhook_deliveries": 0,
    "webhook_events": 0,
    "notice_deliveries": 0,
    "notices": 0,
}


def task(stopped) -> Task:
    return Task.objects.create(
        id=uuid4().hex, name=uuid4().hex, func="x.y", started=stopped, stopped=stopped, success=True, result="ok"
    )


def idempotency(brand, created) -> IdempotencyRecord:
    return IdempotencyRecord.objects.create(
        brand=brand, key=uuid4().hex, method="POST", path="/api/v1/events", request_hash="0" * 64,
        created_at=created, expires_at=created + timedelta(hours=24),
    )  # fmt: skip


@pytest.fixture
def aged(giulia, brand_a):  # noqa: F811
    """Giulia's data with one row of each kind just past its period and one just before it."""
    now = timezone.now()
    old_event, new_event = (
        TriggerEvent.objects.filter(reward__isnull=False)
        .exclude(email="", whatsapp="", social_uid="")
        .order_by("id")[:2]
    )
    TriggerEvent.objects.filter(pk=old_event.pk).update(received_at=now - timedelta(days=401))
    TriggerEvent.objects.filter(pk=new_event.pk).update(received_at=now - timedelta(days=399))
    webhook = InboundWebhook.objects.get()
    InboundWebhook.objects.filter(pk=webhook.pk).update(received_at=now - timedelta(days=31))
    old_task, new_task = task(now - timedelta(days=31)), task(now - timedelta(days=29))
    old_key, new_key = idempotency(brand_a, now - timedelta(days=8)), idempotency(brand_a, now - timedelta(days=6))
    return {
        "now": now,
        "old_event": old_event.pk,
        "new_event": new_event.pk,
        "webhook": webhook.pk,
        "tasks": (old_task.pk, new_task.pk),
        "keys": (old_key.pk, new_key.pk),
    }


def personal(event_id: int) -> list:
    """The personal fields of a trigger event that hold something."""
    fields = ("email", "whatsapp", "social_uid", "ip", "device_fingerprint", "evidence")
    return [v for v in TriggerEvent.objects.filter(pk=event_id).values_list(*fields).get() if v]


def snapshot() -> dict:
    return {
        "events": list(TriggerEvent.objects.order_by("id").values()),
        "webhooks": list(InboundWebhook.objects.order_by("id").values_list("id", "body", "headers")),
        "tasks": sorted(Task.objects.values_list("id", flat=True)),
        "keys": sorted(IdempotencyRecord.objects.values_list("id", flat=True)),
        "rewards": list(Reward.objects.order_by("id").values()),
        "payouts": list(Payout.objects.order_by("id").values()),
    }


def test_a_dry_run_counts_the_rows_past_their_period_and_changes_nothing(aged):
    before = snapshot()

    report = retention_purge(now=aged["now"], dry_run=True)

    assert report.counts == {**NOTHING, "trigger_events": 1, "inbound_webhooks": 1, "task_records": 1,
                             "idempotency_records": 1}  # fmt: skip
    assert snapshot() == before


def test_the_purge_touches_exactly_the_rows_past_their_period(aged):
    before = snapshot()

    report = retention_purge(now=aged["now"], dry_run=False)

    assert report.counts == {**NOTHING, "trigger_events": 1, "inbound_webhooks": 1, "task_records": 1,
                             "idempotency_records": 1}  # fmt: skip
    assert personal(aged["old_event"]) == []
    old = TriggerEvent.objects.get(pk=aged["old_event"])
    assert old.type and old.external_id and old.outcome  # the row stays: its reward points at it
    assert personal(aged["new_event"])
    webhook = InboundWebhook.objects.get(pk=aged["webhook"])
    assert bytes(webhook.body) == b"" and webhook.headers == {} and webhook.dedupe_key
    assert sorted(Task.objects.filter(pk__in=aged["tasks"]).values_list("pk", flat=True)) == [aged["tasks"][1]]
    assert list(IdempotencyRecord.objects.filter(pk__in=aged["keys"]).values_list("pk", flat=True)) == [aged["keys"][1]]
    after = snapshot()
    assert after["rewards"] == before["rewards"] and after["payouts"] == before["payouts"]
    assert [e for e in after["events"] if e["id"] != aged["old_event"]] == [
        e for e in before["events"] if e["id"] != aged["old_event"]
    ]
    assert ledger_verify_report().ok
    assert audit_verify().ok
    assert retention_purge(now=aged["now"], dry_run=False).counts == NOTHING  # idempotent


def test_an_event_whose_reward_is_still_held_keeps_its_evidence(aged, brand_a):  # noqa: F811
    funded_campaign(
        brand=brand_a, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 200, "hold_days": 14}],
        slug="held",
    )  # fmt: skip
    event_ingest(brand=brand_a, payload=event(campaign="held", email="held@example.com", evidence={"k": "v"}))
    held = TriggerEvent.objects.get(email="held@example.com")
    assert held.reward.status == "held"
    TriggerEvent.objects.filter(pk=held.pk).update(received_at=aged["now"] - timedelta(days=401))

    assert retention_purge(now=aged["now"], dry_run=False).counts["trigger_events"] == 1  # only Giulia's old one
    assert TriggerEvent.objects.get(pk=held.pk).email == "held@example.com"


def test_kept_payout_names_of_an_erased_person_are_blanked_once_older(giulia, settings):  # noqa: F811
    person, _, _ = giulia
    settings.PRIVACY_PAYOUT_NAME_KEEP_DAYS = 30
    person_erase(person=person)
    assert set(Payout.objects.values_list("creditor_name", flat=True)) == {NAME}  # young: kept by erasure
    old, *young = Payout.objects.order_by("id")
    Payout.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    amounts = list(Payout.objects.order_by("id").values_list("amount_minor", "currency", "status"))

    report = retention_purge(now=timezone.now(), dry_run=False)

    assert report.counts["payout_names"] == 1
    old.refresh_from_db()
    assert old.creditor_name == "(erased)" and old.creditor_iban_masked.endswith("***")
    assert all(p.creditor_name == NAME for p in Payout.objects.filter(pk__in=[p.pk for p in young]))
    assert list(Payout.objects.order_by("id").values_list("amount_minor", "currency", "status")) == amounts
    assert ledger_verify_report().ok and audit_verify().ok


def test_the_command_prints_per_kind_what_a_dry_run_would_touch(aged, capsys):
    call_command("retention_purge", "--dry-run")

    out = capsys.readouterr().out
    assert "trigger_events: would touch 1 rows" in out and "task_records: would touch 1 rows" in out
    assert "Dry run: nothing changed" in out
    assert personal(aged["old_event"])

    call_command("retention_purge")

    assert "trigger_events: touched 1 rows" in capsys.readouterr().out
    assert not personal(aged["old_event"])


def test_the_purge_runs_daily():
    schedule = Schedule.objects.get(name="core.retention_purge")
    assert (schedule.func, schedule.schedule_type) == ("core.tasks.retention_purge_task", Schedule.DAILY)
