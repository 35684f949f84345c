"""Staff actions and explicit transitions from outside the rail: approve, cancel, retry, returns,
settlement seen on the bank statement (and undoing it), and the follow-ups after settlement."""

from datetime import datetime

from django.db import connection, transaction
from django.db.models import Count, Min
from django.utils import timezone

from campaigns.models import RewardStatus, VopAction
from campaigns.services.rewards import reward_mark_paid
from core.bulk import rows_insert
from core.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from core.queue import enqueue
from payouts.iso import reason_text as iso_text
from payouts.models import Payout, PayoutEvent, PayoutItem, PayoutStatus, Withdrawal
from payouts.rails import get_rail
from payouts.services.create import CreateResult, payouts_create_for_payable
from payouts.services.four_eyes import four_eyes_require
from payouts.services.states import (
    SETTLEMENT_KINDS,
    drive,
    event_record,
    in_transit_account,
    items_release,
    notice_record,
    paid_notice_key,
    payout_lock,
    payouts_execute_enqueue,
    settled_entry_key,
    settled_entry_post,
    step_returned,
    step_settled,
)
from recipients.models import NoticeKind
from recipients.services.notices import NoticeNew, notices_record
from reconciliation.models import Account
from reconciliation.services import EntrySpec, Leg, bank_fees_account, ledger_entries_post, ledger_entry_post


def _require_perm(user, perm: str) -> None:
    if user is None or not user.is_staff or not user.has_perm(perm):
        raise PermissionDenied(f"You need the {perm} permission.")


def payout_approve(*, payout: Payout, approver) -> Payout:
    """Four-eyes approval of a payout above the threshold, or release of one held for review
    (e.g. Verification of Payee: no match), or for the person to confirm their bank's name (staff
    vouch for the payee: it is paid as it stands, its check not asked again) — never one its
    campaign's policy blocks (only the person's new details release that). The approver must be
    staff with ``payouts.approve_payout`` and must not be who created the payout (auto-created
    payouts: any such approver, recorded) nor, for the four-eyes approval, who approved any of
    its rewards in review. Execution is enqueued in the same transaction.
    Raises PermissionDenied (``four_eyes``), InvalidTransition (not waiting for anyone;
    ``payee_blocked``)."""
    _require_perm(approver, "payouts.approve_payout")
    now = timezone.now()
    with transaction.atomic(durable=True):
        payout = payout_lock(payout.pk)
        if payout.created_by_id is not None and payout.created_by_id == approver.pk:
            raise PermissionDenied("A payout needs a second person: you created this one.")
        waiting_approval = payout.requires_approval and payout.approved_at is None
        if payout.status != PayoutStatus.CREATED or not (waiting_approval or payout.needs_review):
            raise InvalidTransition("This payout is not waiting for approval or review.")
        if payout.needs_review and payout.vop_action == VopAction.BLOCK:
            raise InvalidTransition(
                "The campaign blocks this payee check's answer: cancel it, or wait for the person's new details.",
                code="payee_blocked",
            )
        fields = ["updated_at"]
        if waiting_approval:
            four_eyes_require(payouts=Payout.objects.filter(pk=payout.pk), approver=approver, what="This payout")
            payout.approved_by, payout.approved_at = approver, now
            fields += ["approved_by", "approved_at"]
        if payout.needs_review:
            payout.needs_review = False
            fields.append("needs_review")
        payout.updated_at = now
        payout.save(update_fields=fields)
        event_record(payout, kind="payout.approved", from_status=payout.status, actor=approver, now=now)
        payouts_execute_enqueue(payout_ids=[payout.pk], now=now)
    return payout


def payout_cancel(*, payout: Payout, actor, reason: str) -> Payout:
    """created → cancelled (never sent, so no money moved). Its rewards stay payable and go into
    the next payout (to stop paying a person, claw the reward back instead).
    Raises PermissionDenied, InvalidInput (no reason), InvalidTransition (already claimed or sent)."""
    _require_perm(actor, "payouts.cancel_payout")
    if not reason.strip():
        raise InvalidInput("Say why the payout is cancelled.", code="reason_required")
    with transaction.atomic(durable=True):
        payout = payout_lock(payout.pk)
        cancel_locked(payout, actor=actor, reason=reason, now=timezone.now())
    return payout


