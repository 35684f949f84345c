"""Writes to the books. Every function here joins the caller's transaction (so a business change
and the entry that records it commit together) and wraps its own work in a savepoint, so a refusal
leaves the caller's transaction usable and writes nothing.

Lock order (the one place that defines it): account rows are locked in ascending id order, because
postings are always inserted sorted by account id and the posting trigger locks each account row as
its posting is inserted. Holds are locked before accounts.
"""

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime

from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from core.bulk import insert_statement, model_new, rows_insert
from core.exceptions import (
    AlreadyReversed,
    ApplicationError,
    CurrencyMismatch,
    HoldNotPending,
    IdempotencyConflict,
    InactiveAccount,
    InvalidInput,
    UnbalancedEntry,
)
from core.money import validate_currency
from reconciliation.db import constraint_name, ledger_error_from
from reconciliation.models import Account, AccountKind, Hold, HoldStatus, JournalEntry, Posting

# Far above any real payment, far below where a sum of many could overflow a 64-bit balance.
MAX_AMOUNT_MINOR = 10**15


def _lock_accounts(account_ids) -> None:
    """Lock account rows in ascending id: the one lock order every writer of the books follows."""
    list(
        Account.objects.select_for_update(no_key=True)
        .filter(pk__in=sorted(set(account_ids)))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


@dataclass(frozen=True)
class Leg:
    """One side of an entry: positive ``amount_minor`` debits the account, negative credits it."""

    account: Account
    amount_minor: int
    currency: str

    @classmethod
    def debit(cls, account: Account, amount_minor: int) -> "Leg":
        return cls(account=account, amount_minor=amount_minor, currency=account.currency)

    @classmethod
    def credit(cls, account: Account, amount_minor: int) -> "Leg":
        return cls(account=account, amount_minor=-amount_minor, currency=account.currency)


@dataclass(frozen=True)
class EntrySpec:
    idempotency_key: str
    kind: str
    legs: Sequence[Leg]
    memo: str = ""
    effective_date: date | None = None
    reference_type: str = ""
    reference_id: str = ""


@dataclass(frozen=True)
class PostResult:
    entry: JournalEntry
    replayed: bool


@dataclass(frozen=True)
class Refusal:
    idempotency_key: str
    code: str
    message: str


@dataclass
class BatchResult:
    all_or_nothing: bool
    posted: list[JournalEntry] = field(default_factory=list)
    replayed: list[JournalEntry] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


@dataclass(frozen=True)
class HoldResult:
    hold: Hold
    replayed: bool


# --- accounts ------------------------------------------------------------------------------------


def account_get_or_create(
    *,
    code: str,
    name: str,
    kind: AccountKind | str,
    currency: str,
    allow_overdraft: bool = False,
    owner_type: str = "",
    owner_id: str = "",
) -> Account:
    """The account with ``code``, created if missing. Safe under concurrency (the unique code
    decides). Raises InvalidInput if an account with that code exists with another kind/currency."""
    currency = validate_currency(currency)
    if kind not in AccountKind.values:
        raise InvalidInput(f"{kind!r} is not an account kind.", code="invalid_account_kind")
    account = Account.objects.filter(code=code).first()
    if account is None:
        try:
            with transaction.atomic():
                account = Account.objects.create(
                    code=code,
                    name=name,
                    kind=kind,
                    currency=currency,
                    allow_overdraft=allow_overdraft,
                    owner_type=owner_type,
                    owner_id=str(owner_id),
                )
        except IntegrityError:
            account = Account.objects.get(code=code)
    if account.kind != kind or account.currency != currency:
        raise InvalidInput(f"Account {code} exists as {account.kind} {account.currency}.", code="account_conflict")
    return account


def account_set_active(*, account: Account, is_active: bool) -> Account:
    Account.objects.filter(pk=account.pk).update(is_active=is_active)
    account.is_active = is_active
    return account


# --- entries -------------------------------------------------------------------------------------


def _content_hash(spec: EntrySpec, reverses_id: int | None) -> str:
    legs = sorted((leg.account.pk, leg.amount_minor, leg.currency) for leg in spec.legs)
    canonical = json.dumps(
        [spec.kind, legs, spec.reference_type, str(spec.reference_id), reverses_id], separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _validate(spec: EntrySpec) -> None:
    if not spec.idempotency_key or len(spec.idempotency_key) > 200:
        raise InvalidInput("An idempotency key of 1 to 200 characters is required.", code="invalid_idempotency_key")
    if not spec.kind:
        raise InvalidInput("An entry needs a kind.", code="invalid_entry")
    if len(spec.legs) < 2:
        raise UnbalancedEntry("An entry needs at least two legs.")
    if len({leg.account.pk for leg in spec.legs}) != len(spec.legs):
        raise InvalidInput("An entry names each account once.", code="invalid_entry")
    sums: dict[str, int] = defaultdict(int)
    for leg in spec.legs:
        if type(leg.amount_minor) is not int:
            raise InvalidInput("Amounts are integers in minor units.", code="invalid_amount")
        if abs(leg.amount_minor) > MAX_AMOUNT_MINOR:
            raise InvalidInput("The amount is larger than the books accept.", code="invalid_amount")
        if leg.amount_minor == 0:
            raise InvalidInput("A leg cannot be zero.", code="invalid_amount")
        if leg.currency != leg.account.currency:
            raise CurrencyMismatch(
                f"{leg.currency} does not match account {leg.account.code} in {leg.account.currency}.",
                details={"account": leg.account.code},
            )
        if not leg.account.is_active:
            raise InactiveAccount(f"Account {leg.account.code} is inactive.", details={"account": leg.account.code})
        sums[leg.currency] += leg.amount_minor
    unbalanced = {cur: total for cur, total in sums.items() if total != 0}
    if unbalanced:
        raise UnbalancedEntry("Debits and credits differ.", details={"difference_minor": unbalanced})


_INSERT_ENTRY_SQL = (
    f"INSERT INTO {JournalEntry._meta.db_table} "
    "(idempotency_key, kind, memo, effective_date, created_at, reference_type, reference_id, "
    "reverses_id, content_hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (idempotency_key) DO NOTHING RETURNING id"
)


def _insert_entry(spec: EntrySpec, *, now: datetime, reverses_id: int | None, content_hash: str) -> int | None:
    """Insert the entry row; None when the key exists. ON CONFLICT DO NOTHING makes a concurrent
    writer with the same key wait for the first and then see its row, instead of failing."""
    effective = spec.effective_date or timezone.localdate(now)
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT_ENTRY_SQL,
            [
                spec.idempotency_key,
                spec.kind,
                spec.memo[:500],
                effective,
                now,
                spec.reference_type,
                str(spec.reference_id),
                reverses_id,
                content_hash,
            ],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _replay_or_conflict(key: str, content_hash: str) -> JournalEntry:
    existing = JournalEntry.objects.get(idempotency_key=key)
    if existing.content_hash != content_hash:
        raise IdempotencyConflict(
            f"Idempotency key {key!r} was used before for a different entry.",
            details={"idempotency_key": key, "entry_id": existing.pk},
        )
    return existing


def _insert_postings(entry_id: int, legs: Sequence[Leg]) -> None:
    # Sorted by account id: the posting trigger locks account rows in insertion order, so every
    # writer takes its locks in the same order and two transfers can never deadlock.
    _insert_postings_rows(
        [(leg.account.pk, entry_id, leg.amount_minor, leg.currency) for leg in sorted(legs, key=lambda x: x.account.pk)]
    )


_POST_PG_SQL = (
    f"WITH entry AS (INSERT INTO {JournalEntry._meta.db_table} "
    "(idempotency_key, kind, memo, effective_date, created_at, reference_type, reference_id, reverses_id, "
    "content_hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (idempotency_key) DO NOTHING RETURNING id) "
    f"INSERT INTO {Posting._meta.db_table} (entry_id, account_id, amount_minor, currency, balance_after_minor) "
    "SELECT entry.id, leg.account_id, leg.amount_minor, leg.currency, 0 FROM entry, "
    "unnest(%s::bigint[], %s::bigint[], %s::varchar[]) WITH ORDINALITY AS leg(account_id, amount_minor, currency, n) "
    "ORDER BY leg.n RETURNING entry_id"
)
_DEADLOCK_RETRIES = 3
REVERSES_UNIQUE = f"{JournalEntry._meta.db_table}_reverses_id_key"


def _post_statement_pg(spec: EntrySpec, *, now: datetime, reverses_id: int | None, content_hash: str) -> int | None:
    """The whole entry as ONE statement: the entry row, then its postings in account-id order (the
    posting trigger moves the balances). Outside a transaction it commits on its own, so the rows it
    locks are held only inside the server, never while a client process waits for a CPU — on a hot
    account that is the difference between a lock held for microseconds and one held for a
    scheduler tick. Returns the new entry id, or None when the key already exists."""
    legs = sorted(spec.legs, key=lambda leg: leg.account.pk)
    params = [
        spec.idempotency_key,
        spec.kind,
        spec.memo[:500],
        spec.effective_date or timezone.localdate(now),
        now,
        spec.reference_type,
        str(spec.reference_id),
        reverses_id,
        content_hash,
        [leg.account.pk for leg in legs],
        [leg.amount_minor for leg in legs],
        [leg.currency for leg in legs],
    ]
    with connection.cursor() as cursor:
        cursor.execute(_POST_PG_SQL, params)
        row = cursor.fetchone()
    return row[0] if row else None


def _post(spec: EntrySpec, *, reverses_id: int | None = None) -> PostResult:
    _validate(spec)
    content_hash = _content_hash(spec, reverses_id)
    now = timezone.now()
    try:
        if connection.vendor == "postgresql" and not connection.in_atomic_block:
            entry_id = _post_autocommit_pg(spec, now=now, reverses_id=reverses_id, content_hash=content_hash)
        else:
            with transaction.atomic():
                if connection.vendor == "postgresql":
                    entry_id = _post_statement_pg(spec, now=now, reverses_id=reverses_id, content_hash=content_hash)
                else:
                    entry_id = _insert_entry(spec, now=now, reverses_id=reverses_id, content_hash=content_hash)
                    if entry_id is not None:
                        _insert_postings(entry_id, spec.legs)
    except IntegrityError as exc:
        if reverses_id is not None and constraint_name(exc) == REVERSES_UNIQUE:
            raise AlreadyReversed("This entry has already been reversed.", details={"entry_id": reverses_id}) from exc
        raise ledger_error_from(exc) from exc
    if entry_id is None:
        return PostResult(entry=_replay_or_conflict(spec.idempotency_key, content_hash), replayed=True)
    entry = JournalEntry(
        pk=entry_id,
        idempotency_key=spec.idempotency_key,
        kind=spec.kind,
        memo=spec.memo[:500],
        effective_date=spec.effective_date or timezone.localdate(now),
        created_at=now,
        reference_type=spec.reference_type,
        reference_id=str(spec.reference_id),
        reverses_id=reverses_id,
        content_hash=content_hash,
    )
    entry._state.adding = False
    return PostResult(entry=entry, replayed=False)


def _post_autocommit_pg(spec: EntrySpec, *, now: datetime, reverses_id: int | None, content_hash: str) -> int | None:
    """Outside any transaction the single statement is its own transaction. Lock order makes
    deadlocks impossible between our own writers; the retry covers anything else that locks
    accounts in another order (an operator's script)."""
    for attempt in range(_DEADLOCK_RETRIES):
        try:
            return _post_statement_pg(spec, now=now, reverses_id=reverses_id, content_hash=content_hash)
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != "40P01" or attempt == _DEADLOCK_RETRIES - 1:
                raise
    return None


def ledger_entry_post(
    *,
    idempotency_key: str,
    kind: str,
    legs: Sequence[Leg],
    memo: str = "",
    effective_date: date | None = None,
    reference_type: str = "",
    reference_id: str = "",
) -> PostResult:
    """Post one balanced journal entry.

    Guarantees: the postings and the accounts' materialised balances are written together, in the
    caller's transaction (or a new one). The same key with the same content returns the existing
    entry and posts nothing (``replayed=True``).
    Raises: UnbalancedEntry, CurrencyMismatch, InactiveAccount, InvalidInput, InsufficientFunds
    (a no-overdraft account would go below its holds), IdempotencyConflict (same key, other
    content). On any error nothing is written.
    """
    return _post(
        EntrySpec(
            idempotency_key=idempotency_key,
            kind=kind,
            legs=legs,
            memo=memo,
            effective_date=effective_date,
            reference_type=reference_type,
            reference_id=reference_id,
        )
    )


def ledger_entries_post(*, entries: Sequence[EntrySpec], all_or_nothing: bool = True) -> BatchResult:
    """Post many entries in one database transaction.

    ``all_or_nothing=True``: every entry is posted (or replayed) or none is; the first refusal is
    raised. Fast path: one INSERT for the entries and one for all postings.
    ``all_or_nothing=False`` (best effort): each entry gets its own savepoint; refused entries are
    reported in ``BatchResult.refused`` with their error code and the others are posted.
    Replays (same key, same content) are reported in ``replayed`` and post nothing.
    """
    result = BatchResult(all_or_nothing=all_or_nothing)
    if not all_or_nothing:
        with transaction.atomic():
            for spec in entries:
                try:
                    outcome = _post(spec)
                except ApplicationError as exc:
                    result.refused.append(Refusal(spec.idempotency_key, exc.code, exc.message))
                    continue
                (result.replayed if outcome.replayed else result.posted).append(outcome.entry)
        return result

    keys = [spec.idempotency_key for spec in entries]
    if len(set(keys)) != len(keys):
        raise InvalidInput("A batch cannot repeat an idempotency key.", code="duplicate_idempotency_key")
    for spec in entries:
        _validate(spec)
    now = timezone.now()
    hashes = {spec.idempotency_key: _content_hash(spec, None) for spec in entries}
    try:
        with transaction.atomic():
            new_ids = _insert_entries_bulk(entries, now=now, hashes=hashes)
            fresh = [spec for spec in entries if spec.idempotency_key in new_ids]
            existing_keys = [spec.idempotency_key for spec in entries if spec.idempotency_key not in new_ids]
            if existing_keys:
                for entry in JournalEntry.objects.filter(idempotency_key__in=existing_keys):
                    if entry.content_hash != hashes[entry.idempotency_key]:
                        raise IdempotencyConflict(
                            f"Idempotency key {entry.idempotency_key!r} was used before for a different entry.",
                            details={"idempotency_key": entry.idempotency_key, "entry_id": entry.pk},
                        )
                    result.replayed.append(entry)
            # Sorted by account, then entry: every batch locks accounts in the same order.
            rows = sorted(
                (leg.account.pk, new_ids[spec.idempotency_key], leg.amount_minor, leg.currency)
                for spec in fresh
                for leg in spec.legs
            )
            _insert_postings_rows(rows)
    except IntegrityError as exc:
        raise ledger_error_from(exc) from exc
    for spec in fresh:
        entry = JournalEntry(
            pk=new_ids[spec.idempotency_key],
            idempotency_key=spec.idempotency_key,
            kind=spec.kind,
            memo=spec.memo[:500],
            effective_date=spec.effective_date or timezone.localdate(now),
            created_at=now,
            reference_type=spec.reference_type,
            reference_id=str(spec.reference_id),
            content_hash=hashes[spec.idempotency_key],
        )
        entry._state.adding = False
        result.posted.append(entry)
    return result


def _insert_postings_rows(rows: Sequence[tuple[int, int, int, str]]) -> None:
    """Insert (account_id, entry_id, amount_minor, currency) rows in the given order. On PostgreSQL
    one statement over arrays, which is several times faster than a VALUES list for thousands."""
    if connection.vendor != "postgresql":
        Posting.objects.bulk_create(
            [Posting(account_id=a, entry_id=e, amount_minor=m, currency=c) for a, e, m, c in rows], batch_size=2000
        )
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Posting._meta.db_table} (account_id, entry_id, amount_minor, currency, balance_after_minor) "
            "SELECT a, e, m, c, 0 FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::varchar[]) "
            "WITH ORDINALITY AS t(a, e, m, c, n) ORDER BY n",
            [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]],
        )


