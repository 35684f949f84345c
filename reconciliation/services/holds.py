"""Holds: money reserved on an account until it is committed as an entry, voided or expired.

A hold moves ``pending → committed | voided | expired`` exactly once; the hold trigger keeps the
account's ``held_minor`` equal to its pending holds, so the no-overdraft CHECK counts reserved money
as spent. Like ``entries``, every call joins the caller's transaction inside a savepoint of its
own, so a refusal writes nothing and leaves the caller's transaction usable.
"""

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import BigIntegerField, Case, Value, When
from django.utils import timezone

from core.bulk import rows_insert
from core.exceptions import CurrencyMismatch, HoldNotPending, IdempotencyConflict, InactiveAccount, InvalidInput
from reconciliation.db import ledger_error_from
from reconciliation.models import Account, AccountKind, Hold, HoldStatus
from reconciliation.services.accounts import accounts_lock
from reconciliation.services.entries import (
    KEY_MAX_LENGTH,
    MAX_AMOUNT_MINOR,
    EntrySpec,
    Leg,
    PostResult,
    entries_write,
)


@dataclass(frozen=True)
class HoldSpec:
    """One hold for ``ledger_holds_create``."""

    idempotency_key: str
    amount_minor: int
    memo: str = ""
    reference_type: str = ""
    reference_id: str = ""
    expires_at: datetime | None = None


@dataclass(frozen=True)
class HoldResult:
    hold: Hold
    replayed: bool


def ledger_holds_create(*, account: Account, currency: str, holds: Sequence[HoldSpec]) -> list[Hold]:
    """Reserve each of ``holds`` on ``account``: its available balance drops, its posted balance
    does not. Returns the holds in the order given (a single hold is a list of one).

    Idempotent by key: a key held before on the same account for the same amount returns that hold
    and reserves nothing more; for another account or amount it raises IdempotencyConflict.
    All or nothing, in a savepoint of the caller's transaction (or a transaction of its own). The
    database checks every row, so concurrent callers cannot over-reserve a no-overdraft account.
    Raises InsufficientFunds, CurrencyMismatch, InactiveAccount, InvalidInput (an amount that is not
    a positive integer, a bad key, a key twice in the list), IdempotencyConflict.
    """
    if currency != account.currency:
        raise CurrencyMismatch(f"{currency} does not match account {account.code}.")
    if not account.is_active:
        raise InactiveAccount(f"Account {account.code} is inactive.")
    for spec in holds:
        if type(spec.amount_minor) is not int or not 0 < spec.amount_minor <= MAX_AMOUNT_MINOR:
            raise InvalidInput("A hold is a positive integer amount in minor units.", code="invalid_amount")
        if not spec.idempotency_key or len(spec.idempotency_key) > KEY_MAX_LENGTH:
            raise InvalidInput("An idempotency key of 1 to 200 characters is required.", code="invalid_idempotency_key")
    keys = [spec.idempotency_key for spec in holds]
    if len(set(keys)) != len(keys):
        raise InvalidInput("A batch cannot repeat an idempotency key.", code="duplicate_idempotency_key")
    if not holds:
        return []
    for attempt in (1, 2):
        try:
            with transaction.atomic():
                return _holds_insert(account, holds)
        except IntegrityError as exc:
            # A concurrent caller inserted one of the keys first (the table says so, not the error's
            # text): once, then its holds are there to replay.
            if attempt == 2 or not Hold.objects.filter(idempotency_key__in=keys).exists():
                raise ledger_error_from(exc) from exc
    raise AssertionError("unreachable")


def _holds_insert(account: Account, holds: Sequence[HoldSpec]) -> list[Hold]:
    keys = [spec.idempotency_key for spec in holds]
    existing = {hold.idempotency_key: hold for hold in Hold.objects.filter(idempotency_key__in=keys)}
    for spec in holds:
        hold = existing.get(spec.idempotency_key)
        if hold is not None and (hold.account_id, hold.amount_minor) != (account.pk, spec.amount_minor):
            raise IdempotencyConflict(
                f"Idempotency key {spec.idempotency_key!r} was used before for a different hold.",
                details={"hold_id": hold.pk},
            )
    now = timezone.now()
    new = rows_insert(
        Hold,
        [
            Hold(
                idempotency_key=spec.idempotency_key,
                account=account,
                amount_minor=spec.amount_minor,
                currency=account.currency,
                expires_at=spec.expires_at,
                memo=spec.memo[:500],
                reference_type=spec.reference_type,
                reference_id=str(spec.reference_id),
                created_at=now,
            )
            for spec in holds
            if spec.idempotency_key not in existing
        ],
    )
    created = iter(new)
    return [existing.get(spec.idempotency_key) or next(created) for spec in holds]


