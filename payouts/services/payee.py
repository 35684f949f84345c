"""Verification of Payee for payouts: one check before the money leaves, the campaigns' policy
on its answer, and the person's part when the payout waits for them.

Every payout is checked once (``vop_checked_at``): by the execution engine right before it
submits, or, on file rails, before the payout may go into a file (``payouts_payee_verify``). A
rail with no check of its own asks the configured EPC VoP service; with none, the answer is
``not_possible``. The answer's action comes from the policy of the campaigns whose rewards the
payout holds, the strictest winning (block > review > ask > pay), so no campaign's rule is
weakened by sharing a payout. A brand's withdrawal to its own account pays no campaign's rewards
and takes the fixed ``WITHDRAWAL_POLICY`` instead (any other payout without rewards, the
campaign fields' defaults):

* ``pay``: the payout goes on;
* ``review``: held (``needs_review``) until staff release it (``payout_approve``) or cancel it;
* ``ask`` (close match): held until the person, on their status page, confirms the name their
  bank gave (``payout_payee_confirm``: the payout is made out to that name and goes on) or
  corrects their details;
* ``block``: held until the person corrects their details.

Corrected details (``payouts_payee_recheck``) cancel the waiting payout — it never left, so no
money moved and its rewards are payable again — and new payouts go to the details as they are
now, checked again. The money stays the person's throughout: a hold never fails a payout.
"""

import logging
import time
from collections import defaultdict
from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from campaigns.models import Campaign, VopAction
from core.exceptions import InvalidTransition
from payouts.models import Payout, PayoutItem, PayoutStatus, Withdrawal
from payouts.rails import get_rail
from payouts.rails.base import PayeeMatch, Rail, RetryableRailError, VerifyPayeeResult
from payouts.services.actions import cancel_locked
from payouts.services.create import CreateResult, payouts_create_for_payable
from payouts.services.states import event_record, notice_record, payout_lock, payouts_execute_enqueue
from recipients.models import BankAccount, NoticeKind, Person
from recipients.normalise import IBAN
from recipients.selectors import person_cluster_ids, person_current_bank_account
from recipients.services import bank_account_holder_name_set

# Strictest last: a payout holding rewards of several campaigns takes the strictest action.
STRICTNESS = [VopAction.PAY, VopAction.ASK, VopAction.REVIEW, VopAction.BLOCK]
POLICY_FIELDS = {
    PayeeMatch.NO_MATCH: "vop_no_match",
    PayeeMatch.CLOSE_MATCH: "vop_close_match",
    PayeeMatch.NOT_POSSIBLE: "vop_not_possible",
}
HOLD_REASONS = {
    VopAction.REVIEW: "Verification of Payee: {result}; staff review before paying.",
    VopAction.ASK: "Verification of Payee: close match; waiting for the person to confirm the bank's name.",
    VopAction.BLOCK: "Verification of Payee: {result}; waiting for the person to correct their details.",
}
RANK = {action.value: rank for rank, action in enumerate(STRICTNESS)}
# A withdrawal's account was verified by a second ops person against the brand's company
# documents, and its payee is the brand, with no page to confirm a bank's name on: a match pays,
# any other answer goes to ops, who see it beside the payout and release or cancel it. Never
# "ask" (nobody would answer) and never paid unseen.
WITHDRAWAL_POLICY = {outcome: VopAction.REVIEW for outcome in POLICY_FIELDS}
DEFAULT_POLICY = {outcome: Campaign._meta.get_field(field).default for outcome, field in POLICY_FIELDS.items()}
PERSON_ACTIONS = (VopAction.ASK, VopAction.BLOCK)
_MISMATCHES = (PayeeMatch.NO_MATCH, PayeeMatch.CLOSE_MATCH)
CHECK_CHUNK = 2000
logger = logging.getLogger(__name__)


def payout_vop_action(*, payout_id: int, outcome: str) -> VopAction:
    """The action the policy of the payout's campaigns (a withdrawal's: ``WITHDRAWAL_POLICY``)
    takes on a VoP answer (a match pays)."""
    return _vop_actions({payout_id: outcome})[payout_id]


