"""Creating payouts from payable rewards."""

import logging
import secrets
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from campaigns.models import PayoutMode
from payouts import conf
from payouts.iso import ACCOUNT_DETAIL_CODES, EXPIRED_REASON_CODE
from payouts.models import Payout, PayoutItem, PayoutStatus, RouteRule
from payouts.rails import get_rail
from payouts.rails.routing import NoRoute, route
from payouts.rails.routing import RouteRule as RouteSpec
from payouts.rails.sandbox import SandboxRail
from payouts.selectors import rewards_awaiting_payout
from payouts.services.states import event_record, funding_account_code, payouts_execute_enqueue, usable_rails
from payouts.services.test_mode import live_money_refuses_sandbox, trial_debtor_code, trial_route
from recipients.models import BankAccount, NoticeKind, Person
from recipients.normalise import BANK, destination_kind
from recipients.selectors import person_cluster_ids, person_current_bank_account, person_root
from recipients.services.notices import NoticeNew, notices_record

logger = logging.getLogger(__name__)


@dataclass
class CreateResult:
    created: list[int] = field(default_factory=list)
    waiting_for_iban: list[int] = field(default_factory=list)  # person ids
    waiting: int = 0  # groups below the minimum or not yet due (aggregate)


def end_to_end_id_new() -> str:
    """25 characters of the SEPA set, unique in practice (64 random bits) and by constraint."""
    return f"JBP{timezone.now():%y%m%d}{secrets.token_hex(8).upper()}"


def _route(*, currency: str, country: str, amount_minor: int, account_type: str, test: bool = False) -> tuple[str, str]:
    """The rail (and fallback) for one payout: the active routing rules, else the default rail,
    else the first other configured rail. A rail that cannot carry the payout — the kind of
    destination (``Rail.destination_kinds``: a bank account or PayPal), its currency, country,
    amount or type of account (the SEPA file and the sandbox take only IBANs) — counts as
    unavailable, so no rule can send a payout where it cannot travel; so does the sandbox where
    production refuses it for live money. Rules that name no rail of a PayPal destination's kind
    (routing written for bank accounts) leave it to the default order. A test payout goes to the
    sandbox whatever the rules say (``trial_route``). Raises NoRoute."""
    if test:
        return trial_route(currency=currency, country=country, amount_minor=amount_minor, account_type=account_type)
    usable = usable_rails()
    no_sandbox = live_money_refuses_sandbox()
    kind = destination_kind(account_type)
    carries = {
        name: kind in rail.destination_kinds
        and rail.capabilities().supports(
            currency=currency, country=country, amount_minor=amount_minor, account_type=account_type
        )
        and not (no_sandbox and isinstance(rail, SandboxRail))
        for name, rail in usable.items()
    }
    of_kind = {name for name, rail in usable.items() if kind in rail.destination_kinds}
    rules = [
        RouteSpec(
            rail=r.rail,
            priority=r.priority,
            currency=r.currency or None,
            country=r.country or None,
            min_amount_minor=r.min_amount_minor,
            max_amount_minor=r.max_amount_minor,
            fallback_rail=r.fallback_rail or None,
        )
        for r in RouteRule.objects.filter(active=True)
    ]
    if not rules or (kind != BANK and not any(r.rail in of_kind or r.fallback_rail in of_kind for r in rules)):
        default = get_rail().name
        rules = [
            RouteSpec(rail=default, priority=0),
            *(RouteSpec(rail=name) for name in sorted(usable) if name != default),
        ]
    primary, fallback = route(
        currency=currency,
        country=country,
        amount_minor=amount_minor,
        rules=rules,
        availability=lambda name: carries.get(name, False),
    )
    return primary, fallback or ""


def account_usable(bank: BankAccount | None, *, currency: str) -> bool:
    """Can we pay ``currency`` into this (current) account? Not when there is none, it was
    erased, it is a local account in another currency, or it bounced before (a return, or a
    failure naming the account): the person must give another."""
    if bank is None or not bank.ciphertext or not bank.pays_in(currency):
        return False
    return not Payout.objects.filter(
        Q(status=PayoutStatus.RETURNED) | Q(status=PayoutStatus.FAILED, reason_code__in=ACCOUNT_DETAIL_CODES),
        bank_account=bank,
    ).exists()


