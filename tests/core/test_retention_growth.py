"""Retention of the rows that grow with every event but are not the books (issue 30): outbound
webhook events and deliveries, notices and their deliveries. Old rows go; recent ones, and those
still needed (a delivery that may still be sent, a notice being delivered or about an open reward),
stay. Deletion goes in batches under a time budget and carries on in the next run; the books and
the audit chains are never among what it deletes."""

from datetime import timedelta
from itertools import count
from unittest import mock

import pytest
from django.utils import timezone

from campaigns.models import Reward, WebhookDelivery, WebhookEndpoint, WebhookEvent
from campaigns.services import event_ingest, reward_void
from core.audit import audit_verify
from core.audit_sql import audited_tables
from core.personal_data import DELETE, personal_data
from core.retention import retention_purge
from core.tasks import retention_purge_task
from recipients.models_notices import Notice, NoticeDelivery
from reconciliation.models import Account, Hold, JournalEntry, Posting
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=False)]

_n = count(1)
DAY = timedelta(days=1)


@pytest.fixture
def endpoint(db):
    brand = BrandFactory(slug="growth")
    return WebhookEndpoint.objects.create(brand=brand, url="https://hooks.example/in", secret_ciphertext="x")


def webhook_event(endpoint, *, age: timedelta, statuses: list[str]) -> WebhookEvent:
    """An event created ``age`` ago with one delivery per status (each to an endpoint of its own)."""
    now = timezone.now()
    created = now - age
    n = next(_n)
    ev = WebhookEvent.objects.create(
        public_id=f"evt_{n}", brand=endpoint.brand, type="reward.held", source=f"reward_event:{n}", created_at=created
    )
    for i, status in enumerate(statuses):
        target = endpoint if i == 0 else WebhookEndpoint.objects.create(
            brand=endpoint.brand, url=f"https://hooks.example/{n}/{i}", secret_ciphertext="x"
        )  # fmt: skip
        WebhookDelivery.objects.create(
            event=ev, endpoint=target, status=status, created_at=created, attempt=1,
            next_attempt_at=now if status == "pending" else None,
            claimed_at=now if status == "sending" else None,
            delivered_at=created if status == "delivered" else None,
        )  # fmt: skip
    return ev


def test_final_deliveries_and_their_events_go_once_past_their_period_and_nothing_that_may_still_be_sent(endpoint):
    old, young = 31 * DAY, 29 * DAY
    gone = webhook_event(endpoint, age=old, statuses=["delivered", "failed"])
    waiting = webhook_event(endpoint, age=old, statuses=["delivered", "pending"])
    sending = webhook_event(endpoint, age=old, statuses=["sending"])
    recent = webhook_event(endpoint, age=young, statuses=["delivered"])

    report = retention_purge(now=timezone.now(), dry_run=False)

    assert report.done
    assert (report.counts["webhook_deliveries"], report.counts["webhook_events"]) == (3, 1)
    assert set(WebhookEvent.objects.values_list("pk", flat=True)) == {waiting.pk, sending.pk, recent.pk}
    kept = WebhookDelivery.objects.values_list("event_id", "status")
    assert sorted(kept) == sorted([(waiting.pk, "pending"), (sending.pk, "sending"), (recent.pk, "delivered")])
    assert not WebhookDelivery.objects.filter(event_id=gone.pk).exists()
    # idempotent: a second run finds nothing
    again = retention_purge(now=timezone.now(), dry_run=False)
    assert (again.counts["webhook_deliveries"], again.counts["webhook_events"]) == (0, 0)


def test_an_event_kept_longer_than_its_deliveries_keeps_its_row(endpoint, settings):
    settings.RETENTION_WEBHOOK_EVENTS_DAYS = 90
    ev = webhook_event(endpoint, age=31 * DAY, statuses=["delivered"])

    report = retention_purge(now=timezone.now(), dry_run=False)

    assert (report.counts["webhook_deliveries"], report.counts["webhook_events"]) == (1, 0)
    assert WebhookEvent.objects.filter(pk=ev.pk).exists() and not ev.deliveries.exists()


def test_a_dry_run_counts_and_deletes_nothing(endpoint):
    webhook_event(endpoint, age=31 * DAY, statuses=["delivered"])

    report = retention_purge(now=timezone.now(), dry_run=True)

    assert (report.counts["webhook_deliveries"], report.counts["webhook_events"]) == (1, 1)
    assert WebhookDelivery.objects.count() == 1 and WebhookEvent.objects.count() == 1