def _vop_actions(outcomes: dict[int, str]) -> dict[int, VopAction]:
    """The strictest action of each payout's campaigns on its answer, for many payouts at once;
    ``WITHDRAWAL_POLICY`` for a withdrawal's payout (it holds no rewards). The one place a
    payout's policy is looked up."""
    policies: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    for payout_id, *policy in (
        PayoutItem.objects.filter(payout_id__in=list(outcomes))
        .values_list(
            "payout_id",
            "reward__campaign__vop_no_match",
            "reward__campaign__vop_close_match",
            "reward__campaign__vop_not_possible",
        )
        .distinct()
    ):
        policies[payout_id].append(tuple(policy))
    withdrawals = set(Withdrawal.objects.filter(payout_id__in=list(outcomes)).values_list("payout_id", flat=True))
    actions = {}
    columns = {outcome: i for i, outcome in enumerate(POLICY_FIELDS)}
    for payout_id, outcome in outcomes.items():
        column = columns.get(outcome)
        if column is None:
            actions[payout_id] = VopAction.PAY
            continue
        fixed = WITHDRAWAL_POLICY if payout_id in withdrawals else DEFAULT_POLICY
        chosen = {row[column] for row in policies[payout_id]} or {fixed[outcome]}
        actions[payout_id] = VopAction(max(chosen, key=RANK.__getitem__))
    return actions


def payee_check_record(payout: Payout, *, vop: VerifyPayeeResult, action: VopAction, now: datetime) -> None:
    """Store a check's answer and the action taken on a locked payout, and hold it unless it
    pays. In the caller's transaction. The person is told (after commit) when they must act."""
    previous = payout.status
    payout.vop_result = vop.outcome
    payout.vop_suggested_name = (vop.suggested_name or "")[:140]
    payout.vop_checked_at = now
    payout.vop_action = action
    fields = ["vop_result", "vop_suggested_name", "vop_checked_at", "vop_action"]
    if action != VopAction.PAY:
        payout.status = PayoutStatus.CREATED
        payout.needs_review = True
        payout.review_reason = HOLD_REASONS[action].format(result=vop.outcome.replace("_", " "))[:200]
        fields += ["status", "needs_review", "review_reason"]
    payout.updated_at = now
    payout.save(update_fields=[*fields, "updated_at"])
    _accounts_checked([payout.bank_account_id]).update(
        payee_check_result=vop.outcome, payee_check_name=(vop.suggested_name or "")[:200], payee_checked_at=now
    )
    data = {"vop_result": vop.outcome, "action": action, "suggested": vop.suggested_name or ""}
    if action in PERSON_ACTIONS:
        event_record(payout, kind="payout.payee_check", from_status=previous, data=data, now=now)
        notice_record(payout, kind=NoticeKind.PAYEE_CHECK, key=f"payout:{payout.pk}:payee_check")
    elif action == VopAction.REVIEW:
        event_record(payout, kind="payout.review", from_status=previous, data=data, now=now)
    elif vop.outcome in _MISMATCHES:
        event_record(payout, kind="payout.vop_paid_anyway", from_status=previous, data=data, now=now)


def payee_ask(rail: Rail, payout: Payout) -> VerifyPayeeResult:
    """The payee check of ``payout``'s account on ``rail`` (called outside any transaction). A
    local account has none to ask: Verification of Payee is the EU's name-against-IBAN check, so
    it is ``not_possible`` and the campaigns' policy for that answer applies. Raises
    RetryableRailError when the check could not be asked."""
    if payout.bank_account.kind != IBAN or not rail.capabilities().verify_payee:
        return VerifyPayeeResult(outcome=PayeeMatch.NOT_POSSIBLE)
    return rail.verify_payee(name=payout.creditor_name, iban=payout.bank_account.iban())


