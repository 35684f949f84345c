"""Holds: money reserved on an account until it is committed as an entry, voided or expired.

A hold moves ``pending → committed | voided | expired`` exactly once; the hold trigger keeps the
account's ``held_minor`` equal to its pending holds, so the no-overdraft CHECK counts reserved money
as spent. Like ``entries``, every call but the bulk and statement forms joins the caller's
transaction inside a savepoint of its own, so a refusal writes nothing and leaves the caller's
transaction usable.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.bulk import insert_statement, model_new, rows_insert
from core.exceptions import CurrencyMismatch, HoldNotPending, IdempotencyConflict, InactiveAccount, InvalidInput
from reconciliation.db import constraint_name, ledger_error_from
from reconciliation.models import Account, AccountKind, Hold, HoldStatus
from reconciliation.services.accounts import accounts_lock
from reconciliation.services.entries import (
    EntrySpec,
    Leg,
    PostResult,
    entries_write,
)


@dataclass(frozen=True)
class HoldSpec:
    """One hold of ``ledger_holds_create_bulk``: the arguments of ``ledger_hold_create``."""

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


def ledger_hold_create(
    *,
    idempotency_key: str,
    account: Account,
    amount_minor: int,
    currency: str,
    expires_at: datetime | None = None,
    memo: str = "",
    reference_type: str = "",
    reference_id: str = "",
) -> HoldResult:
    """Reserve ``amount_minor`` on ``account``: its available balance drops, its posted balance
    does not. Idempotent by key (same account and amount → the existing hold).
    Raises InsufficientFunds (no-overdraft account without enough available), CurrencyMismatch,
    IdempotencyConflict, InvalidInput."""
    if type(amount_minor) is not int or amount_minor <= 0:
        raise InvalidInput("A hold is a positive integer amount in minor units.", code="invalid_amount")
    if currency != account.currency:
        raise CurrencyMismatch(f"{currency} does not match account {account.code}.")
    if not account.is_active:
        raise InactiveAccount(f"Account {account.code} is inactive.")
    existing = Hold.objects.filter(idempotency_key=idempotency_key).first()
    if existing is None:
        try:
            with transaction.atomic():
                hold = Hold.objects.create(
                    idempotency_key=idempotency_key,
                    account=account,
                    amount_minor=amount_minor,
                    currency=currency,
                    expires_at=expires_at,
                    memo=memo[:500],
                    reference_type=reference_type,
                    reference_id=str(reference_id),
                    created_at=timezone.now(),
                )
            return HoldResult(hold=hold, replayed=False)
        except IntegrityError as exc:
            existing = Hold.objects.filter(idempotency_key=idempotency_key).first()
            if existing is None:
                raise ledger_error_from(exc) from exc
    if (existing.account_id, existing.amount_minor, existing.currency) != (account.pk, amount_minor, currency):
        raise IdempotencyConflict(
            f"Idempotency key {idempotency_key!r} was used before for a different hold.",
            details={"hold_id": existing.pk},
        )
    return HoldResult(hold=existing, replayed=True)


def ledger_holds_create_bulk(*, account: Account, currency: str, holds: Sequence[HoldSpec]) -> list[Hold]:
    """Reserve many amounts on one account in a single INSERT (bulk ingestion); returns the new
    holds in order. All or nothing: the triggers check each row exactly as for
    ``ledger_hold_create`` (currency, no overdraft), and a refusal aborts the caller's
    transaction (no savepoint here). For callers that own the keys' uniqueness —
    a key used before raises IntegrityError (constraint ``reconciliation_hold_idempotency_key_key``)
    rather than replaying, because a replay here means the caller's own idempotency broke.
    Raises InsufficientFunds, CurrencyMismatch, InactiveAccount, InvalidInput."""
    rows = _holds_build(account=account, currency=currency, holds=holds)
    if not rows:
        return []
    try:
        # No savepoint of its own (one round trip less on the hot path): a refusal aborts the
        # caller's transaction, which is what ingestion wants.
        return rows_insert(Hold, rows)
    except IntegrityError as exc:
        if "idempotency_key" in (constraint_name(exc) or str(exc)):  # SQLite names only the column
            raise
        raise ledger_error_from(exc) from exc


def ledger_holds_statement(
    *, account: Account, currency: str, holds: Sequence[HoldSpec], ids: Sequence[int]
) -> tuple[tuple[str, list], list[Hold]]:
    """``ledger_holds_create_bulk`` as a statement for the caller to send with its other writes
    in one round trip (``core.bulk.statements_run``), with primary keys it reserved
    (``core.bulk.ids_reserve``). Validated here like the bulk call; the database checks each row
    when the statement runs (a refusal raises IntegrityError there: the caller's transaction is
    lost, nothing is kept). Returns the statement and the holds it will create, keys set."""
    rows = _holds_build(account=account, currency=currency, holds=holds)
    for hold, pk in zip(rows, ids, strict=True):
        hold.pk = pk
    return insert_statement(Hold, rows) if rows else ("", []), rows


def _holds_build(*, account: Account, currency: str, holds: Sequence[HoldSpec]) -> list[Hold]:
    if currency != account.currency:
        raise CurrencyMismatch(f"{currency} does not match account {account.code}.")
    if not account.is_active:
        raise InactiveAccount(f"Account {account.code} is inactive.")
    if any(type(h.amount_minor) is not int or h.amount_minor <= 0 for h in holds):
        raise InvalidInput("A hold is a positive integer amount in minor units.", code="invalid_amount")
    now = timezone.now()
    return [
        model_new(
            Hold,
            idempotency_key=h.idempotency_key,
            account=account,
            amount_minor=h.amount_minor,
            currency=currency,
            expires_at=h.expires_at,
            memo=h.memo[:500],
            reference_type=h.reference_type,
            reference_id=str(h.reference_id),
            created_at=now,
        )
        for h in holds
    ]


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
    """Turn a pending hold into a real entry. ``legs`` must take between 1 and the hold's amount
    out of the hold's account; the rest of the hold is released. Exactly once: a second commit
    with the same key returns the first entry; any other attempt raises HoldNotPending.
    The hold is released and the entry posted in one savepoint, the release first, so the
    account's available balance never dips in between. Raises what ``ledger_entry_post`` raises."""
    committed = _hold_decrease_on_account(hold, legs)
    if not 0 < committed <= hold.amount_minor:
        raise InvalidInput(
            f"The entry must take between 1 and {hold.amount_minor} from the held account (it takes {committed}).",
            code="invalid_hold_commit",
        )
    spec = EntrySpec(
        idempotency_key=idempotency_key,
        kind=kind,
        legs=legs,
        memo=memo,
        reference_type=reference_type or hold.reference_type,
        reference_id=reference_id or hold.reference_id,
    )

    def release(new_ids: dict[str, int]) -> None:
        # The hold, then every account the release and the postings touch: the lock order.
        list(Hold.objects.select_for_update().filter(pk=hold.pk).values_list("pk", flat=True))
        accounts_lock([hold.account_id, *(leg.account.pk for leg in legs)])
        changed = Hold.objects.filter(pk=hold.pk, status=HoldStatus.PENDING).update(
            status=HoldStatus.COMMITTED,
            committed_amount_minor=committed,
            commit_entry_id=new_ids[idempotency_key],
            resolved_at=timezone.now(),
        )
        if changed != 1:
            raise HoldNotPending("The hold has already been settled.", details={"hold_id": hold.pk})

    posted, replayed = entries_write([spec], before_postings=release)
    if replayed and not Hold.objects.filter(pk=hold.pk, commit_entry=replayed[0]).exists():
        raise HoldNotPending("The hold was settled by another entry.", details={"hold_id": hold.pk})
    hold.refresh_from_db()
    return PostResult(entry=(posted or replayed)[0], replayed=not posted)


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


def ledger_holds_expire(*, now: datetime | None = None, batch_size: int = 500) -> int:
    """Expire pending holds whose ``expires_at`` has passed, in short transactions of
    ``batch_size``. Returns how many expired. Safe to run concurrently and repeatedly: each hold
    moves with a conditional UPDATE, so it expires once."""
    now = now or timezone.now()
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
