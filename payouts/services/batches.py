"""pain.001 batches for file rails: build (XSD-validated, control sums proven), approve
(four-eyes above a threshold), download, and apply the bank's pain.002 status report.

Building, approving and every download of a file are staff actions that move money (a downloaded
file is what the bank executes): each writes a ``PayoutBatchEvent`` with who, when and why in the
same transaction, append-only and hash-chained in PostgreSQL, and listed in the cross-object
audit trail (``core.audit_models.AuditTrail``)."""

import hashlib
import secrets
from collections import defaultdict
from datetime import date, datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from campaigns.services.rewards import recipient_payable_account
from core.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from core.money import format_minor
from core.personal_data import ERASED
from core.queue import enqueue
from payouts import conf
from payouts.iso import EXPIRED_REASON_CODE
from payouts.models import BatchStatus, Payout, PayoutBatch, PayoutBatchEvent, PayoutEvent, PayoutStatus
from payouts.pain002 import Outcome, Pain002Report
from payouts.payment_files import payout_files_pseudonymise
from payouts.rails.base import ServiceLevel
from payouts.rails.sepa_file import DebtorAccount, build_pain001, instant_file_account, uetr_for
from payouts.services.execute import rail_payment_for
from payouts.services.four_eyes import four_eyes_require
from payouts.services.payee import payouts_payee_verify
from payouts.services.states import (
    debtor_bank_account,
    drive,
    in_transit_account,
    payout_lock,
    step_failed,
    usable_rails,
)
from reconciliation.models import StatementLine, StatementLineStatus
from reconciliation.services import Leg, ledger_entry_post


def file_rail_names() -> list[str]:
    return [name for name, rail in usable_rails().items() if rail.capabilities().file_based]


def batch_id_new(day: date) -> str:
    return f"JBB{day:%y%m%d}{secrets.token_hex(6).upper()}"


def batch_event_record(batch: PayoutBatch, *, kind: str, actor=None, reason: str = "", data=None, now=None):
    """The batch's audit row; the caller holds the batch row (or has just created it)."""
    facts = {"batch": batch.batch_id, "count": batch.count, "control_sum_minor": batch.control_sum_minor}
    return PayoutBatchEvent.objects.create(
        batch=batch,
        kind=kind,
        actor=actor,
        reason=reason,
        data={**facts, "currency": batch.currency, **(data or {})},
        created_at=now or timezone.now(),
    )