def payouts_payee_verify(*, payout_ids: list[int], now: datetime | None = None) -> dict[int, str]:
    """Check the payees of payouts the engine does not submit itself (file rails), before they
    may go into a file; those already checked, in a file or past created are skipped. Returns
    {payout id: action taken}. Each check runs outside any transaction (one whose VoP service
    could not be asked is logged and left unchecked, out of files); the answers are recorded in
    short durable transactions of up to 2,000 payouts that re-check each payout under its lock
    (ascending ids), so a check run twice records once. A single payout is a batch of one."""
    payouts = list(
        Payout.objects.filter(
            pk__in=payout_ids, status=PayoutStatus.CREATED, vop_checked_at__isnull=True, batch__isnull=True
        )
        .select_related("bank_account")
        .only("pk", "rail", "creditor_name", "bank_account__kind", "bank_account__ciphertext")
        .order_by("pk")
    )
    rails: dict[str, Rail] = {}
    answers: dict[int, VerifyPayeeResult] = {}
    for payout in payouts:
        rail = rails.setdefault(payout.rail, get_rail(payout.rail))
        try:
            answers[payout.pk] = payee_ask(rail, payout)
        except RetryableRailError:
            logger.info("payout %s: the payee check could not be asked, it stays out of files", payout.pk)
    actions = _vop_actions({pk: vop.outcome for pk, vop in answers.items()})
    now = now or timezone.now()
    recorded: dict[int, str] = {}
    ids = sorted(answers)
    for start in range(0, len(ids), CHECK_CHUNK):
        with transaction.atomic(durable=True):
            locked = (
                Payout.objects.select_for_update(of=("self",))
                .filter(pk__in=ids[start : start + CHECK_CHUNK], status=PayoutStatus.CREATED)
                .filter(vop_checked_at__isnull=True, batch__isnull=True)
                .order_by("pk")
                .values_list("pk", "bank_account_id")
            )
            plain = defaultdict(list)  # matches and "not possible" paid: one UPDATE per answer
            for payout_id, bank_account_id in locked:
                vop, action = answers[payout_id], actions[payout_id]
                # A mismatch paid by policy is recorded one by one: it leaves an audit event.
                if action == VopAction.PAY and not vop.suggested_name and vop.outcome not in _MISMATCHES:
                    plain[vop.outcome].append((payout_id, bank_account_id))
                else:
                    payee_check_record(payout_lock(payout_id), vop=vop, action=action, now=now)
                recorded[payout_id] = action
            for outcome, group in plain.items():
                Payout.objects.filter(pk__in=[payout_id for payout_id, _ in group]).update(
                    vop_result=outcome,
                    vop_suggested_name="",
                    vop_checked_at=now,
                    vop_action=VopAction.PAY,
                    updated_at=now,
                )
                _accounts_checked({account_id for _, account_id in group}).update(
                    payee_check_result=outcome, payee_check_name="", payee_checked_at=now
                )
    return recorded


def _accounts_checked(account_ids) -> QuerySet[BankAccount]:
    """The accounts whose payee check is kept on the account (what other brands may take as proof
    that the holder is paid there, ``recipients.selectors.iban_holders``): not a test tenant's,
    whose check is the sandbox's answer; the payout keeps it either way."""
    return BankAccount.objects.filter(pk__in=account_ids).exclude(person__brand__livemode=False)


def payout_waits_for_person(payout: Payout) -> bool:
    """Whether ``payout`` is one of ``payouts_waiting_for_person``."""
    return (
        payout.status == PayoutStatus.CREATED
        and payout.needs_review
        and payout.vop_action in PERSON_ACTIONS
        and not Withdrawal.objects.filter(payout_id=payout.pk).exists()
    )


