"""The sandbox rail: the default, settles instantly, and fails on purpose for configured IBANs so
every payout path can be shown and tested without a bank.

``settings.SANDBOX_FAILING_IBANS`` (or the rail's ``failing_ibans`` option) maps a normalised IBAN
(upper case, no spaces) to a behaviour; ``:ARG`` is optional:

==========================  ==================================================================
``closed_account``          submit raises ``FinalRailError`` AC04; the refusal is recorded
``rejected[:CODE]``         submit raises ``FinalRailError`` CODE (default AG01), e.g. ``rejected:AM04``
``unavailable[:N|*]``       the first N submits (default 1; ``*`` = always) raise
                            ``RetryableRailError`` *before* anything is recorded (connection refused)
``timeout[:N]``             the rail records and accepts the transfer, but the first N submits
                            (default 1) raise ``RetryableRailError`` as if the answer was lost; the
                            retry answers with the same, single transfer
``return[:CODE]``           settles, then ``status`` reports ``returned`` with CODE (default MS03)
``pending[:N]``             submit answers ``accepted``; ``status`` says ``submitted`` for the first
                            N look-ups (default 1), then ``settled``
``vop_no_match``            ``verify_payee`` answers ``no_match`` (payments still settle)
``vop_close_match[:Name]``  ``verify_payee`` answers ``close_match`` suggesting Name
==========================  ==================================================================

Store: every submission is recorded in a small SQLite database of the sandbox's own (not the
project's database: the fake bank must survive our transactions rolling back, like a real bank).
With ``settings.SANDBOX_STORE_PATH`` (or the ``store_path`` option) it is a file, so a ``qcluster``
process and the test process see the same transfers and a crashed worker's transfer stays
recorded; without it, it lives in this process's memory. ``sandbox_store()`` gives tests the
counters: ``transfer_count(e2e)`` (transfers created: "exactly one transfer at the rail") and
``submission_count(e2e)`` (submit calls).

Idempotency: by default (``deduplicate=True``) a repeated end_to_end_id answers with the first
transfer, as real PSPs do. ``deduplicate=False`` makes the sandbox behave like a rail without
idempotency, creating a transfer per submit, so a test can prove the *engine* never submits twice.
"""

import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache

from django.conf import settings

from payouts.iso import reason_text
from payouts.rails.base import (
    SEPA_COUNTRIES,
    Capabilities,
    FinalRailError,
    PayeeMatch,
    Rail,
    RailPayment,
    RailStatus,
    RetryableRailError,
    StatusResult,
    SubmitResult,
    SubmitStatus,
    VerifyPayeeResult,
    normalise_iban,
)
from recipients.normalise import IBAN

_SCHEMA = """
CREATE TABLE IF NOT EXISTS transfers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    end_to_end_id TEXT NOT NULL,
    amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
    currency TEXT NOT NULL,
    account TEXT NOT NULL,
    status TEXT NOT NULL,
    reason_code TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS transfers_e2e ON transfers (end_to_end_id);
CREATE TABLE IF NOT EXISTS calls (
    end_to_end_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (end_to_end_id, kind)
);
"""