def payout_batch_create(
    *, actor, currency: str = "EUR", execution_date: date | None = None, payout_ids: list[int] | None = None
) -> PayoutBatch:
    """Put every waiting payout of a file rail (or the given ones) into one pain.001 file paid
    from the platform's debtor account: payees not checked yet are checked first (each outside
    the file's transaction; a policy hold keeps that payout out), then the file is built and
    validated and, in one durable transaction, the batch is stored and its payouts become
    ``submitted`` (payable → in transit, one entry for the file). Raises InvalidInput (nothing
    waiting, no debtor account, invalid file)."""
    execution_date = execution_date or timezone.localdate()
    debtor = debtor_bank_account(currency)
    if debtor is None:
        raise InvalidInput(f"No platform bank account in {currency} to pay from.", code="no_debtor_account")
    waiting = (
        Payout.objects.filter(status=PayoutStatus.CREATED, rail__in=file_rail_names(), batch__isnull=True)
        .filter(needs_review=False, currency=currency, debtor_account_code=debtor.ledger_account.code)
        .filter(Q(requires_approval=False) | Q(approved_at__isnull=False))
    )
    if payout_ids is not None:
        waiting = waiting.filter(pk__in=payout_ids)
    payouts_payee_verify(payout_ids=list(waiting.filter(vop_checked_at__isnull=True).values_list("id", flat=True)))
    now = timezone.now()
    with transaction.atomic(durable=True):
        # Only checked payees go into a file: a hold took the others out (needs_review).
        qs = (
            waiting.select_for_update(skip_locked=True, of=("self",))
            .select_related("bank_account")
            .filter(vop_checked_at__isnull=False)
        )
        payouts = list(qs.order_by("id"))
        if not payouts:
            raise InvalidInput("No payouts are waiting for a file.", code="empty_batch")
        accounts = {p.bank_account_id: p.bank_account for p in payouts}
        ibans = {account_id: account.iban() for account_id, account in accounts.items()}
        batch_id = batch_id_new(execution_date)
        instant = instant_file_account(debtor.iban)
        xml = build_pain001(
            batch_id=batch_id,
            debtor=DebtorAccount(
                name=debtor.name, iban=debtor.iban, bic=debtor.bic or None, account_code=debtor.ledger_account.code
            ),
            payments=[rail_payment_for(p, iban=ibans[p.bank_account_id]) for p in payouts],
            execution_date=execution_date,
            instant=instant,
        )
        total = sum(p.amount_minor for p in payouts)
        batch = PayoutBatch.objects.create(
            batch_id=batch_id,
            payment_information_id=f"{batch_id}-{execution_date:%Y%m%d}",
            debtor_account_code=debtor.ledger_account.code,
            debtor_iban=debtor.iban,
            currency=currency,
            execution_date=execution_date,
            count=len(payouts),
            control_sum_minor=total,
            file=xml.decode(),
            requires_approval=total >= conf.batch_approval_threshold_minor(),
            instant=instant,
            created_by=actor,
        )
        # One entry for the file: each person's payable → in transit (a person with several
        # payouts in the file is one leg), like the one debit the bank will book.
        owed: dict[int, int] = defaultdict(int)
        for p in payouts:
            owed[p.person_id] += p.amount_minor
        sent = ledger_entry_post(
            idempotency_key=f"payout_batch:{batch.pk}:sent",
            kind="payout_sent",
            legs=[
                *(
                    Leg.debit(recipient_payable_account(person_id=person_id, currency=currency), amount)
                    for person_id, amount in sorted(owed.items())
                ),
                Leg.credit(in_transit_account(currency), total),
            ],
            memo=f"Payout file {batch_id}: {len(payouts)} payouts",
            reference_type="payout_batch",
            reference_id=str(batch.pk),
        ).entry
        Payout.objects.filter(pk__in=[p.pk for p in payouts]).update(
            status=PayoutStatus.SUBMITTED,
            batch=batch,
            sent_entry=sent,
            submitted_at=now,
            rail_reference=batch.payment_information_id,
            service_level=ServiceLevel.INSTANT if instant else ServiceLevel.STANDARD,
            updated_at=now,
        )
        batch_event_record(
            batch,
            kind="batch.built",
            actor=actor,
            data={
                "execution_date": execution_date.isoformat(),
                "requires_approval": batch.requires_approval,
                "instant": instant,
            },
            now=now,
        )
        hook_fire(AUDIT_ROWS_WRITTEN)
        PayoutEvent.objects.bulk_create(
            [
                PayoutEvent(
                    payout=p,
                    kind="payout.submitted",
                    from_status=PayoutStatus.CREATED,
                    to_status=PayoutStatus.SUBMITTED,
                    actor=actor,
                    data={"batch": batch_id},
                    created_at=now,
                )
                for p in payouts
            ],
            batch_size=2000,
        )
    return batch


def payout_batch_approve(*, batch: PayoutBatch, approver, reason: str = "") -> PayoutBatch:
    """Four-eyes for a large file: a second staff member with ``payouts.approve_payoutbatch``.
    Records ``batch.approved`` with the approver, the time, ``reason`` (else why approval was
    needed: the file's sum against the threshold) and the creator, in the same durable
    transaction. Raises PermissionDenied (no permission, the creator, or ``four_eyes``: who
    approved one of its payouts' rewards), InvalidTransition (not waiting for approval: not
    needed, already approved, or expired)."""
    if not approver.is_staff or not approver.has_perm("payouts.approve_payoutbatch"):
        raise PermissionDenied("You may not approve payout batches.")
    with transaction.atomic(durable=True):
        batch = PayoutBatch.objects.select_for_update().get(pk=batch.pk)
        if batch.created_by_id == approver.pk:
            raise PermissionDenied("A batch needs a second person: you created this one.")
        if not batch.requires_approval or batch.approved_at or batch.status != BatchStatus.BUILT:
            raise InvalidTransition("This batch is not waiting for approval.")
        four_eyes_require(payouts=batch.payouts.all(), approver=approver, what="This batch")
        batch.approved_by, batch.approved_at = approver, timezone.now()
        batch.save(update_fields=["approved_by", "approved_at"])
        threshold = conf.batch_approval_threshold_minor()
        batch_event_record(
            batch,
            kind="batch.approved",
            actor=approver,
            reason=reason.strip()
            or (
                f"Four-eyes: {format_minor(batch.control_sum_minor, batch.currency)} is at or above the approval "
                f"threshold of {format_minor(threshold, batch.currency)}"
            ),
            data={"created_by": batch.created_by_id, "threshold_minor": threshold},
            now=batch.approved_at,
        )
    return batch


