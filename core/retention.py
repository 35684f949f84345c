"""Retention: personal data is kept for a documented period per kind, then pseudonymised or deleted.

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
  late replay is still recognised.
* ``task_records`` (``core.privacy``): finished django-q task records (successes and failures,
  whose pickled arguments and results may name people) stopped before the period, deleted.
* ``idempotency_records`` (``core.privacy``): stored API responses created before the period,
  deleted whatever their expiry (the every-minute purge deletes expired ones earlier).
* ``payout_names`` (``payouts.privacy``): creditor names of payouts of erased people that erasure
  kept because they were younger than ``PRIVACY_PAYOUT_NAME_KEEP_DAYS``, once older than that:
  blanked like erasure does, and name and IBAN pseudonymised in their transactions of stored
  pain.001 files.

Not here: a pain.001 file built but never downloaded. Its clear payees are an instruction for money
still owed, so it is not purged but expired after ``PAYOUT_BATCH_EXPIRE_DAYS`` by the payouts app's
own daily sweep (``payouts.services.batches.payout_batches_expire``), which moves money (its payouts
are paid again) and so belongs with payouts; from then on erasure pseudonymises it like a sent file.

Never touched: ledger rows, rewards, payouts' amounts, statuses and references, audit rows (their
chained columns, or their content: erasure is their only writer).
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from core.personal_data import BLANK, PersonalData, personal_data


@dataclass
class RetentionReport:
    dry_run: bool
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def retention_purge(*, now: datetime, dry_run: bool) -> RetentionReport:
    """Pseudonymise or delete every kind of personal data older than its retention period at
    ``now``. With ``dry_run`` nothing changes and the report says how many rows each kind would
    touch; otherwise it says how many were touched. Idempotent: a second run touches nothing.

    One transaction per kind (``atomic(durable=True)``: it is run by the daily schedule or the
    command, never inside another transaction), so a failure leaves earlier kinds purged and is
    simply retried by the next run. Raises nothing of its own."""
    report = RetentionReport(dry_run=dry_run)
    for entry in personal_data():
        if entry.retention is None:
            continue
        with transaction.atomic(durable=True):
            rows = _past_retention(entry, now)
            report.counts[entry.retention.kind] = rows.count() if dry_run else _purge(entry, rows)
    return report


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
    return rows.delete()[0]