class SandboxStore:
    """The sandbox bank's books. Each operation runs in one ``BEGIN IMMEDIATE`` transaction, which
    serialises writers across threads and processes, so concurrent submits of one id cannot both
    create a transfer."""

    def __init__(self, path: str | None):
        self.path = path
        self._lock = threading.Lock()
        self._memory = None
        if path is None:
            self._memory = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            self._memory.executescript(_SCHEMA)
        else:
            with self._connection() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._memory is not None:
            with self._lock:
                yield self._memory
            return
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @staticmethod
    def bump(conn: sqlite3.Connection, end_to_end_id: str, kind: str) -> int:
        conn.execute(
            "INSERT INTO calls (end_to_end_id, kind, n) VALUES (?, ?, 1) "
            "ON CONFLICT (end_to_end_id, kind) DO UPDATE SET n = n + 1",
            (end_to_end_id, kind),
        )
        return conn.execute(
            "SELECT n FROM calls WHERE end_to_end_id = ? AND kind = ?", (end_to_end_id, kind)
        ).fetchone()[0]

    @staticmethod
    def latest(conn: sqlite3.Connection, end_to_end_id: str) -> dict | None:
        conn.row_factory = sqlite3.Row
        row = conn.execute(
            "SELECT * FROM transfers WHERE end_to_end_id = ? ORDER BY id DESC LIMIT 1", (end_to_end_id,)
        ).fetchone()
        return dict(row) if row else None

    @staticmethod
    def insert(conn: sqlite3.Connection, payment: RailPayment, account: str, status: str, reason: str | None) -> int:
        cursor = conn.execute(
            "INSERT INTO transfers (end_to_end_id, amount_minor, currency, account, status, reason_code, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                payment.end_to_end_id,
                payment.amount_minor,
                payment.currency,
                account,
                status,
                reason,
                datetime.now(UTC).isoformat(),
            ),
        )
        return cursor.lastrowid

    # --- read-outs for tests and demos ---------------------------------------------------------

    def transfers(self, end_to_end_id: str) -> list[dict]:
        with self._connection() as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute("SELECT * FROM transfers WHERE end_to_end_id = ? ORDER BY id", (end_to_end_id,))
            return [dict(row) for row in rows]

    def transfer_count(self, end_to_end_id: str) -> int:
        return len(self.transfers(end_to_end_id))

    def submission_count(self, end_to_end_id: str) -> int:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT n FROM calls WHERE end_to_end_id = ? AND kind = 'submit'", (end_to_end_id,)
            ).fetchone()
        return row[0] if row else 0

    def total_transfers(self) -> int:
        with self._connection() as conn:
            return conn.execute("SELECT COUNT(*) FROM transfers").fetchone()[0]

    def reset(self) -> None:
        with self.transaction() as conn:
            conn.execute("DELETE FROM transfers")
            conn.execute("DELETE FROM calls")


@cache
def _store_for(path: str | None) -> SandboxStore:
    return SandboxStore(path)


def sandbox_store(path: str | None = None) -> SandboxStore:
    """The store for ``path``, else ``settings.SANDBOX_STORE_PATH``, else this process's memory."""
    return _store_for(path or getattr(settings, "SANDBOX_STORE_PATH", None) or None)


def _parse_behaviour(raw: str) -> tuple[str, str | None]:
    kind, _, arg = raw.partition(":")
    return kind.strip(), (arg.strip() or None)


def _times(arg: str | None) -> int | None:
    """How many times a transient fault repeats; ``None`` means forever."""
    if arg == "*":
        return None
    return int(arg) if arg else 1