def payout_payee_confirm(*, payout: Payout, name: str) -> Payout:
    """The person confirms, on their own status page, the name their bank gave for a close match:
    the payout is made out to that name, released and executed (after commit), and the name is
    kept as the account's holder name for their next payouts. ``name`` is the name the page
    showed; a different one (the bank's answer changed since) is refused.

    Idempotent: confirming again, once released, returns the payout unchanged. Raises
    InvalidTransition (``payee_confirm_not_waiting``: the payout does not wait for this;
    ``payee_name_changed``; ``payee_account_changed``: the person's account is no longer the
    payout's). One durable transaction."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        locked = payout_lock(payout.pk)
        confirmed = locked.events.filter(kind="payout.payee_confirmed").exists()
        if confirmed and locked.creditor_name == name:
            return locked
        if not payout_waits_for_person(locked) or locked.vop_action != VopAction.ASK:
            raise InvalidTransition(
                "This payout is not waiting for a name to confirm.", code="payee_confirm_not_waiting"
            )
        if not name or name != locked.vop_suggested_name:
            raise InvalidTransition(_("Your bank's answer has changed: please look again."), code="payee_name_changed")
        if _moved(locked):
            # The account changed by another way (the brand's API): the name was checked for the old one.
            raise InvalidTransition(
                _("Your bank details have changed since: please give them again."), code="payee_account_changed"
            )
        previous = locked.creditor_name
        locked.creditor_name = name
        locked.needs_review = False
        locked.review_reason = ""
        locked.updated_at = now
        locked.save(update_fields=["creditor_name", "needs_review", "review_reason", "updated_at"])
        event_record(
            locked, kind="payout.payee_confirmed", from_status=locked.status, data={"name_was": previous}, now=now
        )
        bank_account_holder_name_set(person=locked.person, fingerprint=locked.bank_account.iban_fingerprint, name=name)
        payouts_execute_enqueue(payout_ids=[locked.pk], now=now)
    return locked


def payouts_waiting_for_person():
    """Payouts that wait for their person: a close match to confirm, or details to correct.
    Never a withdrawal's: it goes to the account the brand chose and ops verified, whichever
    account its payee has as current since (the brand registering another must not cancel or move
    it), and ops, not its payee, answer for it (``WITHDRAWAL_POLICY``). So the rechecks after an
    account change, which start from here, leave it alone."""
    return Payout.objects.filter(
        status=PayoutStatus.CREATED, needs_review=True, vop_action__in=PERSON_ACTIONS, withdrawal__isnull=True
    )


def payouts_payee_recheck(*, person: Person) -> CreateResult | None:
    """The person gave their details again on their own claim link: each of their payouts waiting
    for them (a close match to confirm, details to correct) is cancelled — it never left, no money
    moved, its rewards are payable again — and new payouts are made to the details as they are
    now, to be checked again. None when nothing was waiting (nothing happens: idempotent). Each
    cancel is its own short durable transaction; then ``payouts_create_for_payable``."""
    return _recheck(person, moved_only=False, reason="The person corrected their details.")


def payouts_payee_recheck_moved(
    *, person: Person | None = None, limit: int = 500, deadline: float | None = None
) -> int:
    """Payouts waiting for their person (of ``person``'s cluster, or anyone's) whose account has
    since been replaced another way (the brand's API, an admin) are rechecked like a correction:
    cancelled and made again to the account as it is now. A waiting payout on the current
    account is left alone, however often this runs. Called by the account-change hook's task and
    by the every-minute tick, which finds what a lost task missed (none started after ``deadline``,
    a ``time.monotonic()``). Returns how many people had
    payouts replaced."""
    waiting = payouts_waiting_for_person().select_related("person")
    if person is not None:
        waiting = waiting.filter(person_id__in=person_cluster_ids(person=person))
    else:
        # What may have moved, in SQL (a replaced account is no longer current); the check under
        # the payout's lock decides.
        waiting = waiting.filter(bank_account__is_current=False)
    people = {p.person_id: p.person for p in waiting.order_by("id")[:limit] if _moved(p)}
    rechecked = 0
    for who in people.values():
        if deadline is not None and time.monotonic() >= deadline:
            break  # the next run goes on: each recheck may ask the bank about the payee
        rechecked += _recheck(who, moved_only=True, reason="The account was replaced.") is not None
    return rechecked


def _moved(payout: Payout) -> bool:
    """Whether the person's current account is no longer the one ``payout`` was made out to."""
    current = person_current_bank_account(person=payout.person)
    return current is None or current.pk != payout.bank_account_id


def _recheck(person: Person, *, moved_only: bool, reason: str) -> CreateResult | None:
    waiting = list(
        payouts_waiting_for_person()
        .filter(person_id__in=person_cluster_ids(person=person))
        .values_list("pk", flat=True)
    )
    cancelled = 0
    for payout_id in waiting:
        with transaction.atomic(durable=True):
            locked = payout_lock(payout_id)
            if payout_waits_for_person(locked) and (not moved_only or _moved(locked)):
                cancel_locked(locked, actor=None, reason=reason, now=timezone.now())
                cancelled += 1
    if not waiting or (moved_only and not cancelled):
        return None
    return payouts_create_for_payable(person=person)