def _insert_entries_bulk(entries: Sequence[EntrySpec], *, now: datetime, hashes: dict[str, str]) -> dict[str, int]:
    """Insert the entry rows; returns {key: id} for the new ones (existing keys are left out)."""
    table = JournalEntry._meta.db_table
    today = timezone.localdate(now)
    columns = [
        [spec.idempotency_key for spec in entries],
        [spec.kind for spec in entries],
        [spec.memo[:500] for spec in entries],
        [spec.effective_date or today for spec in entries],
        [spec.reference_type for spec in entries],
        [str(spec.reference_id) for spec in entries],
        [hashes[spec.idempotency_key] for spec in entries],
    ]
    insert = (
        f"INSERT INTO {table} (idempotency_key, kind, memo, effective_date, created_at, "
        "reference_type, reference_id, reverses_id, content_hash) "
    )
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                insert + "SELECT k, kd, m, d, %s, rt, ri, NULL, h FROM unnest(%s::varchar[], %s::varchar[], "
                "%s::varchar[], %s::date[], %s::varchar[], %s::varchar[], %s::varchar[]) AS t(k, kd, m, d, rt, ri, h) "
                "ON CONFLICT (idempotency_key) DO NOTHING RETURNING id, idempotency_key",
                [now, *columns],
            )
            return {key: pk for pk, key in cursor.fetchall()}
        new_ids: dict[str, int] = {}
        for start in range(0, len(entries), 500):
            part = list(zip(*(column[start : start + 500] for column in columns), strict=True))
            values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, NULL, %s)"] * len(part))
            params = [value for k, kd, m, d, rt, ri, h in part for value in (k, kd, m, d, now, rt, ri, h)]
            cursor.execute(
                insert + f"VALUES {values} ON CONFLICT (idempotency_key) DO NOTHING RETURNING id, idempotency_key",
                params,
            )
            new_ids.update({key: pk for pk, key in cursor.fetchall()})
        return new_ids


