"""The webhook collector's cursor on PostgreSQL: a row whose transaction commits after rows with
higher ids were collected is still sent, however many rows were written in between, and the
cursor never passes an id a running transaction may still commit."""

import logging
import threading
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone

from campaigns.models import RewardEvent, WebhookCursor, WebhookEvent
from campaigns.webhooks import CURSOR_STUCK_AFTER, webhook_endpoint_create, webhook_events_collect
from core.bulk import rows_insert
from tests.api.conftest import ingest

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class _OpenWriter:
    """Another connection that writes one audit row and keeps its transaction open until told."""

    def __init__(self, reward):
        self.reward = reward
        self.row_id: int | None = None
        self.written = threading.Event()
        self.release = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            with transaction.atomic():
                row = RewardEvent.objects.create(
                    reward=self.reward, kind="reward.voided", from_status="held", to_status="voided",
                    created_at=timezone.now(),
                )  # fmt: skip
                self.row_id = row.pk
                self.written.set()
                self.release.wait(timeout=30)
        finally:
            connection.close()

    def __enter__(self):
        self.thread.start()
        assert self.written.wait(timeout=30)
        return self

    def commit(self) -> None:
        self.release.set()
        self.thread.join(timeout=30)

    def __exit__(self, *exc):
        self.commit()


def _later_rows(reward, n: int) -> None:
    """``n`` committed audit rows with ids above the open writer's, of a kind no webhook is for
    (so the test measures the cursor, not thousands of deliveries)."""
    now = timezone.now()
    rows = [RewardEvent(reward=reward, kind="reward.review", to_status="review", created_at=now) for _ in range(n)]
    rows_insert(RewardEvent, rows, keys=False)


def test_a_row_committed_after_thousands_of_later_ones_is_still_sent(brand, campaign, receiver):
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held", "reward.voided"])
    reward = ingest(campaign).reward
    with _OpenWriter(reward) as writer:
        _later_rows(reward, 3_000)  # more than any fixed look-back window would keep
        ingest(campaign)
        for _ in range(3):  # the kicks and ticks of a busy second
            webhook_events_collect()
        assert WebhookCursor.objects.get(source="reward_event").last_id < writer.row_id
        assert not WebhookEvent.objects.filter(type="reward.voided").exists()
    webhook_events_collect()
    voided = WebhookEvent.objects.get(type="reward.voided")
    assert voided.source == f"reward_event:{writer.row_id}"
    assert WebhookEvent.objects.filter(type="reward.held").count() == 2


def test_the_cursor_catches_up_once_no_writer_is_running(brand, campaign, receiver):
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    for _ in range(3):
        ingest(campaign)
    webhook_events_collect()  # reads the rows; their snapshot becomes the pending one
    webhook_events_collect()  # every writer of that snapshot has ended: final
    top = RewardEvent.objects.order_by("-id").values_list("id", flat=True).first()
    assert WebhookCursor.objects.get(source="reward_event").last_id == top
    assert WebhookEvent.objects.filter(type="reward.held").count() == 3


def test_a_transaction_in_another_database_does_not_hold_the_cursor_back(brand, campaign, receiver):
    # given a transaction with an xid left open in another database of the same server
    settings = connection.settings_dict
    other = psycopg.connect(
        host=settings["HOST"], port=settings["PORT"] or 5432, user=settings["USER"], dbname="postgres"
    )
    try:
        other.execute("SELECT pg_current_xact_id()")  # an xid, as any writer there has
        webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
        ingest(campaign)
        # when two collections run
        webhook_events_collect()
        webhook_events_collect()
        # then the cursor reaches our last row: only this database's writers count
        top = RewardEvent.objects.order_by("-id").values_list("id", flat=True).first()
        assert WebhookCursor.objects.get(source="reward_event").last_id == top
    finally:
        other.rollback()
        other.close()


def test_a_writer_running_for_minutes_is_logged_and_the_cursor_moves_on(brand, campaign, receiver, caplog):
    webhook_endpoint_create(brand=brand, url=receiver.url, event_types=["reward.held"])
    reward = ingest(campaign).reward
    with _OpenWriter(reward) as writer:
        _later_rows(reward, 5)
        webhook_events_collect()
        top = WebhookCursor.objects.get(source="reward_event").pending_top
        assert top > writer.row_id
        with caplog.at_level(logging.ERROR, logger="campaigns.webhooks"):
            webhook_events_collect(now=timezone.now() + CURSOR_STUCK_AFTER + timedelta(seconds=1))
        assert WebhookCursor.objects.get(source="reward_event").last_id == top
        assert "still had writers running" in caplog.text


@pytest.mark.parametrize(
    "table", ["campaigns_rewardevent", "campaigns_campaignevent", "payouts_payoutevent", "reconciliation_journalentry"]
)
def test_an_insert_into_an_outbox_table_takes_an_xid_before_any_row(table):
    """The trigger's point: the statement has its transaction's xid before it draws a row's id.
    An INSERT of no rows shows it — without the trigger nothing in it would assign one."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} SELECT * FROM {table} WHERE false")  # noqa: S608 - fixed names
        cursor.execute("SELECT pg_current_xact_id_if_assigned()")
        (xid,) = cursor.fetchone()
    assert xid is not None