@dataclass(frozen=True)
class HoldCommit:
    """One hold to turn into an entry, for ``ledger_holds_commit``."""

    hold: Hold
    idempotency_key: str
    kind: str
    legs: Sequence[Leg]
    memo: str = ""
    reference_type: str = ""
    reference_id: str = ""


def ledger_hold_commit(
    *,
    hold: Hold,
    idempotency_key: str,
    kind: str,
    legs: Sequence[Leg],
    memo: str = "",
    reference_type: str = "",
    reference_id: str = "",
) -> PostResult:
    """``ledger_holds_commit`` for one hold."""
    (result,) = ledger_holds_commit(
        commits=[
            HoldCommit(
                hold=hold,
                idempotency_key=idempotency_key,
                kind=kind,
                legs=legs,
                memo=memo,
                reference_type=reference_type,
                reference_id=reference_id,
            )
        ]
    )
    return result


def ledger_holds_commit(*, commits: Sequence[HoldCommit]) -> list[PostResult]:
    """Turn pending holds into real entries; one result per commit, in the order given (a single
    hold is a list of one). Each commit's ``legs`` must take between 1 and its hold's amount out of
    the hold's account; the rest of the hold is released. Exactly once per hold: a second commit
    with the same key returns the first entry; any other attempt raises HoldNotPending.

    All or nothing, in one savepoint of the caller's transaction (or a transaction of its own),
    with ONE ``entries_write`` for every entry: the entry rows first, then the holds (ascending)
    and every account they and the postings touch (ascending) are locked, the holds released with
    one conditional UPDATE, and the postings inserted — so a hot account (a campaign's budget) is
    locked once, last, for a few statements, whatever the number of holds, and its available
    balance never dips in between (the release goes first). Raises what ``ledger_entry_post``
    raises, and HoldNotPending; nothing is written then."""
    if not commits:
        return []
    specs = []
    committed: dict[str, int] = {}
    for c in commits:
        amount = _hold_decrease_on_account(c.hold, c.legs)
        if not 0 < amount <= c.hold.amount_minor:
            raise InvalidInput(
                f"The entry must take between 1 and {c.hold.amount_minor} from the held account (it takes {amount}).",
                code="invalid_hold_commit",
                details={"hold_id": c.hold.pk},
            )
        committed[c.idempotency_key] = amount
        specs.append(
            EntrySpec(
                idempotency_key=c.idempotency_key,
                kind=c.kind,
                legs=c.legs,
                memo=c.memo,
                reference_type=c.reference_type or c.hold.reference_type,
                reference_id=c.reference_id or c.hold.reference_id,
            )
        )
    if len({c.hold.pk for c in commits}) != len(commits):
        raise InvalidInput("A batch cannot commit a hold twice.", code="duplicate_hold")
    now = timezone.now()

    def release(new_ids: dict[str, int]) -> None:
        # The holds, then every account the releases and the postings touch: the lock order.
        fresh = [c for c in commits if c.idempotency_key in new_ids]
        hold_ids = sorted(c.hold.pk for c in fresh)
        list(Hold.objects.select_for_update().filter(pk__in=hold_ids).order_by("pk").values_list("pk", flat=True))
        accounts_lock([a for c in fresh for a in (c.hold.account_id, *(leg.account.pk for leg in c.legs))])
        changed = Hold.objects.filter(pk__in=hold_ids, status=HoldStatus.PENDING).update(
            status=HoldStatus.COMMITTED,
            committed_amount_minor=_per_hold(fresh, lambda c: committed[c.idempotency_key]),
            commit_entry_id=_per_hold(fresh, lambda c: new_ids[c.idempotency_key]),
            resolved_at=now,
        )
        if changed != len(hold_ids):
            raise HoldNotPending("A hold has already been settled.", details={"hold_ids": hold_ids})

    with transaction.atomic():  # a replay found wrong below takes the batch's new entries back with it
        posted, replayed = entries_write(specs, before_postings=release)
        entries = {e.idempotency_key: e for e in (*posted, *replayed)}
        fresh_keys = {e.idempotency_key for e in posted}
        replays = {c.hold.pk: entries[c.idempotency_key].pk for c in commits if c.idempotency_key not in fresh_keys}
        if replays:
            settled = dict(Hold.objects.filter(pk__in=replays).values_list("pk", "commit_entry_id"))
            wrong = sorted(pk for pk, entry_id in replays.items() if settled.get(pk) != entry_id)
            if wrong:
                raise HoldNotPending("The hold was settled by another entry.", details={"hold_ids": wrong})
    for c in commits:
        entry = entries[c.idempotency_key]
        c.hold.status = HoldStatus.COMMITTED
        c.hold.commit_entry_id = entry.pk
        if c.idempotency_key in fresh_keys:
            c.hold.committed_amount_minor = committed[c.idempotency_key]
            c.hold.resolved_at = now
    return [PostResult(entry=entries[c.idempotency_key], replayed=c.idempotency_key not in fresh_keys) for c in commits]


