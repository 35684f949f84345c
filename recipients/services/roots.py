"""Person roots: the one way to lock them, and the retry loop of every write about a person.

A person's root row (the person everyone of the cluster is merged into) is what serialises the
writes about the human: the resolver's links, merges and account changes, a reward's expiry
against an account given meanwhile, the claim page, erasure. ``person_roots_lock`` takes those
rows, ascending id, in one statement — the first class of the engine's lock order
(``core.locks``); ``person_root_lock`` is the same for one person, following a merge.

Concurrency: the partial unique constraints on active identifiers and current accounts decide
races between resolvers. A write that loses one gets an IntegrityError inside its savepoint and
runs again (``run_with_retries``), now seeing the winner's rows; so does one whose locked root was
merged or erased meanwhile (``Retry``), and one PostgreSQL rolled back to break a deadlock.
"""

from django.db import IntegrityError, OperationalError, transaction

from core.exceptions import Conflict
from recipients.models import Person

_MAX_ATTEMPTS = 10
_SQLITE_UNIQUE = "sqlite_unique"
_RACE_CONSTRAINTS = frozenset(
    {"identifier_active_unique", "bank_account_one_current", "bank_account_person_iban_unique", _SQLITE_UNIQUE}
)
# PostgreSQL rolled the statement back to break a deadlock or a serialization conflict: the
# attempt's savepoint goes, and running it again is safe.
_RETRY_SQLSTATES = frozenset({"40P01", "40001"})


class Retry(Exception):
    """Another transaction changed the people we locked (merged or erased them); look again."""


def race_lost(exc: IntegrityError) -> bool:
    """Whether ``exc`` is a race decided by one of the people's unique constraints (another
    transaction wrote the same identifier or account first), not a bug. PostgreSQL names the
    violated constraint in the diagnostics; SQLite names only the columns, and every unique
    constraint on our tables is one of the race deciders."""
    name = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None)
    if not name and str(exc).startswith("UNIQUE constraint failed: recipients_"):
        name = _SQLITE_UNIQUE
    return name in _RACE_CONSTRAINTS


def run_with_retries(attempt_once):
    """Run ``attempt_once`` in a savepoint until it is not beaten by a concurrent writer; returns
    what it returns. Raises Conflict (``person_contended``) when it kept losing (practically never)."""
    for _ in range(_MAX_ATTEMPTS):
        try:
            with transaction.atomic():
                return attempt_once()
        except Retry:
            continue
        except IntegrityError as exc:
            if not race_lost(exc):
                raise
            continue
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) not in _RETRY_SQLSTATES:
                raise
            continue
    raise Conflict("Could not settle who this person is under heavy contention; try again.", code="person_contended")


def person_roots_lock(*, root_ids: set[int], erased_ok: bool = False) -> dict[int, Person]:
    """Lock the rows of ``root_ids``, ascending id, in one statement (``FOR UPDATE``; a no-op on
    SQLite, whose write transactions are exclusive) and return those still roots — not merged,
    and not erased unless ``erased_ok`` — by id, read under the lock. An id missing from the
    answer was merged or erased since the caller read it: the caller looks again. Joins the
    caller's transaction; the locks last until it ends."""
    if not root_ids:
        return {}
    rows = Person.objects.select_for_update().filter(id__in=sorted(root_ids)).order_by("id")
    return {p.id: p for p in rows if p.merged_into_id is None and (erased_ok or p.erased_at is None)}


def person_root_lock(*, person: Person) -> Person:
    """Lock the root row of ``person``'s human (erased or not) and return it: what a change of
    where they are paid takes first, so a caller holding it sees every account given before and
    none given meanwhile. Joins the caller's transaction (savepoints); a merge in between is
    followed to the new root. Raises Conflict (``person_contended``) like ``run_with_retries``."""

    def once() -> Person:
        row = Person.objects.filter(pk=person.pk).values("id", "merged_into_id").get()
        root_id = row["merged_into_id"] or row["id"]
        root = person_roots_lock(root_ids={root_id}, erased_ok=True).get(root_id)
        if root is None:
            raise Retry
        return root

    return run_with_retries(once)
