"""The payout state machine and the money each step moves. Every function here runs inside the
caller's transaction with the payout row already locked (``payout_lock``), so a status change, its
ledger entry and its PayoutEvent commit together or not at all.

Money (DESIGN §4), all balanced entries with keys derived from the payout id and the transition:

* sent:      ``recipient:<person>:payable`` → ``payouts:in_transit``     (the rail accepted)
* settled:   ``payouts:in_transit`` → ``platform:bank:<iban>``         (rail, pain.002 or bank line)
             (a PayPal payout: → ``platform:paypal:<currency>``, from PayPal's item status)
* failed:    ``payouts:in_transit`` → payable, only if it had been sent
* returned:  ``platform:bank:<iban>`` → payable                         (the money came back)

A bank line may show a settlement or a return with the bank's charge in it (``bank_minor``: a
debit of 5.35 for a payout of 5.00, a return of 4.50 of 5.00): the person's side moves by the
payout's amount, the bank by what the bank booked, and the difference goes to
``platform:bank_fees`` (a charge refunded with a reversal comes off it again).

Settlement and return can be undone by reconciliation (a match undone), so their keys carry a
sequence number (how many times that step happened before): a re-match posts a fresh entry
instead of replaying the reversed one.

The person is told (paid, failed, returned) by a notice recorded in the same transaction as the
step (``notice_record``), so a worker killed after the commit loses no message.

Locks (classes 6 to 8 of the engine's order, ``core.locks``): statement lines (the matching
engine locks a chunk's lines before its matchers run), then a payout batch row, then payout rows
in ascending id, then ledger accounts (ascending id). Applying a pain.002
(``batches``), the batch matcher and the download lock the batch, then its payouts; erasure and
the retention purge, declared by payouts (``payouts.privacy``), lock through ``payouts.payment_files.payouts_lock``
in the same order, after the person's root row (a payout path never takes a person's lock) and
the person's statement lines. Code holding a payout never asks for its batch or a line.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from campaigns.services.rewards import recipient_payable_account
from core.exceptions import InvalidTransition
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from core.queue import enqueue
from payouts import conf
from payouts.models import Payout, PayoutEvent, PayoutItem, PayoutStatus
from payouts.rails import get_rail, rail_names
from payouts.rails.base import Rail
from payouts.services.test_mode import payout_is_test
from recipients.models import NoticeKind
from recipients.services.notices import NoticeNew, notices_record
from reconciliation.models import Account, AccountKind, PlatformBankAccount
from reconciliation.services import Leg, account_get_or_create, bank_fees_account, ledger_entry_post
from reconciliation.test_books import trial_in_transit_account

IN_TRANSIT = "payouts:in_transit:{currency}"


EXECUTE_TASK = "payouts.tasks.payout_execute_task"
_finishing_here: ContextVar[bool] = ContextVar("payouts_finishing_here", default=False)


@contextmanager
def finishing_here() -> Iterator[None]:
    """The caller finishes the payouts it settles itself, right after (``payout_rewards_mark_paid``
    in the same task): no follow-up task is enqueued for them. A worker that dies in between leaves
    them to the tick, which finishes settled payouts whose rewards are still payable."""
    token = _finishing_here.set(True)
    try:
        yield
    finally:
        _finishing_here.reset(token)


def payouts_execute_enqueue(*, payout_ids: list[int], now: datetime) -> None:
    """Enqueue each payout's execute task in the caller's transaction and mark the payouts queued,
    so the sweep (``payouts_enqueue_due``) adds no second task while one waits. The task's claim
    (or its finding nothing to claim) clears the mark."""
    Payout.objects.filter(pk__in=payout_ids).update(queued_at=now)
    for payout_id in payout_ids:
        enqueue(EXECUTE_TASK, payout_id)


def usable_rails() -> dict[str, Rail]:
    """The configured rails that can be built (a rail missing its credentials is unavailable)."""
    rails = {}
    for name in rail_names():
        try:
            rails[name] = get_rail(name)
        except ImproperlyConfigured:
            continue
    return rails


def in_transit_account(currency: str, *, test: bool = False) -> Account:
    """``payouts:in_transit:<CUR>``, or the test books' own for a test payout."""
    if test:
        return trial_in_transit_account(currency=currency)
    return account_get_or_create(
        code=IN_TRANSIT.format(currency=currency),
        name=f"Payouts in transit {currency}",
        kind=AccountKind.LIABILITY,
        currency=currency,
        owner_type="platform",
    )


