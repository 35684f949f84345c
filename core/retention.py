"""Retention: personal data, and the operational rows that would otherwise grow for ever, are kept
for a documented period per kind, then pseudonymised or deleted.

What each kind is, how long it is kept and what its purge does is declared by the app that owns
the table (``core.personal_data``: a ``Retention`` on its entry); periods come from settings
(``RETENTION_*_DAYS``, ``PRIVACY_PAYOUT_NAME_KEEP_DAYS``; the README's Configuration table says why
each default is what it is). Today's kinds:

* ``trigger_events`` (``campaigns.privacy``): the personal fields (e-mail, number, social uid, IP,
  device fingerprint, evidence) of events received before the period, blanked. The row, its ids,
  type, amounts and outcome stay: rewards point at it. Events whose reward is still reserved (in
  review or held) keep their evidence until it is decided or matures.
* ``inbound_webhooks`` (``core.privacy``): raw bodies and headers of deliveries received before
  the period and no longer waiting to be processed, blanked; the row keeps its dedupe key so a
  late replay is still recognised. The row itself is never deleted: WhatsApp's and Wise's
  signatures cover the body but no time, so once its row is gone a captured delivery would verify
  and be processed again, whatever the providers' redelivery windows; a blanked row is ~150 bytes.
* ``task_records`` (``core.privacy``): finished django-q task records (successes and failures,
  whose pickled arguments and results may name people) stopped before the period, deleted.
* ``idempotency_records`` (``core.privacy``): stored API responses created before the period,
  deleted whatever their expiry (the every-minute purge deletes expired ones earlier).
* ``payout_names`` (``payouts.privacy``): creditor names of payouts of erased people that erasure
  kept because they were younger than ``PRIVACY_PAYOUT_NAME_KEEP_DAYS``, once older than that:
  blanked like erasure does, and name and IBAN pseudonymised in their transactions of stored
  pain.001 files.
* ``webhook_deliveries`` and ``webhook_events`` (``campaigns.privacy``): the outbound webhook
  outbox, deleted once older than ``RETENTION_WEBHOOK_DELIVERIES_DAYS`` / ``_EVENTS_DAYS`` — a
  delivery only once final (delivered or given up), an event only once none of its deliveries is
  still pending or being sent (its final deliveries go with it).
* ``notice_deliveries`` and ``notices`` (``payouts.privacy``): what people were told, deleted
  ``RETENTION_NOTICES_DAYS`` after the notice was done, unless its reward is still open (in review,
  held, payable: the claim-link and unclaimed-money sweeps read its notices back as "already
  told") or its payout is still on its way. Deliveries go first: a notice keeps its deliveries.

Growth, not personal data, is the reason for the last four; they are declared the same way so that
there is one purge, one schedule and one report.

Not here: a pain.001 file built but never downloaded. Its clear payees are an instruction for money
still owed, so it is not purged but expired after ``PAYOUT_BATCH_EXPIRE_DAYS`` by the payouts app's
own daily sweep (``payouts.services.batches.payout_batches_expire``), which moves money (its payouts
are paid again) and so belongs with payouts; from then on erasure pseudonymises it like a sent file.

Never touched: ledger rows, rewards, payouts' amounts, statuses and references, audit rows (their
chained columns, or their content: erasure is their only writer).
"""

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from core.personal_data import BLANK, PersonalData, personal_data

# Rows per transaction: a batch holds its row locks (and, for a delete, its cascade) for well under
# a second, so the purge never stalls the writers of the table it prunes.
DEFAULT_BATCH_SIZE = 2000
# Each run stops starting batches after this (below the task timeout, Q_TIMEOUT 60 s); what is left
# goes to a follow-up run (``core.tasks.retention_purge_task``).
DEFAULT_MAX_SECONDS = 40


@dataclass
class RetentionReport:
    dry_run: bool
    counts: dict[str, int] = field(default_factory=dict)
    unfinished: list[str] = field(default_factory=list)  # kinds the time budget cut short or never reached

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done(self) -> bool:
        return not self.unfinished


def retention_purge(*, now: datetime, dry_run: bool, max_seconds: float | None = None) -> RetentionReport:
    """Pseudonymise or delete every kind of data older than its retention period at ``now``. With
    ``dry_run`` nothing changes and the report says how many rows each kind would touch; otherwise
    it says how many were touched. Idempotent: a second run touches nothing.

    Rows go in batches of ``RETENTION_BATCH_SIZE``, by id, each in its own transaction
    (``atomic(durable=True)``: it is run by the daily schedule or the command, never inside another
    transaction), so a failure leaves earlier batches purged and is simply retried by the next run.
    No batch starts after ``max_seconds`` (default ``RETENTION_MAX_SECONDS``; 0: no limit): the
    kinds left are listed in ``unfinished`` and the next run carries on where this one stopped, as
    every row still past its period is still found. Raises nothing of its own."""
    budget = getattr(settings, "RETENTION_MAX_SECONDS", DEFAULT_MAX_SECONDS) if max_seconds is None else max_seconds
    deadline = time.monotonic() + budget if budget else None
    report = RetentionReport(dry_run=dry_run)
    for entry in personal_data():
        if entry.retention is None:
            continue
        kind = entry.retention.kind
        if dry_run:
            report.counts[kind] = _past_retention(entry, now).count()
            continue
        report.counts[kind], finished = _purge_batches(entry, now, deadline)
        if not finished:
            report.unfinished.append(kind)
    return report


def _purge_batches(entry: PersonalData, now: datetime, deadline: float | None) -> tuple[int, bool]:
    """Purge ``entry``'s rows past their period a batch at a time until none is left (True) or the
    deadline passed (False). The id cursor moves past every batch, so a row that cannot be purged
    (a blank that changes nothing) is never taken again within a run."""
    size = getattr(settings, "RETENTION_BATCH_SIZE", DEFAULT_BATCH_SIZE)
    touched, after = 0, None
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            return touched, False
        with transaction.atomic(durable=True):
            rows = _past_retention(entry, now)
            if after is not None:
                rows = rows.filter(pk__gt=after)
            batch = list(rows.order_by("pk").values_list("pk", flat=True)[:size])
            if not batch:
                return touched, True
            # The conditions again, in the statement that purges: a row changed since it was read
            # (a failed delivery requeued) is left alone.
            touched += _purge(entry, _past_retention(entry, now).filter(pk__in=batch))
        after = batch[-1]
        if len(batch) < size:
            return touched, True


def _past_retention(entry: PersonalData, now: datetime):
    retention = entry.retention
    cutoff = now - timedelta(days=getattr(settings, retention.setting, retention.default_days))
    rows = entry.model.objects.filter(retention.scope, **{f"{retention.date_field}__lt": cutoff})
    if retention.purge == BLANK:
        rows = rows.exclude(retention.done if retention.done is not None else Q(**entry.blank))
    if retention.keep is not None:
        rows = rows.exclude(retention.keep)
    return rows


def _purge(entry: PersonalData, rows) -> int:
    if entry.retention.purge == BLANK:
        return entry.rows_blank(rows)
    # The rows of this table only: an event's cascaded deliveries are not counted as events.
    return rows.delete()[1].get(entry.model._meta.label, 0)
