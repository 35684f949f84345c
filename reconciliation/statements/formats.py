"""The statement formats an upload can be read in, by a stable name: the door to the parsers.

A platform bank account names its default format (``PlatformBankAccount.statement_format``); the
admin upload, the staff API and ``statement_import --format`` may name another. ``camt.053`` and
``camt.054`` are the ISO 20022 XML reports (one of them uploaded as the other is refused); each
bank CSV export is a ``CsvMapping`` named ``csv:<bank>`` (``banks.py``). An account without a
format takes camt.053 or camt.054, whichever the file is, and refuses a CSV, which names no
account and so cannot be read without being told whose it is.

The package registers ``CAMT_FORMATS`` and ``banks.BANK_FORMATS`` when it is imported
(``__init__``); another app may add one with ``statement_format_register`` from its
``AppConfig.ready``. Names are stored on accounts: never rename one, add a new name instead.
"""

from dataclasses import dataclass

from django.core.exceptions import ValidationError

from core.exceptions import InvalidInput

from .csv_import import CsvMapping
from .types import StatementKind


@dataclass(frozen=True, slots=True)
class StatementFormat:
    """One way to read a bank file: camt XML of one kind, or a bank's CSV layout."""

    name: str  # stable: stored on accounts and sent by API clients
    label: str  # for the admin's select
    camt_kind: StatementKind | None = None  # "camt053" / "camt054"; None for a CSV layout
    csv: CsvMapping | None = None

    def __post_init__(self):
        if (self.camt_kind is None) == (self.csv is None):
            raise ValueError(f"statement format {self.name!r}: give a camt kind or a CSV mapping, one of them")

    @property
    def is_csv(self) -> bool:
        return self.csv is not None


CAMT_FORMATS = (
    StatementFormat(name="camt.053", label="ISO 20022 camt.053 (bank statement)", camt_kind="camt053"),
    StatementFormat(name="camt.054", label="ISO 20022 camt.054 (debit/credit notification)", camt_kind="camt054"),
)

_REGISTRY: dict[str, StatementFormat] = {}


def statement_format_register(statement_format: StatementFormat) -> None:
    """Add a format under its name. A name already taken by another format is refused (accounts
    store names, so one name means one layout for ever); registering the same one again is a no-op."""
    known = _REGISTRY.get(statement_format.name)
    if known is not None and known != statement_format:
        raise ValueError(f"statement format {statement_format.name!r} is registered already")
    _REGISTRY[statement_format.name] = statement_format


def statement_formats() -> list[StatementFormat]:
    return sorted(_REGISTRY.values(), key=lambda f: f.name)


def statement_format_choices() -> list[tuple[str, str]]:
    """For a select: ``(name, "name — label")``, in name order."""
    return [(f.name, f"{f.name} — {f.label}") for f in statement_formats()]


def statement_format_get(name: str) -> StatementFormat:
    """The format named ``name``. Raises InvalidInput ``unknown_statement_format`` naming the known ones."""
    statement_format = _REGISTRY.get(name.strip())
    if statement_format is None:
        raise InvalidInput(
            f"{name!r} is not a statement format; known formats: {', '.join(sorted(_REGISTRY))}.",
            code="unknown_statement_format",
            details={"format": name, "known": sorted(_REGISTRY)},
        )
    return statement_format


def statement_format_validate(name: str) -> None:
    """Model field validator: blank (camt, kind read from the file) or a registered name."""
    if name and name not in _REGISTRY:
        raise ValidationError(
            "%(name)s is not a statement format; known formats: %(known)s.",
            code="unknown_statement_format",
            params={"name": name, "known": ", ".join(sorted(_REGISTRY))},
        )