@pytest.fixture
def rewards(db):
    """A held (open) reward and a voided (closed) one of the same person."""
    brand = BrandFactory(slug="notices")
    funded_campaign(
        brand=brand, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 200, "hold_days": 14}],
        slug="summer",
    )  # fmt: skip
    event_ingest(brand=brand, payload=event(email="open@example.com"))
    event_ingest(brand=brand, payload=event(email="open@example.com"))
    held, closed = Reward.objects.order_by("id")
    assert held.status == closed.status == "held"
    closed = reward_void(reward=closed, reason="refunded")
    return held, closed


def notice(reward, *, done_ago: timedelta | None, channels=("email",), about_reward=True) -> Notice:
    """A notice to ``reward``'s person (about it unless told otherwise), done ``done_ago`` (None:
    still being delivered), one delivery per channel."""
    now = timezone.now()
    created = now - (done_ago or DAY) - DAY
    row = Notice.objects.create(
        key=f"test:{next(_n)}", person_id=reward.person_id, kind="iban_needed" if about_reward else "account_changed",
        reward=reward if about_reward else None,
        status="pending" if done_ago is None else "done", next_attempt_at=created, created_at=created,
        done_at=None if done_ago is None else now - done_ago,
    )  # fmt: skip
    for channel in channels:
        NoticeDelivery.objects.create(
            notice=row, channel=channel, status="queued" if done_ago is None else "sent", attempts=1,
            next_attempt_at=now if done_ago is None else None, sent_at=None if done_ago is None else now - done_ago,
        )  # fmt: skip
    return row


def test_done_notices_go_with_their_deliveries_once_past_their_period_unless_still_needed(rewards):
    held, closed = rewards
    Notice.objects.all().delete()  # only this test's notices
    gone = notice(closed, done_ago=181 * DAY, channels=("email", "whatsapp"))
    gone_too = notice(held, done_ago=181 * DAY, about_reward=False)  # about nothing still open
    about_open_reward = notice(held, done_ago=181 * DAY)
    still_pending = notice(closed, done_ago=None)
    recent = notice(closed, done_ago=179 * DAY)

    report = retention_purge(now=timezone.now(), dry_run=False)

    assert (report.counts["notice_deliveries"], report.counts["notices"]) == (3, 2)
    assert set(Notice.objects.values_list("pk", flat=True)) == {about_open_reward.pk, still_pending.pk, recent.pk}
    assert not NoticeDelivery.objects.filter(notice_id__in=(gone.pk, gone_too.pk)).exists()
    assert NoticeDelivery.objects.count() == 3
    assert (ledger_verify_report().ok, audit_verify().ok) == (True, True)


def clock_by_deliveries_deleted() -> float:
    """A clock that moves a second per delivery deleted (of five): time passes only with work."""
    return float(5 - WebhookDelivery.objects.count())


def test_the_purge_stops_at_its_budget_and_the_next_run_carries_on(endpoint, settings):
    settings.RETENTION_BATCH_SIZE = 2
    for _ in range(5):
        webhook_event(endpoint, age=31 * DAY, statuses=["delivered"])

    with mock.patch("core.retention.time.monotonic", side_effect=clock_by_deliveries_deleted):
        first = retention_purge(now=timezone.now(), dry_run=False, max_seconds=2.5)

    # two batches of two (the clock then reads 4 s): the third is left to the next run
    assert first.counts["webhook_deliveries"] == 4 and not first.done
    assert first.unfinished[0] == "webhook_deliveries" and "webhook_events" in first.unfinished
    assert WebhookDelivery.objects.count() == 1 and WebhookEvent.objects.count() == 5

    second = retention_purge(now=timezone.now(), dry_run=False, max_seconds=0)

    assert second.done and (second.counts["webhook_deliveries"], second.counts["webhook_events"]) == (1, 5)
    assert not WebhookEvent.objects.exists()


def test_the_daily_task_hands_what_its_budget_left_to_a_follow_up_run(
    endpoint, settings, django_capture_on_commit_callbacks
):
    settings.RETENTION_BATCH_SIZE = 2
    settings.RETENTION_MAX_SECONDS = 2.5
    for _ in range(5):
        webhook_event(endpoint, age=31 * DAY, statuses=["delivered"])

    # tasks run inline in tests: the follow-up runs once the enqueue "commits"
    with (
        mock.patch("core.retention.time.monotonic", side_effect=clock_by_deliveries_deleted),
        django_capture_on_commit_callbacks(execute=True) as follow_ups,
    ):
        result = retention_purge_task()

    assert "unfinished" in result and len(follow_ups) == 1
    assert not WebhookDelivery.objects.exists() and not WebhookEvent.objects.exists()


def test_the_books_and_the_audit_chains_are_never_deleted():
    audit = {spec.table for spec in audited_tables()}
    books = {m._meta.db_table for m in (Account, JournalEntry, Posting, Hold)}
    deleted = {e.model._meta.db_table for e in personal_data() if e.retention and e.retention.purge == DELETE}
    assert audit and deleted
    assert not deleted & (audit | books)
