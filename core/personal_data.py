"""The personal-data registry: every table that holds personal data declares, from its own app,
what its personal fields become when erased, how erasure finds a person's rows, and how long
retention keeps them. Erasure and access (``recipients.services.privacy``) and the retention purge
(``core.retention``) iterate it, so neither names a table of an app above them, and a new column
with personal data is declared once, next to its model.

Filled in each app's ``AppConfig.ready``: core (inbound webhook bodies, task records, stored API
responses: ``core.privacy``), campaigns (trigger events, rewards, video submissions:
``campaigns.privacy``), payouts (payouts and the statement lines that booked them:
``payouts.privacy``). The person's own tables (people, identifiers, bank accounts, consents) are
erased by ``recipients.services.privacy`` itself; the audit tables' free-form columns through the
audit registry (``core.audit_sql.audit_table_register``).

Entries run in registration order, that is ``INSTALLED_APPS`` order: an erase that takes locks of
the engine's lock order (``core.locks``) takes them in that order itself.
"""

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Model, Q, QuerySet

# What a pseudonymised name becomes (payouts, their pain.001 copies, statement lines).
ERASED = "(erased)"
_COUNTRY = re.compile(r"[A-Za-z]{2}")

BLANK = "blank"
DELETE = "delete"


def pseudonym_iban(iban: str) -> str:
    """What an erased IBAN becomes: its country and ``00ERASED`` (check digits 00 never validate,
    so a copy carrying it can never pay anyone)."""
    country = iban[:2].upper() if _COUNTRY.match(iban or "") else "XX"
    return f"{country}00ERASED"


def mentions(value, needles: list[str]) -> bool:
    """Whether ``value`` (text or JSON-serialisable) contains one of ``needles``, ignoring case."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return any(n.lower() in text.lower() for n in needles)


class EraseAgain(Exception):
    """Raised by an ``erase`` that found the data moved under it (a payout's statement line
    matched meanwhile): erasure rolls its attempt back and makes it again."""


@dataclass(frozen=True)
class Erasure:
    """The person being erased, as each table's ``erase`` sees them. Read before anything is wiped."""

    brand_id: int | None
    cluster: list[int]  # the root person and everyone merged into it
    values: dict[str, set[str]]  # clear values held about them by kind: email, whatsapp, social, name, iban, account
    needles: list[str]  # strings whose presence in free text or a raw body means "this is about them"
    now: datetime


@dataclass(frozen=True)
class Retention:
    """How long a table's rows keep their personal data, and what happens then: ``BLANK`` (the
    entry's ``blank`` values) or ``DELETE``. Rows older than the period by ``date_field``, within
    ``scope``, not ``keep`` (still needed as they are) and not ``done`` already are purged."""

    kind: str  # its name in the retention report
    setting: str  # the setting giving the period in days
    default_days: int
    date_field: str
    purge: str  # BLANK or DELETE
    scope: Q = field(default_factory=Q)
    keep: Q | None = None
    done: Q | None = None  # blanked already; by default every ``blank`` field holds its blank value


@dataclass(frozen=True)
class PersonalData:
    """One table's personal data. ``blank`` maps each personal field to what erasure and retention
    leave in it (a value or an expression). ``erase`` wipes one person's rows and returns counts
    by kind for the erasure event; ``blank_rows`` blanks a set of rows when an update is not
    enough (locks, copies elsewhere). ``export`` lists the fields an access request gets of the
    rows with ``person_id`` in the cluster; ``names`` the fields holding the person's name as
    someone else wrote it, searched for in free text before erasure wipes them."""

    kind: str
    model: type[Model]
    blank: Mapping[str, Any] = field(default_factory=dict)
    erase: Callable[[Erasure], dict[str, int]] | None = None
    blank_rows: Callable[[QuerySet], int] | None = None
    retention: Retention | None = None
    export: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    def rows_blank(self, rows: QuerySet) -> int:
        """Blank ``rows`` of this table; returns how many changed."""
        return self.blank_rows(rows) if self.blank_rows else rows.update(**self.blank)


_REGISTRY: dict[str, PersonalData] = {}


def personal_data_register(entry: PersonalData) -> None:
    """Declare a table's personal data. Registering a kind again replaces it (tests may)."""
    _REGISTRY[entry.kind] = entry


def personal_data() -> tuple[PersonalData, ...]:
    """Every declared table, in registration order."""
    return tuple(_REGISTRY.values())