def cancel_locked(payout: Payout, *, actor, reason: str, now: datetime) -> None:
    """created → cancelled for a payout the caller has locked, in its transaction: its rewards
    are free for the next payout. Raises InvalidTransition for a payout past created, and for one
    already sent to a rail that finds payments only by its own reference (PayPal's batch id) when
    no reference came back: the rail may have paid it, and cancelling would pay the rewards again.
    Its reference arrives with the rail's webhook or the next attempt."""
    if payout.status != PayoutStatus.CREATED:
        raise InvalidTransition(f"A {payout.status} payout cannot be cancelled.")
    if payout.attempts and not payout.rail_reference and get_rail(payout.rail).finds_by_reference_only:
        raise InvalidTransition(
            "This payout was sent and the rail's answer was lost: it may be paid. Wait for the rail's report.",
            code="outcome_unknown",
        )
    payout.status = PayoutStatus.CANCELLED
    payout.cancelled_at = now
    payout.reason_text = reason[:500]
    payout.updated_at = now
    payout.save(update_fields=["status", "cancelled_at", "reason_text", "updated_at"])
    items_release(payout)
    event_record(
        payout, kind="payout.cancelled", from_status=PayoutStatus.CREATED, actor=actor, data={"reason": reason}, now=now
    )


def payout_retry(*, payout: Payout, actor) -> Payout | CreateResult:
    """Retry now: a created payout waiting for its backoff is made due and enqueued; for a failed
    or returned payout, a new payout is created from the person's payable rewards (with their
    current IBAN). Raises PermissionDenied, InvalidTransition."""
    _require_perm(actor, "payouts.retry_payout")
    if payout.status in (PayoutStatus.FAILED, PayoutStatus.RETURNED, PayoutStatus.CANCELLED):
        return payouts_create_for_payable(person=payout.person, actor=actor)
    now = timezone.now()
    with transaction.atomic(durable=True):
        payout = payout_lock(payout.pk)
        if payout.status != PayoutStatus.CREATED or payout.needs_review:
            raise InvalidTransition(f"A {payout.status} payout cannot be retried now.")
        payout.next_attempt_at = None
        payout.updated_at = now
        payout.save(update_fields=["next_attempt_at", "updated_at"])
        event_record(
            payout, kind="payout.retry", from_status=payout.status, actor=actor, data={"manual": True}, now=now
        )
        payouts_execute_enqueue(payout_ids=[payout.pk], now=now)
    return payout


def payout_mark_returned(
    *,
    payout: Payout,
    reason_code: str,
    source: str,
    reason_text: str = "",
    bank: Account | None = None,
    settle_first: bool = True,
    actor=None,
    bank_minor: int | None = None,
) -> Payout:
    """submitted | settled → returned: the receiving bank sent the money back. The money goes
    back to the person's payable (from the bank account it came back to: ``bank``, default the
    payout's debtor account), the rewards are released, and the person is asked to fix their
    IBAN (after commit). A submitted payout is settled first, unless ``settle_first`` is off (a
    bank line shows the return before the debit: in transit waits for the debit line).
    ``bank_minor``: what the bank booked back when it kept a charge (the charge is a bank fee;
    the person is owed the whole amount again).
    Idempotent for a returned payout. Raises InvalidTransition otherwise.
    Joins the caller's transaction when there is one (matchers), else runs its own."""
    if not reason_code:
        raise InvalidInput("A return needs its reason code.", code="reason_required")
    with transaction.atomic():
        locked = payout_lock(payout.pk)
        if locked.status not in (PayoutStatus.SUBMITTED, PayoutStatus.SETTLED, PayoutStatus.RETURNED):
            raise InvalidTransition(f"A {locked.status} payout cannot be returned.")
        now = timezone.now()
        code, text = reason_code.upper(), reason_text or iso_text(reason_code)
        how = {"now": now, "via": source, "reason_code": code, "reason_text": text, "bank": bank, "actor": actor}
        if locked.status == PayoutStatus.SUBMITTED and not settle_first:
            step_returned(locked, **how, bank_minor=bank_minor)
        else:
            drive(locked, target=PayoutStatus.RETURNED, **how, bank_minor=bank_minor)
    return locked