def refused_until(bank: BankAccount, *, currency: str) -> datetime:
    """When a new payout into ``bank`` may be tried after the rail refused the last ones for a
    reason other than the account (an account reason makes it unusable instead): the latest
    refusal plus ``failed_retry_minutes`` doubled for each refusal in a row. A payout failed by
    us (an expired file, DS02) counts for nothing: it is paid again at once."""
    refusals = 0
    latest = None
    recent = Payout.objects.filter(bank_account=bank, currency=currency).order_by("-id")
    for status, code, failed_at in recent.values_list("status", "reason_code", "failed_at")[:20]:
        if status != PayoutStatus.FAILED or code == EXPIRED_REASON_CODE:
            break
        refusals += 1
        latest = latest or failed_at
    if not refusals:
        return datetime.min.replace(tzinfo=UTC)
    minutes = min(conf.failed_retry_minutes() * 2 ** (refusals - 1), conf.failed_retry_max_hours() * 60)
    return latest + timedelta(minutes=minutes)


def _iban_needed_record(*, person_id: int, currency: str, rows: list[dict], total: int) -> None:
    """Ask once per group of rewards (its oldest reward names it and opens the payout form)."""
    first = min(r["id"] for r in rows)
    notices_record(
        notices=[
            NoticeNew(
                person_id=person_id,
                kind=NoticeKind.IBAN_NEEDED,
                key=f"iban_needed:{person_id}:{first}:{currency}",
                reward_id=first,
                data={"amount_minor": total, "currency": currency},
            )
        ]
    )


def _group_due(rows: list[dict], now: datetime) -> bool:
    for row in rows:
        if row["campaign__payout_mode"] != PayoutMode.AGGREGATE:
            return True
        if row["updated_at"] + timedelta(minutes=row["campaign__aggregate_minutes"]) <= now:
            return True
    return False


def payouts_create_for_payable(
    *,
    person: Person | None = None,
    now: datetime | None = None,
    actor=None,
    enqueue: bool = True,
    payable_before: datetime | None = None,
    deadline: float | None = None,
) -> CreateResult:
    """Create payouts for every payable reward that is in no live payout: one payout per person
    and currency, at once for instant campaigns, or once the oldest reward of an aggregate
    campaign has waited its ``aggregate_minutes``; never below the campaigns' ``min_payout_minor``
    (nor ``PAYOUT_MIN_AMOUNT_MINOR``); never to an account still cooling off after a change
    (``BankAccount.usable_from``). A person without a usable account (``account_usable``:
    none, erased, one that bounced, or a local account in another currency) keeps the money
    payable and is asked for one (a notice, once per group of rewards). A payout no configured
    rail can carry is not created: the money stays payable until one can.

    Idempotent and safe to run concurrently: each payout is created in its own durable
    transaction with its rewards locked and re-checked; the partial unique constraint on live
    items is the backstop. Execution is enqueued in the same transaction. Raises nothing for a
    person who cannot be paid yet; they are reported in the result. ``enqueue=False`` leaves
    execution to the caller (a task that runs the new payouts itself, saving a queue hop): the
    payouts are marked queued for it, so the sweep does not enqueue a second executor.

    The sweep passes ``payable_before`` (rewards whose last change is older: what the task the
    change enqueued should have done by then, not what it is about to do) and ``deadline`` (a
    ``time.monotonic()`` after which no further payout is started; the rest waits for its next run).
    """
    now = now or timezone.now()
    result = CreateResult()
    rewards = rewards_awaiting_payout()
    if person is not None:
        rewards = rewards.filter(person_id__in=person_cluster_ids(person=person))
    if payable_before is not None:
        rewards = rewards.filter(updated_at__lt=payable_before)
    groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for row in rewards.values(
        "id",
        "person_id",
        "currency",
        "amount_minor",
        "updated_at",
        "campaign__payout_mode",
        "campaign__aggregate_minutes",
        "campaign__min_payout_minor",
    ):
        groups[(row["person_id"], row["currency"])].append(row)
    for (person_id, currency), rows in sorted(groups.items()):
        if deadline is not None and time.monotonic() >= deadline:
            break
        total = sum(r["amount_minor"] for r in rows)
        minimum = max([conf.min_amount_minor(), *(r["campaign__min_payout_minor"] for r in rows)])
        if total < minimum or not _group_due(rows, now):
            result.waiting += 1
            continue
        payee = Person.objects.get(pk=person_id)
        bank = person_current_bank_account(person=payee)
        if not account_usable(bank, currency=currency):
            result.waiting_for_iban.append(person_id)
            _iban_needed_record(person_id=person_id, currency=currency, rows=rows, total=total)
            continue
        if actor is None and refused_until(bank, currency=currency) > now:
            result.waiting += 1  # staff may pay at once (payout_retry); the sweep waits
            continue
        if bank.usable_from is not None and bank.usable_from > now:
            # A change confirmed on a claim page cools off before money goes to it; staff too wait.
            result.waiting += 1
            continue
        payout_id = _payout_create(
            person=payee,
            bank=bank,
            currency=currency,
            reward_ids=[r["id"] for r in rows],
            now=now,
            actor=actor,
            enqueue=enqueue,
        )
        if payout_id:
            result.created.append(payout_id)
    return result