def debtor_bank_account(currency: str) -> PlatformBankAccount | None:
    """The platform bank account payouts in ``currency`` are paid from."""
    iban = conf.debtor_ibans().get(currency)
    accounts = PlatformBankAccount.objects.select_related("ledger_account").filter(currency=currency, is_active=True)
    if iban:
        accounts = accounts.filter(iban=iban)
    return accounts.order_by("id").first()


def funding_account_code(*, rail: Rail, currency: str) -> str | None:
    """The ledger account a payout on ``rail`` in ``currency`` is paid from, and settles against:
    the rail's own balance where it has one (PayPal's: ``platform:paypal:<currency>``, an asset
    mirroring a balance the provider keeps, so it may go below zero in the books until ops
    record a top-up), else the platform bank account of the currency. None: there is none yet."""
    if rail.funding_account_code_format:
        return account_get_or_create(
            code=rail.funding_account_code_format.format(currency=currency),
            name=f"{rail.name} balance {currency}",
            kind=AccountKind.ASSET,
            currency=currency,
            allow_overdraft=True,
            owner_type="platform",
        ).code
    debtor = debtor_bank_account(currency)
    return debtor.ledger_account.code if debtor is not None else None


def payout_lock(payout_id: int) -> Payout:
    return Payout.objects.select_for_update(of=("self",)).get(pk=payout_id)


def event_record(payout: Payout, *, kind: str, from_status: str, actor=None, data=None, now=None) -> PayoutEvent:
    hook_fire(AUDIT_ROWS_WRITTEN)
    return PayoutEvent.objects.create(
        payout=payout,
        kind=kind,
        from_status=from_status,
        to_status=payout.status,
        actor=actor,
        data=data or {},
        created_at=now or timezone.now(),
    )


def _seq(payout: Payout, kind: str) -> int:
    return PayoutEvent.objects.filter(payout=payout, kind=kind).count()


def _post(payout: Payout, *, key: str, kind: str, debit: Account, credit: Account, memo: str):
    return ledger_entry_post(
        idempotency_key=key,
        kind=kind,
        legs=[Leg.debit(debit, payout.amount_minor), Leg.credit(credit, payout.amount_minor)],
        memo=memo[:500],
        reference_type="payout",
        reference_id=str(payout.pk),
    ).entry


def _payable(payout: Payout) -> Account:
    return recipient_payable_account(person_id=payout.person_id, currency=payout.currency)


def _bank(payout: Payout, bank: Account | None) -> Account:
    return bank or Account.objects.get(code=payout.debtor_account_code)


def _save(payout: Payout, now: datetime, *fields: str) -> None:
    payout.updated_at = now
    payout.save(update_fields=[*fields, "updated_at"])


def paid_notice_key(payout_id: int) -> str:
    """The settlement's notice: once per payout, whichever path settles it (this one or the bulk one)."""
    return f"payout:{payout_id}:paid"


def notice_record(payout: Payout, *, kind: str, key: str, data: dict | None = None) -> None:
    """Tell the person about this step, in its transaction; the link opens the payout's first reward."""
    reward_id = (
        PayoutItem.objects.filter(payout=payout).order_by("reward_id").values_list("reward_id", flat=True).first()
    )
    notices_record(
        notices=[
            NoticeNew(
                person_id=payout.person_id,
                kind=kind,
                key=key,
                payout_id=payout.pk,
                reward_id=reward_id,
                data=data or {},
            )
        ]
    )


def items_release(payout: Payout) -> None:
    """The payout's rewards may go into a new payout."""
    PayoutItem.objects.filter(payout=payout, active=True).update(active=False)


def step_submitted(
    payout: Payout, *, now: datetime, rail_reference: str = "", service_level: str = "", actor=None
) -> None:
    """submitting | created (file batches) → submitted: payable → in transit."""
    previous = payout.status
    payout.sent_entry = _post(
        payout,
        key=f"payout:{payout.pk}:sent",
        kind="payout_sent",
        debit=_payable(payout),
        credit=in_transit_account(payout.currency, test=payout_is_test(payout)),
        memo=f"Payout {payout.end_to_end_id} sent on {payout.rail}",
    )
    payout.status = PayoutStatus.SUBMITTED
    payout.submitted_at = now
    if rail_reference:
        payout.rail_reference = rail_reference[:120]
    if service_level:
        payout.service_level = service_level
    _save(payout, now, "sent_entry", "status", "submitted_at", "rail_reference", "service_level")
    event_record(payout, kind="payout.submitted", from_status=previous, actor=actor, now=now)