def payout_mark_settled(*, payout: Payout, via: str, bank: Account | None = None, now: datetime | None = None) -> bool:
    """submitted → settled (pain.002 ACSC, a bank line). Joins the caller's transaction.
    Returns False when it already was settled. Raises InvalidTransition for a failed payout."""
    with transaction.atomic():
        locked = payout_lock(payout.pk)
        return drive(locked, target=PayoutStatus.SETTLED, now=now or timezone.now(), via=via, bank=bank)


def payout_bank_debit_record(*, payout_id: int, line_id: int, bank: Account, entry=None, charge_minor: int = 0):
    """A bank line shows this payout's money leaving (its own line, or a batch booking that
    posted ``entry`` for all its payouts). submitted → settled (in transit → ``bank``); a payout
    returned before its debit was seen gets its settlement entry, status unchanged; one settled by
    the rail or pain.002 is only noted. ``charge_minor``: the bank added its charge to the debit
    (to the bank-fee account: with the settlement, or on its own when the payout was settled
    before). Returns the entry posted for this payout, or None.
    Joins the caller's transaction. Raises InvalidTransition (seen before, or not sent)."""
    payout = payout_lock(payout_id)
    if payout.bank_debit_line_id is not None:
        raise InvalidTransition("A bank line already shows this payout leaving.", code="payout_moved_on")
    via, now = f"line:{line_id}", timezone.now()
    posted = None
    left = payout.amount_minor + charge_minor
    if payout.status == PayoutStatus.SUBMITTED:
        step_settled(payout, now=now, via=via, bank=bank, entry=entry, bank_minor=left)
        posted = payout.settled_entry
    elif payout.status == PayoutStatus.RETURNED and payout.settled_entry_id is None:
        payout.settled_entry = entry or settled_entry_post(payout, via=via, bank=bank, bank_minor=left)
        payout.settled_via, payout.settled_at = via, now
        posted = payout.settled_entry
        event_record(payout, kind="payout.debit_seen", from_status=payout.status, data={"line": line_id}, now=now)
    elif payout.status not in (PayoutStatus.SETTLED, PayoutStatus.RETURNED):
        raise InvalidTransition(f"A {payout.status} payout has not left the bank.", code="payout_moved_on")
    elif charge_minor:
        posted = _bank_charge_post(payout, line_id=line_id, bank=bank, charge_minor=charge_minor, now=now)
    payout.bank_debit_line_id = line_id
    payout.updated_at = now
    payout.save(update_fields=["settled_entry", "settled_via", "settled_at", "bank_debit_line_id", "updated_at"])
    return posted


def payout_bank_debit_undo(*, payout_id: int, line_id: int) -> None:
    """The match of that debit line was undone (reconciliation reverses its entry): a payout it
    settled is in transit again. Joins the caller's transaction. Raises InvalidTransition."""
    payout = payout_lock(payout_id)
    if payout.bank_debit_line_id != line_id:
        raise InvalidTransition("That bank line is not this payout's debit.", code="payout_moved_on")
    via, now = f"line:{line_id}", timezone.now()
    previous = payout.status
    if payout.settled_via == via:
        if payout.status == PayoutStatus.SETTLED:
            payout.status = PayoutStatus.SUBMITTED
        payout.settled_entry, payout.settled_at, payout.settled_via = None, None, ""
    payout.bank_debit_line_id = None
    payout.updated_at = now
    payout.save(
        update_fields=["status", "settled_entry", "settled_at", "settled_via", "bank_debit_line_id", "updated_at"]
    )
    event_record(payout, kind="payout.settle_undone", from_status=previous, data={"line": line_id}, now=now)


