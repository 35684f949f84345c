"""The one interface every payout rail implements, and the values that cross it.

A rail is the outside world: a bank file, a PSP's HTTP API or the sandbox. The payout services
call it *outside* any database transaction, always with the payout's stored ``end_to_end_id``,
and record what it answered in a short transaction of their own.

Contract every rail keeps (the execution engine relies on it for "never pay twice"):

- ``submit`` is idempotent on ``end_to_end_id``: a second submit with the same id never creates a
  second transfer; it answers with the first transfer's state.
- ``status`` looks a payment up by ``end_to_end_id`` (``rail_reference`` speeds it up where the
  rail has its own id). ``unknown`` means the rail holds no payment we can find under that id,
  so submitting it (again) is safe.
- Errors are either ``RetryableRailError`` (timeouts, 5xx, connection refused, rate limits: the
  outcome is unknown or temporary, retry with the same id) or ``FinalRailError`` (the rail refused
  the payment; carries an ISO 20022 reason code and a text for people). Nothing else escapes.
"""

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum

from core.exceptions import ApplicationError, InvalidInput
from core.http import HttpAnswer, HttpUnreachable, http_call
from payouts.iso import reason_text as iso_reason_text
from recipients.normalise import BANK, IBAN, PAYPAL

# The EPC's SEPA character set for references, narrowed as the EPC rules narrow identifiers:
# no leading or trailing "/" and no "//" anywhere.
_SEPA_ID = re.compile(r"[A-Za-z0-9/\-?:().,'+ ]{1,35}")
_IBAN = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}")
_BIC = re.compile(r"[A-Z0-9]{4}[A-Z]{2}[A-Z0-9]{2}([A-Z0-9]{3})?")
_COUNTRY = re.compile(r"[A-Z]{2}")
_CURRENCY = re.compile(r"[A-Z]{3}")

# Countries of the SEPA scheme (EEA plus the non-EEA members), used by the rails' capabilities.
SEPA_COUNTRIES: frozenset[str] = frozenset(
    {
        "AD",
        "AT",
        "BE",
        "BG",
        "CH",
        "CY",
        "CZ",
        "DE",
        "DK",
        "EE",
        "ES",
        "FI",
        "FR",
        "GB",
        "GI",
        "GR",
        "HR",
        "HU",
        "IE",
        "IS",
        "IT",
        "LI",
        "LT",
        "LU",
        "LV",
        "MC",
        "MT",
        "NL",
        "NO",
        "PL",
        "PT",
        "RO",
        "SE",
        "SI",
        "SK",
        "SM",
        "VA",
    }
)


def validate_end_to_end_id(value: str) -> str:
    """Return ``value`` if it is a usable SEPA EndToEndId (1-35 characters of the SEPA set, no
    leading/trailing "/" and no "//"); raise ``InvalidInput`` otherwise."""
    if (
        not isinstance(value, str)
        or not _SEPA_ID.fullmatch(value)
        or value.startswith("/")
        or value.endswith("/")
        or "//" in value
        or value.strip() != value
    ):
        raise InvalidInput(
            f"end_to_end_id {value!r} is not 1-35 characters of the SEPA character set.",
            code="invalid_end_to_end_id",
        )
    return value


def normalise_iban(value: str) -> str:
    """Upper case without spaces: the form rails, files and the sandbox's failure table use."""
    return "".join(value.split()).upper()


class SubmitStatus(StrEnum):
    ACCEPTED = "accepted"  # the rail took the money order; settlement follows
    SETTLED = "settled"  # paid out (instant rails)
    PENDING = "pending"  # recorded, not yet sent (file rails: the bank file is built later)


class RailStatus(StrEnum):
    PENDING = "pending"  # known to the rail, not yet sent on
    SUBMITTED = "submitted"  # in flight at the rail
    SETTLED = "settled"
    FAILED = "failed"  # refused or cancelled before any money left
    RETURNED = "returned"  # paid out, then sent back by the receiving bank
    UNKNOWN = "unknown"  # the rail has nothing under this id: submitting is safe


class ServiceLevel(StrEnum):
    """How a payment travels, as the rail reports it after routing: the status page promises only
    what this says."""

    INSTANT = "instant"  # SCT Inst (or the sandbox): credited within seconds
    STANDARD = "standard"  # SCT: credited by the next business day


class PayeeMatch(StrEnum):
    MATCH = "match"
    CLOSE_MATCH = "close_match"
    NO_MATCH = "no_match"
    NOT_POSSIBLE = "not_possible"  # the rail or the receiving bank offers no check