# A payout can be settled more than once (a settlement undone, the debit seen again): each one
# posts its own entry, keyed by how many settlements were recorded before. Both paths — this one
# and the bulk settlement in ``actions`` — count and key through these two, so a replay of the
# same settlement always finds its entry and can never post a second one.
SETTLEMENT_KINDS = ("payout.settled", "payout.debit_seen")


def settled_entry_key(payout_id: int, seq: int) -> str:
    return f"payout:{payout_id}:settled:{seq}"


def _fee_legs(payout: Payout, fee_minor: int) -> list[Leg]:
    """The bank's charge on this payout's booking: a fee (positive) is an expense, a fee the bank
    gave back (negative) comes off it."""
    if fee_minor == 0:
        return []
    fees = bank_fees_account(payout.currency)
    return [Leg.debit(fees, fee_minor) if fee_minor > 0 else Leg.credit(fees, -fee_minor)]


def settled_entry_post(payout: Payout, *, via: str, bank: Account | None = None, bank_minor: int | None = None):
    """in transit → bank; ``bank_minor`` is what left the bank when it added its charge."""
    seq = PayoutEvent.objects.filter(payout=payout, kind__in=SETTLEMENT_KINDS).count()
    left = payout.amount_minor if bank_minor is None else bank_minor
    return ledger_entry_post(
        idempotency_key=settled_entry_key(payout.pk, seq),
        kind="payout_settled",
        legs=[
            Leg.debit(in_transit_account(payout.currency, test=payout_is_test(payout)), payout.amount_minor),
            *_fee_legs(payout, left - payout.amount_minor),
            Leg.credit(_bank(payout, bank), left),
        ],
        memo=f"Payout {payout.end_to_end_id} settled ({via})"[:500],
        reference_type="payout",
        reference_id=str(payout.pk),
    ).entry


def step_settled(
    payout: Payout,
    *,
    now: datetime,
    via: str,
    bank: Account | None = None,
    entry=None,
    actor=None,
    bank_minor: int | None = None,
) -> None:
    """submitted → settled: in transit → bank (``entry`` when a batch booking posted it for many;
    ``bank_minor`` what the bank line booked, charge included)."""
    payout.settled_entry = entry or settled_entry_post(payout, via=via, bank=bank, bank_minor=bank_minor)
    payout.status = PayoutStatus.SETTLED
    payout.settled_at = now
    payout.settled_via = via[:40]
    _save(payout, now, "settled_entry", "status", "settled_at", "settled_via")
    event_record(
        payout, kind="payout.settled", from_status=PayoutStatus.SUBMITTED, actor=actor, data={"via": via}, now=now
    )
    notice_record(payout, kind=NoticeKind.PAID, key=paid_notice_key(payout.pk))
    if not _finishing_here.get():
        enqueue("payouts.tasks.payout_settled_followup_task", payout.pk)


def step_failed(
    payout: Payout, *, now: datetime, reason_code: str, reason_text: str, actor=None, notify: bool = True
) -> None:
    """created | submitting | submitted → failed; money sent to the rail comes back to payable.
    ``notify=False`` when the failure is ours, not the person's account (an expired file): they
    are paid again without being asked to check their IBAN."""
    previous = payout.status
    if payout.sent_entry_id:
        payout.back_entry = _post(
            payout,
            key=f"payout:{payout.pk}:failed",
            kind="payout_failed",
            debit=in_transit_account(payout.currency, test=payout_is_test(payout)),
            credit=_payable(payout),
            memo=f"Payout {payout.end_to_end_id} failed: {reason_code}",
        )
    payout.status = PayoutStatus.FAILED
    payout.failed_at = now
    payout.reason_code = (reason_code or "NARR")[:8]
    payout.reason_text = (reason_text or "")[:500]
    _save(payout, now, "back_entry", "status", "failed_at", "reason_code", "reason_text")
    items_release(payout)
    event_record(
        payout,
        kind="payout.failed",
        from_status=previous,
        actor=actor,
        data={"reason_code": payout.reason_code},
        now=now,
    )
    if notify:
        notice_record(
            payout, kind=NoticeKind.FAILED, key=f"payout:{payout.pk}:failed", data={"reason_code": payout.reason_code}
        )


