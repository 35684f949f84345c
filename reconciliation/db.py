"""Translate the database's refusals into the project's errors.

The constraints and triggers in ``sql/`` are the last line of defence; when one of them fires the
services raise the ApplicationError a caller can act on. PostgreSQL names the constraint in the
error's diagnostics; SQLite puts it in the message.
"""

from django.db import IntegrityError, InternalError

from core.exceptions import (
    ApplicationError,
    CurrencyMismatch,
    HoldNotPending,
    InactiveAccount,
    InsufficientFunds,
    LedgerError,
    UnbalancedEntry,
)

_BY_CONSTRAINT: dict[str, tuple[type[ApplicationError], str]] = {
    "account_no_overdraft": (InsufficientFunds, "Insufficient funds: the account may not go below zero."),
    "posting_currency_matches_account": (CurrencyMismatch, "The currency does not match the account's currency."),
    "entry_balanced_per_currency": (UnbalancedEntry, "The entry does not balance per currency."),
    "hold_transition": (HoldNotPending, "The hold has already been settled."),
    "posting_account_active": (InactiveAccount, "The account is inactive."),
    "posting_account_exists": (LedgerError, "The account does not exist."),
    "posting_entry_exists": (LedgerError, "The journal entry does not exist."),
}


def constraint_name(exc: Exception) -> str:
    cause = exc.__cause__
    diag = getattr(cause, "diag", None)
    name = getattr(diag, "constraint_name", None)
    if name:
        return name
    text = str(exc)
    if "UNIQUE constraint failed: reconciliation_journalentry.reverses_id" in text:
        return "reconciliation_journalentry_reverses_id_key"
    for known in _BY_CONSTRAINT:
        if known in text:
            return known
    return ""


def ledger_error_from(exc: IntegrityError | InternalError) -> ApplicationError:
    """The ApplicationError for a database refusal, or a generic LedgerError naming it."""
    name = constraint_name(exc)
    if name in _BY_CONSTRAINT:
        cls, message = _BY_CONSTRAINT[name]
        return cls(message, details={"constraint": name})
    return LedgerError(f"The books refused the write: {exc}", details={"constraint": name})


def is_deadlock(exc: Exception) -> bool:
    """PostgreSQL broke a lock cycle by failing this transaction (SQLSTATE 40P01): safe to retry
    the whole transaction."""
    return getattr(exc.__cause__, "sqlstate", None) == "40P01"
