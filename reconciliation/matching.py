"""The registration point between the books and the domains that explain bank lines.

Reconciliation knows statement lines and the ledger; it does not know what a payout or a brand
top-up is. A domain app (payouts, campaigns) registers a ``Matcher`` in its ``AppConfig.ready()``;
the engine (``reconciliation.services.matching``) runs the matchers in ``order`` over batches of new
lines, records each match with the ledger entry the matcher posted, and parks whatever nobody
explains in suspense.

A matcher has two halves so that a dry run is just the first half:
- ``propose(lines)`` reads only and says which line it would tie to which object (or, with
  ``suggest=True``, which object staff might confirm);
- ``apply(proposals)`` makes the domain change and posts the ledger entry, inside the engine's
  transaction, returning one ``Applied`` per proposal it carried out. It must be idempotent: a
  proposal for an object that has already moved on is skipped, not applied twice.
``unapply(match)`` undoes the domain change of an active match (the engine reverses the entry), and
``propose_manual(line, target_id)`` validates a match staff make by hand.

Three optional halves:
- ``names(lines)`` says which lines carry a reference only one object of the matcher's can own (a
  payout's EndToEndId or UETR). Such a line is that object's or nobody's: the engine drops every
  proposal and suggestion for another object of the same type, parks the line with a note naming
  the object when it cannot be applied, and refuses a staff match to anything else.
- ``reverse(match, line)``: the bank reversed (RvslInd) the line of ``match``. The matcher reopens
  what the match did as the domain's own path for money coming back (a payout debit reversed is a
  payout returned), posting the entry for the reversal ``line``, and returns it as ``Applied``; it
  returns None when it has no such path, and the reversal matcher undoes the match instead.
- ``candidates(line)`` lists the objects of the matcher's type staff may tie the line to by hand,
  each as a ``Candidate`` with a label people read (the explain page's picker): reads only, a
  few rows, those ``propose_manual`` would accept.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciliation.models import JournalEntry, Match, StatementLine


@dataclass(frozen=True)
class Proposal:
    line_id: int
    target_type: str
    target_id: str
    amount_minor: int
    reason: str = ""
    score: int = 100
    suggest: bool = False
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Applied:
    line_id: int
    target_type: str
    target_id: str
    amount_minor: int
    entry: JournalEntry | None


@dataclass(frozen=True)
class Named:
    """The object a line names, and how, for people: ``label`` goes into the line's note."""

    target_type: str
    target_id: str
    label: str

    def allows(self, target_type: str, target_id: str) -> bool:
        return target_type != self.target_type or target_id == self.target_id


@dataclass(frozen=True)
class Candidate:
    """An object staff may match a line to by hand, as the explain page offers it."""

    target_type: str
    target_id: str
    label: str

    @property
    def key(self) -> str:
        return f"{self.target_type}:{self.target_id}"


class Matcher(Protocol):
    name: str
    order: int
    target_type: str

    def propose(self, lines: Sequence[StatementLine]) -> list[Proposal]: ...

    def apply(self, proposals: Sequence[Proposal], *, lines: dict[int, StatementLine]) -> list[Applied]: ...

    def unapply(self, match: Match) -> None: ...

    def propose_manual(self, line: StatementLine, target_id: str) -> Proposal: ...


_REGISTRY: dict[str, Matcher] = {}


def register(matcher: Matcher) -> Matcher:
    """Add (or replace, by name) a matcher. Called from AppConfig.ready()."""
    _REGISTRY[matcher.name] = matcher
    return matcher


def lines_named(lines: Sequence[StatementLine]) -> dict[int, Named]:
    """{line id: the object it names} over every matcher that has ``names`` (first in order wins)."""
    named: dict[int, Named] = {}
    for matcher in matchers():
        names = getattr(matcher, "names", None)
        if names is None:
            continue
        for line_id, name in names(lines).items():
            named.setdefault(line_id, name)
    return named


def line_candidates(line: StatementLine) -> list[Candidate]:
    """What staff may tie ``line`` to, over every matcher that has ``candidates`` (in order, each
    object once). A line that names an object (``names``) is offered that object alone."""
    name = lines_named([line]).get(line.pk)
    found: dict[str, Candidate] = {}
    for matcher in matchers():
        candidates = getattr(matcher, "candidates", None)
        if candidates is None:
            continue
        for candidate in candidates(line):
            if name is None or name.allows(candidate.target_type, candidate.target_id):
                found.setdefault(candidate.key, candidate)
    return list(found.values())


def matchers() -> list[Matcher]:
    return sorted(_REGISTRY.values(), key=lambda m: (m.order, m.name))


def matcher_for_target(target_type: str) -> Matcher | None:
    for matcher in matchers():
        if matcher.target_type == target_type and hasattr(matcher, "propose_manual"):
            return matcher
    return None


def matcher_by_name(name: str) -> Matcher | None:
    return _REGISTRY.get(name)