def step_returned(
    payout: Payout,
    *,
    now: datetime,
    via: str,
    reason_code: str,
    reason_text: str,
    bank: Account | None = None,
    actor=None,
    bank_minor: int | None = None,
) -> None:
    """settled (or submitted, when the bank statement shows the return first) → returned: the
    money came back to the bank and is owed to the person again, all of it: ``bank_minor`` is what
    the bank booked back (less its charge), the charge goes to the bank-fee account."""
    seq = _seq(payout, "payout.returned")
    back = payout.amount_minor if bank_minor is None else bank_minor
    payout.back_entry = ledger_entry_post(
        idempotency_key=f"payout:{payout.pk}:returned:{seq}",
        kind="payout_returned",
        legs=[
            Leg.debit(_bank(payout, bank), back),
            *_fee_legs(payout, payout.amount_minor - back),
            Leg.credit(_payable(payout), payout.amount_minor),
        ],
        memo=f"Payout {payout.end_to_end_id} returned: {reason_code}"[:500],
        reference_type="payout",
        reference_id=str(payout.pk),
    ).entry
    previous = payout.status
    payout.status = PayoutStatus.RETURNED
    payout.returned_at = now
    payout.returned_via = via[:40]
    payout.reason_code = (reason_code or "MS03")[:8]
    payout.reason_text = (reason_text or "")[:500]
    _save(payout, now, "back_entry", "status", "returned_at", "returned_via", "reason_code", "reason_text")
    items_release(payout)
    event_record(
        payout,
        kind="payout.returned",
        from_status=previous,
        actor=actor,
        data={"via": via, "reason_code": reason_code},
        now=now,
    )
    notice_record(
        payout,
        kind=NoticeKind.RETURNED,
        key=f"payout:{payout.pk}:returned:{seq}",
        data={"reason_code": payout.reason_code},
    )


def drive(
    payout: Payout,
    *,
    target: str,
    now: datetime,
    via: str,
    reason_code: str = "",
    reason_text: str = "",
    rail_reference: str = "",
    service_level: str = "",
    bank: Account | None = None,
    actor=None,
    bank_minor: int | None = None,
) -> bool:
    """Move a locked payout forward to ``target`` (submitted, settled, returned or failed) through
    every step in between, e.g. submitting → submitted → settled when an instant rail answers
    "settled". ``service_level`` is how the rail said it sends the payment (kept when it is
    sent); ``bank_minor`` is what a bank line booked back for a return (``step_returned``).
    Returns False when the payout is already there or past it (idempotent replays).
    Raises InvalidTransition for a move the machine does not allow (e.g. settled → failed)."""
    order = [PayoutStatus.CREATED, PayoutStatus.SUBMITTING, PayoutStatus.SUBMITTED, PayoutStatus.SETTLED]
    status = payout.status
    if status == target or (
        status == PayoutStatus.RETURNED and target in (PayoutStatus.SETTLED, PayoutStatus.SUBMITTED)
    ):
        return False
    if target == PayoutStatus.SUBMITTED and status == PayoutStatus.SETTLED:
        return False
    if status in (PayoutStatus.FAILED, PayoutStatus.CANCELLED, PayoutStatus.RETURNED):
        raise InvalidTransition(f"A {status} payout cannot become {target}.", details={"payout_id": payout.pk})
    if target == PayoutStatus.FAILED:
        if status == PayoutStatus.SETTLED:
            # A rail that reports "failed" after it had settled (Wise's bounce path) means returned.
            step_returned(
                payout, now=now, via=via, reason_code=reason_code, reason_text=reason_text, bank=bank, actor=actor
            )
        else:
            step_failed(payout, now=now, reason_code=reason_code, reason_text=reason_text, actor=actor)
        return True
    goal = order.index(target) if target in order else order.index(PayoutStatus.SETTLED)
    if order.index(status) < order.index(PayoutStatus.SUBMITTED) <= goal:
        step_submitted(payout, now=now, rail_reference=rail_reference, service_level=service_level, actor=actor)
    if payout.status == PayoutStatus.SUBMITTED and goal >= order.index(PayoutStatus.SETTLED):
        step_settled(payout, now=now, via=via, bank=bank, actor=actor)
    if target == PayoutStatus.RETURNED:
        step_returned(
            payout,
            now=now,
            via=via,
            reason_code=reason_code,
            reason_text=reason_text,
            bank=bank,
            actor=actor,
            bank_minor=bank_minor,
        )
    return True
