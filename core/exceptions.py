"""One exception tree for the whole project.

Every error a caller can act on is an ``ApplicationError`` with a stable ``code``. The API maps
them to HTTP once, the portal and the admin to messages; nothing else catches them broadly.
"""

from typing import Any


class ApplicationError(Exception):
    code = "application_error"
    http_status = 400

    def __init__(self, message: str, *, details: dict[str, Any] | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}
        if code is not None:
            self.code = code

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class NotFound(ApplicationError):
    code = "not_found"
    http_status = 404


class PermissionDenied(ApplicationError):
    code = "permission_denied"
    http_status = 403


class PlanRefused(PermissionDenied):
    """The brand's package does not include what was asked (a trigger, a channel, more actions
    this month): the message names the plan and what it lacks."""

    code = "plan_refuses"


class InvalidInput(ApplicationError):
    code = "invalid_input"
    http_status = 400


class Conflict(ApplicationError):
    code = "conflict"
    http_status = 409


class TemporaryFailure(ApplicationError):
    """Nothing was done, for a reason that is not the caller's: send the same request again."""

    code = "temporary_failure"
    http_status = 503


class InvalidTransition(Conflict):
    code = "invalid_transition"


# --- the books -----------------------------------------------------------------------------------


class LedgerError(ApplicationError):
    code = "ledger_error"
    http_status = 422


class InsufficientFunds(LedgerError):
    code = "insufficient_funds"


class UnbalancedEntry(LedgerError):
    code = "unbalanced_entry"


class CurrencyMismatch(LedgerError):
    code = "currency_mismatch"


class IdempotencyConflict(LedgerError):
    """The same idempotency key was used before for different content."""

    code = "idempotency_conflict"


class HoldNotPending(LedgerError):
    code = "hold_not_pending"


class AlreadyReversed(LedgerError):
    code = "already_reversed"


class InactiveAccount(LedgerError):
    code = "inactive_account"