def ledger_entry_reverse(*, entry: JournalEntry, idempotency_key: str, memo: str = "") -> PostResult:
    """Post the mirror image of ``entry`` (every leg negated), linked by ``reverses``.

    An entry is reversed at most once (a unique constraint decides under concurrency); a replay
    with the same key returns the reversal. Raises AlreadyReversed, InsufficientFunds (the money
    has moved on from a no-overdraft account), IdempotencyConflict.
    """
    legs = [
        Leg(account=p.account, amount_minor=-p.amount_minor, currency=p.currency)
        for p in entry.postings.select_related("account").order_by("account_id")
    ]
    spec = EntrySpec(
        idempotency_key=idempotency_key,
        kind=f"reversal:{entry.kind}"[:40],
        legs=legs,
        memo=memo or f"Reversal of entry #{entry.pk}",
        reference_type=entry.reference_type,
        reference_id=entry.reference_id,
    )
    return _post(spec, reverses_id=entry.pk)


# --- holds ---------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class HoldSpec:
    """One hold of ``ledger_holds_create_bulk``: the arguments of ``ledger_hold_create``."""

    idempotency_key: str
    amount_minor: int
    memo: str = ""
    reference_type: str = ""
    reference_id: str = ""
    expires_at: datetime | None = None


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


def _hold_decrease_on_account(hold: Hold, legs: Sequence[Leg]) -> int:
    """How much the legs take out of the hold's account, on its normal side."""
    net = sum(leg.amount_minor for leg in legs if leg.account.pk == hold.account_id)
    debit_normal = hold.account.kind in (AccountKind.ASSET, AccountKind.EXPENSE)
    return -net if debit_normal else net


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
    The hold is released and the entry posted in one savepoint, so the account's available
    balance never dips in between."""
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
    _validate(spec)
    content_hash = _content_hash(spec, None)
    now = timezone.now()
    try:
        with transaction.atomic():
            # Holds before accounts, accounts in id order: releasing the hold moves its account's
            # held amount, so that account is locked with the others up front, not out of order.
            list(Hold.objects.select_for_update().filter(pk=hold.pk).values_list("pk", flat=True))
            _lock_accounts([hold.account_id, *(leg.account.pk for leg in legs)])
            entry_id = _insert_entry(spec, now=now, reverses_id=None, content_hash=content_hash)
            if entry_id is None:
                entry = _replay_or_conflict(idempotency_key, content_hash)
                if not Hold.objects.filter(pk=hold.pk, commit_entry=entry).exists():
                    raise HoldNotPending("The hold was settled by another entry.", details={"hold_id": hold.pk})
                return PostResult(entry=entry, replayed=True)
            # Release first (conditional: only a pending hold moves), then post: the held amount
            # leaves held_minor in the same savepoint that the debit lands in posted_minor.
            changed = Hold.objects.filter(pk=hold.pk, status=HoldStatus.PENDING).update(
                status=HoldStatus.COMMITTED,
                committed_amount_minor=committed,
                commit_entry_id=entry_id,
                resolved_at=now,
            )
            if changed != 1:
                raise HoldNotPending("The hold has already been settled.", details={"hold_id": hold.pk})
            _insert_postings(entry_id, spec.legs)
    except IntegrityError as exc:
        raise ledger_error_from(exc) from exc
    hold.refresh_from_db()
    return PostResult(entry=JournalEntry.objects.get(pk=entry_id), replayed=False)


def _hold_resolve(*, hold: Hold, status: HoldStatus, memo: str = "") -> HoldResult:
    now = timezone.now()
    with transaction.atomic():
        changed = Hold.objects.filter(pk=hold.pk, status=HoldStatus.PENDING).update(status=status, resolved_at=now)
    hold.refresh_from_db()
    if changed == 1:
        return HoldResult(hold=hold, replayed=False)
    if hold.status == status:
        return HoldResult(hold=hold, replayed=True)
    raise HoldNotPending(f"The hold is already {hold.status}.", details={"hold_id": hold.pk, "status": hold.status})


def ledger_hold_void(*, hold: Hold) -> HoldResult:
    """Release a pending hold in full. Voiding a voided hold is a replay; a committed or expired
    hold raises HoldNotPending."""
    return _hold_resolve(hold=hold, status=HoldStatus.VOIDED)


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
            _lock_accounts([account_id for _, account_id in locked])
            total += Hold.objects.filter(pk__in=[pk for pk, _ in locked], status=HoldStatus.PENDING).update(
                status=HoldStatus.EXPIRED, resolved_at=now
            )