def payout_bank_return_record(
    *,
    payout_id: int,
    line_id: int,
    bank: Account,
    reason_code: str,
    reason_text: str = "",
    bank_minor: int | None = None,
):
    """A bank line shows this payout coming back: returned (bank → payable) unless the rail had
    already reported the return, which is then only noted. ``bank_minor``: what the line booked
    back when it is not the payout's amount (less a return charge; more, when the bank reversed
    a debit together with its charge); the difference is a bank fee. Returns the entry posted, or
    None. Joins the caller's transaction. Raises InvalidTransition."""
    payout = payout_lock(payout_id)
    if payout.bank_return_line_id is not None:
        raise InvalidTransition("A bank line already shows this payout coming back.", code="payout_moved_on")
    posted = None
    if payout.status in (PayoutStatus.SUBMITTED, PayoutStatus.SETTLED):
        payout = payout_mark_returned(
            payout=payout,
            reason_code=reason_code,
            reason_text=reason_text,
            source=f"line:{line_id}",
            bank=bank,
            settle_first=False,
            bank_minor=bank_minor,
        )
        posted = payout.back_entry
    elif payout.status != PayoutStatus.RETURNED:
        raise InvalidTransition(f"A {payout.status} payout cannot come back.", code="payout_moved_on")
    elif bank_minor is not None and bank_minor != payout.amount_minor:
        posted = _bank_charge_post(
            payout, line_id=line_id, bank=bank, charge_minor=payout.amount_minor - bank_minor, now=timezone.now()
        )
    payout.bank_return_line_id = line_id
    payout.save(update_fields=["bank_return_line_id"])
    return posted


def _bank_charge_post(payout: Payout, *, line_id: int, bank: Account, charge_minor: int, now: datetime):
    """The bank's charge on a line whose payout the books had already settled or returned (by
    the rail): only the charge is left to book, bank-fee account ↔ bank. Keyed by how many charges
    were booked before, so a line matched again after an undo posts afresh."""
    seq = PayoutEvent.objects.filter(payout=payout, kind="payout.bank_charge").count()
    fees = bank_fees_account(payout.currency)
    legs = (
        [Leg.debit(fees, charge_minor), Leg.credit(bank, charge_minor)]
        if charge_minor > 0
        else [Leg.debit(bank, -charge_minor), Leg.credit(fees, -charge_minor)]
    )
    entry = ledger_entry_post(
        idempotency_key=f"payout:{payout.pk}:bank_charge:{seq}",
        kind="bank_charge",
        legs=legs,
        memo=f"Bank charge on payout {payout.end_to_end_id} (line:{line_id})"[:500],
        reference_type="payout",
        reference_id=str(payout.pk),
    ).entry
    event_record(
        payout,
        kind="payout.bank_charge",
        from_status=payout.status,
        data={"line": line_id, "charge_minor": charge_minor},
        now=now,
    )
    return entry


def payout_bank_return_undo(*, payout_id: int, line_id: int) -> None:
    """The match of that return line was undone: the payout is settled (or in transit) again and
    owns its rewards again. Raises InvalidTransition when they went into a new payout meanwhile."""
    payout = payout_lock(payout_id)
    if payout.bank_return_line_id != line_id:
        raise InvalidTransition("That bank line is not this payout's return.", code="payout_moved_on")
    now = timezone.now()
    if payout.returned_via == f"line:{line_id}":
        items = PayoutItem.objects.filter(payout=payout)
        if PayoutItem.objects.filter(reward__in=items.values("reward"), active=True).exclude(payout=payout).exists():
            raise InvalidTransition("Its rewards are already in a new payout.", code="payout_moved_on")
        if items.filter(reward__status__in=[RewardStatus.EXPIRED, RewardStatus.CLAWED_BACK]).exists():
            # Their money left the person's payable meanwhile: the return's reversal would take it
            # from someone else's.
            raise InvalidTransition(
                "Some of its rewards went back to the brand meanwhile (expired or clawed back).",
                code="payout_moved_on",
            )
        if Withdrawal.objects.filter(payout=payout, back_entry__isnull=False).exists():
            # A brand's withdrawal given back to its funds: the reversal would take another
            # withdrawal's money from the brand's payee.
            raise InvalidTransition("This withdrawal went back to the brand's funds meanwhile.", code="payout_moved_on")
        payout.status = PayoutStatus.SETTLED if payout.settled_entry_id else PayoutStatus.SUBMITTED
        payout.back_entry, payout.returned_at, payout.returned_via = None, None, ""
        payout.reason_code = payout.reason_text = ""
        items.update(active=True)
    payout.bank_return_line_id = None
    payout.updated_at = now
    payout.save(
        update_fields=[
            "status",
            "back_entry",
            "returned_at",
            "returned_via",
            "reason_code",
            "reason_text",
            "bank_return_line_id",
            "updated_at",
        ]
    )
    event_record(
        payout, kind="payout.return_undone", from_status=PayoutStatus.RETURNED, data={"line": line_id}, now=now
    )