def _per_hold(commits: Sequence[HoldCommit], value) -> Case:
    """One value per hold in a single UPDATE."""
    return Case(*(When(pk=c.hold.pk, then=Value(value(c))) for c in commits), output_field=BigIntegerField())


def _hold_decrease_on_account(hold: Hold, legs: Sequence[Leg]) -> int:
    """How much the legs take out of the hold's account, on its normal side."""
    net = sum(leg.amount_minor for leg in legs if leg.account.pk == hold.account_id)
    debit_normal = hold.account.kind in (AccountKind.ASSET, AccountKind.EXPENSE)
    return -net if debit_normal else net


def ledger_hold_void(*, hold: Hold) -> HoldResult:
    """Release a pending hold in full. Voiding a voided hold is a replay; a committed or expired
    hold raises HoldNotPending."""
    now = timezone.now()
    with transaction.atomic():
        changed = Hold.objects.filter(pk=hold.pk, status=HoldStatus.PENDING).update(
            status=HoldStatus.VOIDED, resolved_at=now
        )
    hold.refresh_from_db()
    if changed == 1:
        return HoldResult(hold=hold, replayed=False)
    if hold.status == HoldStatus.VOIDED:
        return HoldResult(hold=hold, replayed=True)
    raise HoldNotPending(f"The hold is already {hold.status}.", details={"hold_id": hold.pk, "status": hold.status})


# Far below the ticks' 60 s task timeout: each batch waits on the budget accounts' locks, which a
# hot campaign's ingestion holds too.
EXPIRE_BUDGET_SECONDS = 10.0


def ledger_holds_expire(
    *, now: datetime | None = None, batch_size: int = 500, budget_seconds: float = EXPIRE_BUDGET_SECONDS
) -> int:
    """Expire pending holds whose ``expires_at`` has passed, in short transactions of
    ``batch_size``, none started after ``budget_seconds`` (the next run takes the rest). Returns
    how many expired. Safe to run concurrently and repeatedly: each hold moves with a conditional
    UPDATE, so it expires once."""
    now = now or timezone.now()
    deadline = time.monotonic() + budget_seconds
    total = 0
    while True:
        ids = list(
            Hold.objects.filter(status=HoldStatus.PENDING, expires_at__lte=now)
            .order_by("id")
            .values_list("id", flat=True)[:batch_size]
        )
        if not ids:
            return total
        with transaction.atomic():
            # Holds first, then their accounts in id order, then the update (whose trigger touches
            # the accounts already locked): the lock order every other writer follows.
            locked = list(
                Hold.objects.select_for_update()
                .filter(pk__in=ids, status=HoldStatus.PENDING)
                .order_by("id")
                .values_list("pk", "account_id")
            )
            accounts_lock([account_id for _, account_id in locked])
            total += Hold.objects.filter(pk__in=[pk for pk, _ in locked], status=HoldStatus.PENDING).update(
                status=HoldStatus.EXPIRED, resolved_at=now
            )
        if time.monotonic() >= deadline:
            return total
