"""Retention: personal data is kept for a documented period per kind, then pseudonymised or deleted.

Periods come from settings (``RETENTION_*_DAYS``, ``PRIVACY_PAYOUT_NAME_KEEP_DAYS``; the README's
Configuration table says why each default is what it is). What the purge touches, per kind:

* ``trigger_events``: the personal fields (e-mail, number, social uid, IP, device fingerprint,
  evidence) of events received before the period, blanked. The row, its ids, type, amounts and
  outcome stay: rewards point at it. Events whose reward is still reserved (in review or held)
  keep their evidence until it is decided or matures.
* ``inbound_webhooks``: raw bodies and headers of deliveries received before the period and no
  longer waiting to be processed, blanked; the row keeps its dedupe key so a late replay is still
  recognised.
* ``task_records``: finished django-q task records (successes and failures, whose pickled
  arguments and results may name people) stopped before the period, deleted.
* ``idempotency_records``: stored API responses created before the period, deleted whatever
  their expiry (the every-minute purge deletes expired ones earlier).
* ``payout_names``: creditor names of payouts of erased people that erasure kept because they were
  younger than ``PRIVACY_PAYOUT_NAME_KEEP_DAYS``, once older than that: blanked like erasure does,
  and name and IBAN pseudonymised in their transactions of stored pain.001 files.

Not here: a pain.001 file built but never downloaded. Its clear payees are an instruction for money
still owed, so it is not purged but expired after ``PAYOUT_BATCH_EXPIRE_DAYS`` by the payouts app's
own daily sweep (``payouts.services.batches.payout_batches_expire``), which moves money (its payouts
are paid again) and so belongs with payouts; from then on erasure pseudonymises it like a sent file.

Never touched: ledger rows, rewards, payouts' amounts, statuses and references, audit rows (their
chained columns, or their content: erasure is their only writer). The tables belong to apps that
import core, so they are reached through the app registry, never imported.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.apps import apps
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Concat

from core.payment_files import ERASED, payout_files_pseudonymise, payouts_lock

KINDS = ("trigger_events", "inbound_webhooks", "task_records", "idempotency_records", "payout_names")


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
    for kind, rows, purge in _kinds(now):
        with transaction.atomic(durable=True):
            report.counts[kind] = rows.count() if dry_run else purge(rows)
    return report


def _days(name: str, default: int) -> timedelta:
    return timedelta(days=getattr(settings, name, default))


def _kinds(now: datetime):
    TriggerEvent = apps.get_model("campaigns", "TriggerEvent")
    InboundWebhook = apps.get_model("core", "InboundWebhook")
    Task = apps.get_model("django_q", "Task")
    IdempotencyRecord = apps.get_model("core", "IdempotencyRecord")
    Payout = apps.get_model("payouts", "Payout")

    blank_event = Q(email="", whatsapp="", social_uid="", ip=None, device_fingerprint="", evidence={})
    events = (
        TriggerEvent.objects.filter(received_at__lt=now - _days("RETENTION_TRIGGER_EVENT_DAYS", 400))
        .exclude(blank_event)
        .exclude(reward__status__in=("review", "held"))
    )
    webhooks = (
        InboundWebhook.objects.filter(received_at__lt=now - _days("RETENTION_INBOUND_WEBHOOK_DAYS", 30))
        .exclude(status__in=("received", "processing", "failed"))
        .exclude(body=b"", headers={})
    )
    tasks = Task.objects.filter(stopped__lt=now - _days("RETENTION_TASK_RESULT_DAYS", 30))
    idempotency = IdempotencyRecord.objects.filter(created_at__lt=now - _days("RETENTION_IDEMPOTENCY_DAYS", 7))
    names = Payout.objects.filter(
        person__erased_at__isnull=False, created_at__lt=now - _days("PRIVACY_PAYOUT_NAME_KEEP_DAYS", 0)
    ).exclude(creditor_name=ERASED)

    return [
        (
            "trigger_events",
            events,
            lambda rows: rows.update(email="", whatsapp="", social_uid="", ip=None, device_fingerprint="", evidence={}),
        ),
        ("inbound_webhooks", webhooks, lambda rows: rows.update(body=b"", headers={})),
        ("task_records", tasks, lambda rows: rows.delete()[0]),
        ("idempotency_records", idempotency, lambda rows: rows.delete()[0]),
        ("payout_names", names, _payout_names_blank),
    ]


def _payout_names_blank(rows) -> int:
    """Blank the names as erasure does, and pseudonymise those payouts' transactions in the
    stored pain.001 files (``core.payment_files``: name and IBAN, by EndToEndId)."""
    Payout = apps.get_model("payouts", "Payout")
    found = Payout.objects.filter(pk__in=payouts_lock(payouts=rows))
    payout_files_pseudonymise(payouts=found)
    return found.update(
        creditor_name=ERASED, vop_suggested_name="", creditor_iban_masked=Concat(F("creditor_country"), Value(" ***"))
    )