@dataclass(frozen=True, kw_only=True)
class RailPayment:
    """One payout as a rail sees it. ``creditor_email`` for a PayPal account (no country);
    ``creditor_iban`` for an IBAN; ``creditor_account`` for a local account: its ``type`` and
    fields under the keys of the PSP's account-requirements contract (``recipients.accounts``),
    e.g. ``{"type": "sort_code", "sortCode": "040075", "accountNumber": "37778842"}`` (GBP) or
    ``{"type": "aba", "abartn": …, "accountNumber": …, "accountType": "CHECKING",
    "address.country": "US", "address.city": …, "address.firstLine": …, "address.postCode": …,
    "address.state": "NY"}`` (USD)."""

    end_to_end_id: str
    amount_minor: int
    currency: str
    creditor_name: str
    creditor_country: str
    remittance: str
    debtor_account_code: str
    creditor_iban: str | None = None
    creditor_account: Mapping[str, str] | None = field(default=None, hash=False)
    creditor_bic: str | None = None
    creditor_email: str | None = None
    requested_execution_date: date | None = None

    @property
    def account_type(self) -> str:
        if self.creditor_email is not None:
            return PAYPAL
        return IBAN if self.creditor_iban is not None else str(self.creditor_account["type"])

    def __post_init__(self) -> None:
        validate_end_to_end_id(self.end_to_end_id)
        if isinstance(self.amount_minor, bool) or not isinstance(self.amount_minor, int) or self.amount_minor <= 0:
            raise InvalidInput("amount_minor must be a positive integer.", code="invalid_amount")
        if not _CURRENCY.fullmatch(self.currency or ""):
            raise InvalidInput(f"Currency {self.currency!r} is not an ISO 4217 code.", code="unknown_currency")
        if self.creditor_email is None and not _COUNTRY.fullmatch(self.creditor_country or ""):
            raise InvalidInput(f"Country {self.creditor_country!r} is not ISO 3166 alpha-2.", code="invalid_country")
        if not (self.creditor_name or "").strip():
            raise InvalidInput("creditor_name is required.", code="invalid_creditor")
        if self.creditor_email is not None:
            if "@" not in self.creditor_email:
                raise InvalidInput("creditor_email is not an e-mail address.", code="invalid_creditor")
        elif self.creditor_iban is not None:
            iban = normalise_iban(self.creditor_iban)
            if not _IBAN.fullmatch(iban):
                raise InvalidInput("creditor_iban is not an IBAN.", code="invalid_iban")
            object.__setattr__(self, "creditor_iban", iban)
        elif not self.creditor_account or not self.creditor_account.get("type"):
            raise InvalidInput(
                "Either creditor_iban or creditor_account with its type is required.", code="invalid_creditor"
            )
        if self.creditor_bic is not None:
            bic = self.creditor_bic.strip().upper()
            if not _BIC.fullmatch(bic):
                raise InvalidInput("creditor_bic is not a BIC.", code="invalid_bic")
            object.__setattr__(self, "creditor_bic", bic)


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    currencies: frozenset[str]
    countries: frozenset[str] | None  # None: any, the destination has no country (a PayPal e-mail)
    instant: bool
    max_amount_minor: int | None
    verify_payee: bool
    file_based: bool
    # The kinds of account it pays into: "iban" and local types (``RailPayment.creditor_account``);
    # None for any its provider documents.
    account_types: frozenset[str] | None = frozenset({IBAN})

    def supports(self, *, currency: str, country: str, amount_minor: int, account_type: str = IBAN) -> bool:
        return (
            currency in self.currencies
            and (self.countries is None or country in self.countries)
            and (self.max_amount_minor is None or amount_minor <= self.max_amount_minor)
            and (self.account_types is None or account_type in self.account_types)
        )


@dataclass(frozen=True, kw_only=True)
class SubmitResult:
    status: SubmitStatus
    rail_reference: str
    service_level: ServiceLevel | None = None  # None: the rail does not say


@dataclass(frozen=True, kw_only=True)
class StatusResult:
    status: RailStatus
    rail_reference: str | None = None
    reason_code: str | None = None
    reason_text: str | None = None
    service_level: ServiceLevel | None = None


@dataclass(frozen=True, kw_only=True)
class VerifyPayeeResult:
    outcome: PayeeMatch
    suggested_name: str | None = None


