"""Collect webhook events soon after the audit rows are committed, not only every minute.

``webhook_events_collect`` runs every minute (``campaigns.webhooks_tick``): that stays the safety
net, and it alone guarantees at-least-once. On top of it, every service that writes a row a
webhook is made of (reward, campaign and payout events, top-up entries) fires the
``AUDIT_ROWS_WRITTEN`` domain hook (``core.hooks``), and ``audit_rows_written`` enqueues a
collection right after that transaction commits — once per transaction, however many rows it
wrote. A shorter django-q2 schedule was no option: its intervals are whole minutes.

``collect_kick`` is debounced per process so a busy ingest does not enqueue a task per
transaction: at most one collection every ``KICK_INTERVAL_SECONDS``; a commit inside that window
arms a single timer that enqueues one more at the window's end, so every committed row is followed
by a collection that starts after it. Across processes, ``webhook_collect_enqueue`` keeps at most
one collection in the queue (a conditional UPDATE of the cursors' ``queued_at``; the collection
clears it when it starts, so a commit after that start still gets one of its own). Duplicate events
are impossible either way: a collection emits an audit row at most once (``WebhookEvent.source``
is unique per brand), however many run at once. Off when ``WEBHOOK_COLLECT_ON_COMMIT`` is false
(the tests, where tasks run inline).
"""

import logging
import threading
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from campaigns.models import WebhookCursor
from core.queue import enqueue

logger = logging.getLogger(__name__)

KICK_INTERVAL_SECONDS = 1.0
COLLECT_TASK = "campaigns.webhook_tasks.webhook_collect_task"
# A queued collection that has not started after this long counts as lost (failed enqueue).
COLLECT_QUEUED_STALE_AFTER = timedelta(minutes=2)

_lock = threading.Lock()
_last_kick = float("-inf")
_trailing: threading.Timer | None = None


def collect_kick() -> None:
    """Enqueue a collection now, or once the debounce window ends (see the module docstring)."""
    global _last_kick, _trailing
    with _lock:
        now = time.monotonic()
        wait = _last_kick + KICK_INTERVAL_SECONDS - now
        if wait <= 0:
            _last_kick = now
        elif _trailing is None:
            _trailing = threading.Timer(wait, _trailing_kick)
            _trailing.daemon = True
            _trailing.start()
            return
        else:
            return
    webhook_collect_enqueue()


def webhook_collect_enqueue(*, now: datetime | None = None) -> bool:
    """Enqueue a collection unless one is queued already and not for longer than
    ``COLLECT_QUEUED_STALE_AFTER``: a conditional UPDATE of the cursors' ``queued_at`` decides,
    so kicks of every process, a collection's continuation and the tick never put a second copy
    in the queue. The collection clears it when it starts. Returns whether it enqueued."""
    now = now or timezone.now()
    # Its own transaction: the claim and the task commit together (core.queue).
    with transaction.atomic():
        claimed = WebhookCursor.objects.filter(
            Q(queued_at__isnull=True) | Q(queued_at__lt=now - COLLECT_QUEUED_STALE_AFTER)
        ).update(queued_at=now)
        if claimed:
            enqueue(COLLECT_TASK)
    return bool(claimed)


def _trailing_kick() -> None:
    global _last_kick, _trailing
    with _lock:
        _trailing, _last_kick = None, time.monotonic()
    try:
        webhook_collect_enqueue()
    except Exception:  # a lost kick costs only time: the minute tick collects the rows
        logger.exception("could not enqueue the webhook collection")
    finally:
        # This thread opened its own connection for the broker's insert: close it, not leak it.
        connections.close_all()


def audit_rows_written(values: list) -> None:
    """``core.hooks.AUDIT_ROWS_WRITTEN``: a transaction that wrote webhook source rows committed."""
    if settings.WEBHOOK_COLLECT_ON_COMMIT:
        collect_kick()