def payout_rewards_mark_paid(*, payout_id: int) -> int:
    """After settlement: the payout's rewards that are still ``payable`` become ``paid``, with the
    payout's end-to-end id as reference (campaigns' own durable transaction). Idempotent; a
    returned payout's rewards are not touched. Returns how many changed. The person's paid notice
    is recorded with the settlement; one settled by the version before the notices outbox has
    none, and gets it here (the same key: never twice)."""
    payout = Payout.objects.filter(pk=payout_id, status=PayoutStatus.SETTLED).first()
    if payout is None:
        return 0
    reward_ids = list(
        PayoutItem.objects.filter(payout=payout, active=True, reward__status=RewardStatus.PAYABLE).values_list(
            "reward_id", flat=True
        )
    )
    if not reward_ids:
        return 0
    changed = reward_mark_paid(reward_ids=reward_ids, payout_ref=payout.end_to_end_id)
    notice_record(payout, kind=NoticeKind.PAID, key=paid_notice_key(payout.pk))
    return changed


def payouts_bank_debits_record(*, items: list[tuple[Payout, int]], bank: Account) -> dict[int, object]:
    """The bulk form of ``payout_bank_debit_record`` for its common case, used when a statement
    settles thousands of payouts: ``items`` are (payout, debit line id) for payouts the caller has
    LOCKED, that are ``submitted`` and whose debit no line has shown yet. Each gets exactly what the
    single path gives it — the same settlement entry (same idempotency key: in transit → ``bank``),
    status, event and follow-up — but in a handful of statements for the whole set instead of a
    dozen per payout. Returns {payout id: entry}. Joins the caller's transaction.
    Raises InvalidTransition if an item is not in that state (the caller checked under the lock)."""
    if not items:
        return {}
    now = timezone.now()
    for payout, _ in items:
        if payout.status != PayoutStatus.SUBMITTED or payout.bank_debit_line_id is not None:
            raise InvalidTransition(f"Payout {payout.pk} is not waiting for its debit.", code="payout_moved_on")
    ids = [payout.pk for payout, _ in items]
    seq = _settlement_counts(ids)
    in_transit = {currency: in_transit_account(currency) for currency in {p.currency for p, _ in items}}
    specs = [
        EntrySpec(
            idempotency_key=settled_entry_key(payout.pk, seq.get(payout.pk, 0)),
            kind="payout_settled",
            legs=[
                Leg.debit(in_transit[payout.currency], payout.amount_minor),
                Leg.credit(bank, payout.amount_minor),
            ],
            memo=f"Payout {payout.end_to_end_id} settled (line:{line_id})"[:500],
            reference_type="payout",
            reference_id=str(payout.pk),
        )
        for payout, line_id in items
    ]
    posted = ledger_entries_post(entries=specs, all_or_nothing=True)
    entries = {int(entry.reference_id): entry for entry in [*posted.posted, *posted.replayed]}
    payouts = []
    for payout, line_id in items:
        payout.settled_entry = entries[payout.pk]
        payout.status = PayoutStatus.SETTLED
        payout.settled_at = now
        payout.settled_via = f"line:{line_id}"[:40]
        payout.bank_debit_line_id = line_id
        payout.updated_at = now
        payouts.append(payout)
    _settle_rows_update(payouts, now=now)
    _settled_events_record(payouts, now=now)
    _paid_notices_record(payouts, now=now)
    # One follow-up task for the set: enqueueing one per payout costs a broker round trip each.
    enqueue("payouts.tasks.payouts_settled_followup_task", ids)
    return entries


