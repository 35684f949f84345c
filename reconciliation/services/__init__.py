"""Writes to the books and the bank side. ``ledger`` posts entries and holds; ``statements``
imports bank files; ``matching`` explains statement lines (see each module's docstring)."""

from reconciliation.services.ledger import (
    BatchResult,
    EntrySpec,
    HoldResult,
    HoldSpec,
    Leg,
    PostResult,
    Refusal,
    account_get_or_create,
    account_set_active,
    ledger_entries_post,
    ledger_entry_post,
    ledger_entry_reverse,
    ledger_hold_commit,
    ledger_hold_create,
    ledger_hold_void,
    ledger_holds_create_bulk,
    ledger_holds_expire,
    ledger_holds_statement,
)

__all__ = [
    "BatchResult",
    "EntrySpec",
    "HoldResult",
    "Leg",
    "PostResult",
    "Refusal",
    "account_get_or_create",
    "account_set_active",
    "ledger_entries_post",
    "ledger_entry_post",
    "ledger_entry_reverse",
    "ledger_hold_commit",
    "HoldSpec",
    "ledger_hold_create",
    "ledger_holds_create_bulk",
    "ledger_holds_statement",
    "ledger_hold_void",
    "ledger_holds_expire",
]