class SandboxRail(Rail):
    name = "sandbox"

    def __init__(
        self,
        *,
        failing_ibans: Mapping[str, str] | None = None,
        store_path: str | None = None,
        deduplicate: bool = True,
        currencies: tuple[str, ...] = ("EUR",),
        countries: tuple[str, ...] | None = None,
        max_amount_minor: int | None = None,
        account_types: tuple[str, ...] = (IBAN,),
    ):
        configured = getattr(settings, "SANDBOX_FAILING_IBANS", {}) if failing_ibans is None else failing_ibans
        self.failing = {normalise_iban(iban): behaviour for iban, behaviour in configured.items()}
        self.store = sandbox_store(store_path)
        self.deduplicate = deduplicate
        self._capabilities = Capabilities(
            currencies=frozenset(currencies),
            countries=frozenset(countries) if countries else SEPA_COUNTRIES,
            instant=True,
            max_amount_minor=max_amount_minor,
            verify_payee=True,
            file_based=False,
            account_types=frozenset(account_types),
        )

    def _behaviour(self, account: str) -> tuple[str, str | None]:
        raw = self.failing.get(normalise_iban(account))
        return _parse_behaviour(raw) if raw else ("settle", None)

    @staticmethod
    def _account(payment: RailPayment) -> str:
        return payment.creditor_iban or (payment.creditor_account or {}).get("accountNumber", "")

    def submit(self, payment: RailPayment) -> SubmitResult:
        if not self._capabilities.supports(
            currency=payment.currency,
            country=payment.creditor_country,
            amount_minor=payment.amount_minor,
            account_type=payment.account_type,
        ):
            raise FinalRailError(
                f"The sandbox does not carry {payment.currency} to a {payment.account_type} account in"
                f" {payment.creditor_country}.",
                reason_code="AG01",
                rail_code="unsupported_route",
            )
        account = self._account(payment)
        kind, arg = self._behaviour(account)
        e2e = payment.end_to_end_id
        with self.store.transaction() as conn:
            calls = self.store.bump(conn, e2e, "submit")
            limit = _times(arg) if kind in {"unavailable", "timeout"} else 0
            if kind == "unavailable" and (limit is None or calls <= limit):
                outcome = "unavailable"
            else:
                existing = self.store.latest(conn, e2e) if self.deduplicate else None
                if existing is None:
                    status, reason = self._new_transfer_state(kind, arg)
                    transfer_id = self.store.insert(conn, payment, account, status, reason)
                    existing = {"id": transfer_id, "status": status, "reason_code": reason}
                outcome = "timeout" if kind == "timeout" and (limit is None or calls <= limit) else "answer"
        # The transaction has committed: like a real rail, a lost answer does not undo the transfer.
        if outcome == "unavailable":
            raise RetryableRailError("Sandbox rail unavailable (connection refused).", rail_code="unavailable")
        if outcome == "timeout":
            raise RetryableRailError("Sandbox rail timed out; the transfer may exist.", rail_code="timeout")
        return self._answer(existing)

    @staticmethod
    def _new_transfer_state(kind: str, arg: str | None) -> tuple[str, str | None]:
        if kind == "closed_account":
            return "failed", "AC04"
        if kind == "rejected":
            return "failed", (arg or "AG01").upper()
        if kind == "return":
            return "settled", (arg or "MS03").upper()
        if kind == "pending":
            return "submitted", None
        return "settled", None

    @staticmethod
    def _answer(transfer: dict) -> SubmitResult:
        reference = f"SBX-{transfer['id']}"
        if transfer["status"] == "failed":
            raise FinalRailError(
                f"Sandbox rail refused the payment ({transfer['reason_code']}).",
                reason_code=transfer["reason_code"],
                rail_code=reference,
            )
        if transfer["status"] == "submitted":
            return SubmitResult(status=SubmitStatus.ACCEPTED, rail_reference=reference)
        return SubmitResult(status=SubmitStatus.SETTLED, rail_reference=reference)

    def status(self, end_to_end_id: str, *, rail_reference: str | None = None) -> StatusResult:
        with self.store.transaction() as conn:
            transfer = self.store.latest(conn, end_to_end_id)
            if transfer is None:
                return StatusResult(status=RailStatus.UNKNOWN)
            kind, arg = self._behaviour(transfer["account"])
            if (
                transfer["status"] == "submitted"
                and kind == "pending"
                and self.store.bump(conn, end_to_end_id, "status") > _times(arg)
            ):
                conn.execute("UPDATE transfers SET status = 'settled' WHERE id = ?", (transfer["id"],))
                transfer["status"] = "settled"
        reference = f"SBX-{transfer['id']}"
        code = transfer["reason_code"]
        if transfer["status"] == "failed":
            return StatusResult(
                status=RailStatus.FAILED, rail_reference=reference, reason_code=code, reason_text=reason_text(code)
            )
        if transfer["status"] == "submitted":
            return StatusResult(status=RailStatus.SUBMITTED, rail_reference=reference)
        if code:  # settled with a return code: the receiving bank sent it back
            return StatusResult(
                status=RailStatus.RETURNED, rail_reference=reference, reason_code=code, reason_text=reason_text(code)
            )
        return StatusResult(status=RailStatus.SETTLED, rail_reference=reference)

    def verify_payee(self, *, name: str, iban: str) -> VerifyPayeeResult:
        kind, arg = self._behaviour(iban)
        if not name.strip() or kind == "vop_no_match":
            return VerifyPayeeResult(outcome=PayeeMatch.NO_MATCH)
        if kind == "vop_close_match":
            return VerifyPayeeResult(outcome=PayeeMatch.CLOSE_MATCH, suggested_name=arg or name.strip().upper())
        return VerifyPayeeResult(outcome=PayeeMatch.MATCH)

    def capabilities(self) -> Capabilities:
        return self._capabilities
