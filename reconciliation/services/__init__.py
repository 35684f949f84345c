"""Writes to the books and the bank side. ``entries`` posts journal entries, ``holds`` reserves
money on accounts, ``accounts`` opens them and states the lock order; ``statements`` imports bank
files; ``matching`` explains statement lines (see each module's docstring)."""

from reconciliation.services.accounts import account_get_or_create, account_set_active, bank_fees_account
from reconciliation.services.entries import (
    BatchResult,
    EntrySpec,
    Leg,
    PostResult,
    Refusal,
    ledger_entries_post,
    ledger_entry_post,
    ledger_entry_reverse,
)
from reconciliation.services.holds import (
    HoldCommit,
    HoldResult,
    HoldSpec,
    ledger_hold_commit,
    ledger_hold_void,
    ledger_holds_commit,
    ledger_holds_create,
    ledger_holds_expire,
)

__all__ = [
    "BatchResult",
    "EntrySpec",
    "HoldCommit",
    "HoldResult",
    "HoldSpec",
    "Leg",
    "PostResult",
    "Refusal",
    "account_get_or_create",
    "account_set_active",
    "bank_fees_account",
    "ledger_entries_post",
    "ledger_entry_post",
    "ledger_entry_reverse",
    "ledger_hold_commit",
    "ledger_hold_void",
    "ledger_holds_commit",
    "ledger_holds_create",
    "ledger_holds_expire",
]