def payout_batch_download(*, batch: PayoutBatch, actor) -> bytes:
    """The pain.001 bytes for upload to the bank; the first download marks the batch
    ``downloaded`` and then pseudonymises, in the stored copy only, the transactions of people
    erased while the file waited (``payouts.payment_files``): the bank gets whom to pay, we keep
    no more than erasure would. Every download records ``batch.downloaded`` with the actor and
    the sha256 of the bytes handed out, in the same durable transaction. Raises
    PermissionDenied, InvalidTransition (approval missing; ``batch_expired``: the file must never
    reach a bank, its payouts are being paid by others)."""
    if not actor.is_staff or not actor.has_perm("payouts.download_payoutbatch"):
        raise PermissionDenied("You may not download payment files.")
    with transaction.atomic(durable=True):
        batch = PayoutBatch.objects.select_for_update().get(pk=batch.pk)
        if batch.status == BatchStatus.EXPIRED:
            raise InvalidTransition(
                "This file expired without being downloaded: its payouts are paid again in a new file.",
                code="batch_expired",
            )
        if batch.requires_approval and batch.approved_at is None:
            raise InvalidTransition("This batch needs a second person's approval before download.")
        document = batch.file.encode()
        first = batch.status == BatchStatus.BUILT
        now = timezone.now()
        if first:
            batch.status = BatchStatus.DOWNLOADED
            batch.downloaded_at, batch.downloaded_by = now, actor
            batch.save(update_fields=["status", "downloaded_at", "downloaded_by"])
            payout_files_pseudonymise(payouts=Payout.objects.filter(batch=batch, creditor_name=ERASED))
        batch_event_record(
            batch,
            kind="batch.downloaded",
            actor=actor,
            reason="First download, for upload to the bank" if first else "Downloaded again (the stored copy)",
            data={"first": first, "sha256": hashlib.sha256(document).hexdigest()},
            now=now,
        )
    return document


def payout_batch_apply_pain002(*, batch: PayoutBatch, report: Pain002Report) -> dict[str, int]:
    """Apply the bank's status report: rejected transactions (or a rejected group/block without
    transaction details) fail their payouts (in transit → payable); ACSC/ACCC settle them; an
    accepted or rejected group decides the batch status; Verification-of-Payee codes are stored as
    each payout's ``vop_result``. All or nothing, idempotent. A transaction the bank names only by
    its UETR (``OrgnlUETR``) is the payout whose pain.001 carried that UETR. When payouts were
    rejected, a task to try the file's bookings parked in suspense again
    (``statement_lines_rematch``) is enqueued in the same transaction. Locks the batch, then its payouts
    (lock order: ``core.locks``).
    Raises InvalidInput when the report is for another message, InvalidTransition
    (``batch_expired``) for a file that expired unsent."""
    if report.original_message_id != batch.batch_id:
        raise InvalidInput("This status report is for another file.", code="pain002_wrong_batch")
    counts = {"failed": 0, "settled": 0}
    now = timezone.now()
    with transaction.atomic(durable=True):
        batch = PayoutBatch.objects.select_for_update().get(pk=batch.pk)
        if batch.status == BatchStatus.EXPIRED:
            raise InvalidTransition("This file expired without being sent to the bank.", code="batch_expired")
        # Then all its payouts, ascending (lock order: ``core.locks``), before the first write: the
        # report lists them in the bank's order.
        list(Payout.objects.select_for_update(of=("self",)).filter(batch=batch).order_by("id").values("id"))
        # The bank's Verification-of-Payee answer is kept with each payout (shown in the admin);
        # it decides nothing about payment.
        for end_to_end_id, result in report.vop_results().items():
            Payout.objects.filter(batch=batch, end_to_end_id=end_to_end_id).update(vop_result=str(result))
        by_e2e, by_uetr = report.by_end_to_end_id(), report.by_uetr()
        group_rejected = (
            report.group is not None and report.group.outcome == Outcome.REJECTED and not report.transactions
        )
        for payout in Payout.objects.filter(batch=batch).order_by("id"):
            line = by_e2e.get(payout.end_to_end_id) or by_uetr.get(uetr_for(payout.end_to_end_id))
            outcome = Outcome.REJECTED if group_rejected else (line.outcome if line else None)
            locked = payout_lock(payout.pk)
            if outcome == Outcome.REJECTED and locked.status == PayoutStatus.SUBMITTED:
                code = (line.reason_code if line else report.group.reason_code) or "MS03"
                text = (line.reason_text if line else report.group.reason_text) or ""
                drive(locked, target=PayoutStatus.FAILED, now=now, via="pain002", reason_code=code, reason_text=text)
                counts["failed"] += 1
            elif outcome == Outcome.SETTLED and locked.status == PayoutStatus.SUBMITTED:
                drive(locked, target=PayoutStatus.SETTLED, now=now, via="pain002")
                counts["settled"] += 1
        if report.group is not None and report.group.outcome in (Outcome.ACCEPTED, Outcome.SETTLED, Outcome.REJECTED):
            batch.status = BatchStatus.REJECTED if report.group.outcome == Outcome.REJECTED else BatchStatus.ACCEPTED
            batch.decided_at = now
            batch.save(update_fields=["status", "decided_at"])
        if counts["failed"]:
            # A booking of the file that waited in suspense for the payouts the bank would not pay
            # (its sum is the rest of the file) may fit now. Enqueued with the failures, so a
            # crash after the commit loses no rematch (a replay of the report fails nothing new).
            parked = batch_lines_parked(batch=batch)
            if parked:
                enqueue("reconciliation.tasks.statement_lines_rematch_task", parked)
    return counts