def _settlement_counts(payout_ids: list[int]) -> dict[int, int]:
    """How many times each payout was seen settled before (the entry key's sequence), for those
    seen at least once. On PostgreSQL one lookup per payout by ``payout_id`` (a LATERAL aggregate,
    with ``kind`` only in the FILTER): asked for a thousand payouts' events in one WHERE clause, the
    planner took the (kind, id) index or a seq scan and read every settlement ever recorded — per
    chunk, growing with the history."""
    if connection.vendor != "postgresql":
        return dict(
            PayoutEvent.objects.filter(payout_id__in=payout_ids, kind__in=SETTLEMENT_KINDS)
            .values_list("payout_id")
            .annotate(n=Count("id"))
        )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT u.id, s.n FROM unnest(%s::bigint[]) AS u(id) CROSS JOIN LATERAL ("
            f"SELECT count(*) FILTER (WHERE e.kind = ANY(%s::varchar[])) AS n "
            f"FROM {PayoutEvent._meta.db_table} e WHERE e.payout_id = u.id) s WHERE s.n > 0",
            [payout_ids, list(SETTLEMENT_KINDS)],
        )
        return dict(cursor.fetchall())


def _settled_events_record(payouts: list[Payout], *, now: datetime) -> None:
    rows_insert(
        PayoutEvent,
        [
            PayoutEvent(
                payout=p,
                kind="payout.settled",
                from_status=PayoutStatus.SUBMITTED,
                to_status=PayoutStatus.SETTLED,
                data={"via": p.settled_via},
                created_at=now,
            )
            for p in payouts
        ],
        keys=False,
    )
    hook_fire(AUDIT_ROWS_WRITTEN)


def _paid_notices_record(payouts: list[Payout], *, now: datetime) -> None:
    """``step_settled``'s notice for each payout, each linking to its first reward, in one query
    (the matcher's payouts are loaded with only the columns settlement needs)."""
    rows = (
        PayoutItem.objects.filter(payout_id__in=[p.pk for p in payouts])
        .values_list("payout_id", "payout__person_id")
        .annotate(reward_id=Min("reward_id"))
    )
    notices_record(
        notices=[
            NoticeNew(
                person_id=person_id,
                kind=NoticeKind.PAID,
                key=paid_notice_key(payout_id),
                payout_id=payout_id,
                reward_id=reward_id,
            )
            for payout_id, person_id, reward_id in rows
        ],
        now=now,
    )


def _settle_rows_update(payouts: list[Payout], *, now: datetime) -> None:
    fields = ["settled_entry", "status", "settled_at", "settled_via", "bank_debit_line_id", "updated_at"]
    if connection.vendor != "postgresql":
        Payout.objects.bulk_update(payouts, fields, batch_size=500)
        return
    # One UPDATE over arrays: Django's bulk_update builds a CASE per field per row, which costs
    # more Python than the database spends on the whole statement.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Payout._meta.db_table} AS p SET status = %s, settled_entry_id = u.entry_id, "
            "settled_at = %s, settled_via = u.via, bank_debit_line_id = u.line_id, updated_at = %s "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::varchar[], %s::bigint[]) AS u(id, entry_id, via, line_id) "
            "WHERE p.id = u.id",
            [
                PayoutStatus.SETTLED.value,
                now,
                now,
                [p.pk for p in payouts],
                [p.settled_entry.pk for p in payouts],
                [p.settled_via for p in payouts],
                [p.bank_debit_line_id for p in payouts],
            ],
        )