def payout_row_create(
    *,
    person: Person,
    root: Person,
    bank: BankAccount,
    currency: str,
    amount_minor: int,
    needs_approval: bool,
    test: bool,
    actor,
    enqueue: bool,
    now: datetime,
) -> Payout | None:
    """The payout row to ``bank``, routed and with its debtor account, in the caller's
    transaction: the one way a payout is made, for rewards (``_payout_create``) and for a
    brand's withdrawal (``withdrawal_create``). None when no rail can carry it or no platform
    account can pay it (nothing written)."""
    try:
        rail, fallback = _route(
            currency=currency, country=bank.country, amount_minor=amount_minor, account_type=bank.kind, test=test
        )
    except NoRoute:
        return None
    # A test payout is paid from the test books' bank, never from a live account.
    if test:
        debtor_code = trial_debtor_code(currency=currency)
    else:
        debtor_code = funding_account_code(rail=get_rail(rail), currency=currency)
    if debtor_code is None:
        logger.warning("No platform bank account to pay %s from; payouts wait", currency)
        return None
    return Payout.objects.create(
        person=person,
        amount_minor=amount_minor,
        currency=currency,
        rail=rail,
        fallback_rail=fallback,
        end_to_end_id=end_to_end_id_new(),
        bank_account=bank,
        creditor_name=(bank.holder_name or root.display_name or f"Person {root.pk}")[:140],
        creditor_iban_masked=bank.masked,
        creditor_iban_fingerprint=bank.iban_fingerprint,
        creditor_country=bank.country,
        debtor_account_code=debtor_code,
        requires_approval=needs_approval,
        # A caller that runs the payout itself (``enqueue=False``) is its executor, as a
        # queued task would be: the sweep adds no task for it unless that caller dies
        # before its claim (``payouts_enqueue_due``'s requeue delay).
        queued_at=None if enqueue or needs_approval else now,
        created_by=actor,
        created_at=now,
        updated_at=now,
    )


def _payout_create(
    *, person: Person, bank: BankAccount, currency: str, reward_ids: list[int], now, actor, enqueue: bool
) -> int | None:
    # A person no brand knows (from before people were per brand) is a live brand's.
    test = person.brand_id is not None and not person.brand.livemode
    root = person_root(person=person)
    try:
        with transaction.atomic(durable=True):
            rewards = list(
                rewards_awaiting_payout().filter(pk__in=reward_ids).select_for_update(of=("self",)).order_by("pk")
            )
            if not rewards:
                return None
            amount = sum(r.amount_minor for r in rewards)
            payout = payout_row_create(
                person=person,
                root=root,
                bank=bank,
                currency=currency,
                amount_minor=amount,
                needs_approval=amount >= conf.approval_threshold_minor(),
                test=test,
                actor=actor,
                enqueue=enqueue,
                now=now,
            )
            if payout is None:
                return None
            PayoutItem.objects.bulk_create(
                [PayoutItem(payout=payout, reward=r, amount_minor=r.amount_minor) for r in rewards]
            )
            event_record(
                payout,
                kind="payout.created",
                from_status="",
                actor=actor,
                data={"rewards": [r.pk for r in rewards]},
                now=now,
            )
            if enqueue and not payout.requires_approval:
                payouts_execute_enqueue(payout_ids=[payout.pk], now=now)
    except IntegrityError:
        # A concurrent sweep put one of these rewards into its own payout first.
        return None
    return payout.pk