def batch_lines_parked(*, batch: PayoutBatch) -> list[int]:
    """Debit lines in suspense (unmatched or suggested) that name ``batch`` by PmtInfId or MsgId."""
    return list(
        StatementLine.objects.filter(
            Q(batch_message_id=batch.batch_id)
            | (Q(batch_payment_information_id=batch.payment_information_id) if batch.payment_information_id else Q()),
            credit_debit="DBIT",
            status__in=[StatementLineStatus.UNMATCHED, StatementLineStatus.SUGGESTED],
        ).values_list("pk", flat=True)
    )


def payout_batches_expire(*, now: datetime | None = None) -> list[int]:
    """Expire every batch still ``built`` (never downloaded) more than ``PAYOUT_BATCH_EXPIRE_DAYS``
    after it was built. The bank never had such a file, so no money left: each of its payouts
    still ``submitted`` fails (in transit → payable, its rewards released, reason DS02, the person
    not messaged: nothing is wrong with their account), and the tick pays the money again in a
    new payout with a new EndToEndId, so no payout is ever dropped; the stale file can no longer
    be approved, downloaded or answered by a pain.002. Records ``batch.expired``; erased people's
    transactions in the stored file are pseudonymised as after a download.

    One durable transaction per batch, locking the batch and then its payouts (lock order:
    ``states``), re-checked under the lock: a download that got the lock first wins and the batch
    is left alone. Idempotent. Returns the ids of the batches expired."""
    now = now or timezone.now()
    days = conf.batch_expire_days()
    cutoff = now - timedelta(days=days)
    expired = []
    stale = PayoutBatch.objects.filter(status=BatchStatus.BUILT, created_at__lt=cutoff)
    for batch_id in stale.order_by("id").values_list("id", flat=True):
        with transaction.atomic(durable=True):
            batch = PayoutBatch.objects.select_for_update().get(pk=batch_id)
            if batch.status != BatchStatus.BUILT or batch.created_at >= cutoff:
                continue
            payouts = list(Payout.objects.select_for_update(of=("self",)).filter(batch=batch).order_by("id"))
            failed = 0
            text = f"Payment file {batch.batch_id} was never downloaded within {days} days: paid again in a new payout."
            for payout in payouts:
                if payout.status == PayoutStatus.SUBMITTED:
                    step_failed(payout, now=now, reason_code=EXPIRED_REASON_CODE, reason_text=text, notify=False)
                    failed += 1
            batch.status, batch.decided_at = BatchStatus.EXPIRED, now
            batch.save(update_fields=["status", "decided_at"])
            batch_event_record(
                batch,
                kind="batch.expired",
                reason=f"Never downloaded within {days} days of being built: not sent, its payouts are paid again",
                data={"expire_days": days, "payouts_failed": failed},
                now=now,
            )
            payout_files_pseudonymise(payouts=Payout.objects.filter(batch=batch, creditor_name=ERASED))
        expired.append(batch_id)
    return expired