class RailError(ApplicationError):
    """Base of everything a rail raises. ``rail_code`` keeps the rail's own error code."""

    code = "rail_error"
    http_status = 502

    def __init__(
        self,
        message: str,
        *,
        reason_code: str | None = None,
        reason_text: str | None = None,
        rail_code: str = "",
        details: dict | None = None,
    ):
        super().__init__(message, details=details)
        self.reason_code = reason_code
        self.reason_text = reason_text or (iso_reason_text(reason_code) if reason_code else message)
        self.rail_code = rail_code


class RetryableRailError(RailError):
    """Outcome unknown or temporarily impossible: retry later with the same end_to_end_id."""

    code = "rail_retryable"


class FinalRailError(RailError):
    """The rail refused the payment for good; ``reason_code`` is an ISO 20022 code."""

    code = "rail_rejected"

    def __init__(self, message: str, *, reason_code: str, **kwargs):
        super().__init__(message, reason_code=reason_code, **kwargs)


class InstantUnreachableError(FinalRailError):
    """An instant-only rail could not route the payment because the receiving bank takes no
    instant transfers (the rail holds no transfer for it): the route's fallback rail may carry it."""

    code = "rail_instant_unreachable"

    def __init__(self, message: str, **kwargs):
        kwargs.setdefault("reason_code", "CNOR")
        super().__init__(message, **kwargs)


class Rail(ABC):
    """A payout rail. Subclasses are built by ``payouts.rails.get_rail`` with the ``OPTIONS``
    of their ``settings.PAYOUT_RAILS`` entry as keyword arguments."""

    name: str = ""
    # The kinds of payout destination it pays (``recipients.normalise.destination_kind``): bank
    # accounts (IBANs, and the local types ``Capabilities.account_types`` lists) or PayPal
    # accounts. Routing never sends a payout to a rail that does not name its destination's kind.
    destination_kinds: frozenset[str] = frozenset({BANK})
    # The ledger account this rail pays from in ``currency``, when it is not the platform's bank
    # account (``payouts.services.states.debtor_bank_account``): PayPal pays from the platform's
    # PayPal balance. None: the bank.
    funding_account_code_format: str | None = None
    # ``status`` can find a payment only by the rail's own reference (PayPal documents no look-up
    # by our id), and ``submit`` is idempotent on ``end_to_end_id`` at the rail itself: without a
    # reference the engine submits again rather than asking, and never fails a payout blind.
    finds_by_reference_only: bool = False

    @abstractmethod
    def submit(self, payment: RailPayment) -> SubmitResult:
        """Send one payment. Idempotent on ``payment.end_to_end_id``."""

    @abstractmethod
    def status(self, end_to_end_id: str, *, rail_reference: str | None = None) -> StatusResult:
        """The rail's view of a payment; ``unknown`` when it has none under that id."""

    @abstractmethod
    def verify_payee(self, *, name: str, iban: str) -> VerifyPayeeResult:
        """Verification of Payee (name against IBAN); ``not_possible`` where not offered."""

    @abstractmethod
    def capabilities(self) -> Capabilities:
        """What this rail can carry."""


def transfer_found(*, provider: str, rail_reference: str | None, fetch, find, belongs) -> dict | None:
    """A PSP transfer looked up for ``status``: by the rail's own id when we have it (``fetch``;
    a 404 is "none"), and then it must be this payout's (``belongs``) — an id stored against the
    wrong payout must never settle it — else by our reference (``find``). None: the PSP holds none."""
    if not rail_reference:
        return find()
    try:
        transfer = fetch(rail_reference)
    except FinalRailError as exc:
        if (exc.details or {}).get("http_status") != 404:
            raise
        return None
    if not belongs(transfer):
        raise FinalRailError(
            f"{provider} transfer {rail_reference} belongs to another payout.",
            reason_code="MS03",
            rail_code="reference_mismatch",
        )
    return transfer


def rail_http_call(
    *, provider: str, method: str, base_url: str, path: str, body: bytes | None, headers: dict, timeout: float
) -> HttpAnswer:
    """One call to a PSP rail's API: the server's answer whatever its status, for the adapter to
    read; no answer is a RetryableRailError, "outcome unknown" when it timed out (the PSP may have
    acted on it, so the next try must reuse the same idempotency key)."""
    try:
        return http_call(method=method, url=base_url + path, body=body, headers=headers, timeout=timeout)
    except HttpUnreachable as exc:
        unknown = "; the outcome is unknown" if exc.timed_out else ""
        raise RetryableRailError(
            f"{provider} unreachable on {method} {path} ({exc}){unknown}.",
            rail_code="timeout" if exc.timed_out else "connection",
        ) from exc
