"""The person resolver: ``people_resolve`` finds or creates the people of one brand behind many
identities in a constant number of queries; ``person_resolve`` is a batch of one. Who may link
people and change where they are paid is decided in ``recipients.services.identity``.

Ingestion resolves a person per event; doing it one by one costs a dozen round trips each. Most
identities in a batch are one of two easy cases, answered set-wise:

* **known**: every identifier is already active on one root person and nothing would be written
  (name and language set, the IBAN already the cluster's, a current account on the root) —
  the same shortcut the slow way takes;
* **new**: no identifier exists yet and none is shared with another identity of the batch —
  the people, identifiers, bank accounts and their ``iban_set`` events are inserted in bulk.

Everything else (a merge, a new identifier for a known person, a changed IBAN, two identities of
the batch that share an identifier, an unproven identifier someone else holds) goes the slow way
(``identity.resolve_once``) one by one, in batch order, before the easy cases are settled, so
those see its writes.

Locks: unlike the slow way's shortcut, every root is locked (``FOR UPDATE``, ascending id,
one statement) before returning: the caller counts caps per person and needs them stable until
commit. A root merged or erased by someone else between the read and the lock is resolved again
the slow way. New people are invisible to others until commit. Races on the identifiers' unique
index (two transactions creating the same person) roll back the bulk insert's savepoint and those
identities are resolved one by one, which retries as the slow way always does.
"""

from dataclasses import dataclass, field

from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.bulk import rows_insert
from core.exceptions import ApplicationError
from recipients import crypto
from recipients.models import BankAccount, Identifier, IdentifierKind, Person, PersonEvent, PersonEventKind
from recipients.normalise import iban_normalise
from recipients.services.identity import (
    RACE_CONSTRAINTS,
    Identity,
    IdentityInput,
    bank_account_columns,
    constraint_name,
    identity_normalise,
    resolve_once,
    run_with_retries,
)


@dataclass(frozen=True)
class Resolved:
    """A resolved identity: the root person, its cluster (what caps count over) and the account
    the cluster is paid into (``person_current_bank_account``'s choice; "" when none)."""

    person: Person
    cluster: list[int]
    fingerprint: str
    country: str


@dataclass
class _Root:
    person: Person
    members: list[int]
    # The cluster's current accounts: (is the root's own, created_at, id, fingerprint, country).
    accounts: list[tuple] = field(default_factory=list)

    @property
    def has_current_on_root(self) -> bool:
        return any(own for own, *_ in self.accounts)

    def resolved(self) -> Resolved:
        """``person_current_bank_account``'s choice: the root's own current account, else the
        newest of the cluster; none for an erased person."""
        fingerprint = country = ""
        if self.accounts and not self.person.erased_at:
            *_, fingerprint, country = max(self.accounts)
        return Resolved(person=self.person, cluster=self.members, fingerprint=fingerprint, country=country)


class ComplexBatch(Exception):
    """Raised by ``people_resolve(simple_only=True)`` before it writes anything: some identity
    needs the slow way, whose writes (a merge, a switched account) change what the others of
    the batch would see if they came one by one."""


def people_resolve(
    *,
    brand_id: int,
    identities: list[IdentityInput],
    sources: list[str],
    simple_only: bool = False,
) -> list[Resolved | ApplicationError]:
    """Resolve every identity among the people of ``brand_id``, in order, as if one by one; one
    result per identity: ``Resolved``, or the ApplicationError that identity raised (nothing
    written for it).

    With ``simple_only``, raise ComplexBatch (nothing written; some roots may be locked) when an
    identity needs the slow way: a caller evaluating the batch as if it came one by one must then
    take it one by one. Joins the caller's transaction and keeps every returned root locked until
    it ends."""
    results: list[Resolved | ApplicationError | None] = [None] * len(identities)
    normalised: dict[int, Identity] = {}
    for i, identity in enumerate(identities):
        try:
            normalised[i] = identity_normalise(identity)
        except ApplicationError as exc:
            results[i] = exc
    roots_of: dict[int, int] = {}  # identity index → root person id
    slow: list[int] = []
    known_by_key = _identifiers_lookup(brand_id, {key for ident in normalised.values() for key in ident.keys})
    key_users: dict[tuple[str, str], int] = {}
    for ident in normalised.values():
        for key in ident.keys:
            key_users[key] = key_users.get(key, 0) + 1
    # Identities with exactly the same identifiers (a customer buying twice in one batch) are one
    # new person, created for the first: the others would find it with nothing to write.
    same_keys: dict[tuple, list[int]] = {}
    for i, ident in normalised.items():
        same_keys.setdefault(ident.keys, []).append(i)
    fresh: list[int] = []
    again: dict[int, int] = {}  # identity index → the index whose new person it is
    candidates: dict[int, int] = {}
    for i, ident in normalised.items():
        hit_roots = {known_by_key[key] for key in ident.keys if key in known_by_key}
        if not hit_roots:
            group = same_keys[ident.keys]
            first = normalised[group[0]]
            if not all(key_users[key] == len(group) for key in ident.keys):
                slow.append(i)  # shares some identifier with a different identity: links people
            elif i == group[0]:
                fresh.append(i)
            elif (ident.name and not first.name) or (ident.language and not first.language):
                slow.append(i)  # would fill in what the first left blank
            else:
                again[i] = group[0]
        elif (
            len(hit_roots) == 1
            and all(key in known_by_key for key in ident.keys)
            and any(ident.may_link(key) for key in ident.keys)
        ):
            candidates[i] = next(iter(hit_roots))
        else:
            slow.append(i)
    # Lock before reading what decides (name, accounts): read under the lock, it stays true.
    stale = _roots_lock(set(candidates.values()))
    roots = _roots_load(set(candidates.values()) - stale)
    for i, root_id in candidates.items():
        root = roots.get(root_id)
        if root is not None and _nothing_to_write(root, normalised[i]):
            roots_of[i] = root_id
        else:
            slow.append(i)
    if slow and simple_only:
        raise ComplexBatch
    if fresh:
        created = _people_create(brand_id, fresh, normalised, sources)
        if created is None:  # lost a race on an identifier: the slow way settles it
            if simple_only:
                raise ComplexBatch
            slow.extend(fresh)
            slow.extend(again)
        else:
            for i, resolved in created.items():
                results[i] = resolved
            for i, first in again.items():
                results[i] = created[first]
    for i in sorted(slow):
        _resolve_slowly(brand_id, i, normalised, sources, results, roots_of)
    # Lock the roots the slow way found (it locks only when it writes; re-locking a
    # root is free); anyone merged or erased meanwhile (by another transaction, or by a slow
    # resolution of this batch) is resolved again, which re-reads. New people are ours until commit.
    for _ in range(3 if slow else 0):
        stale = _roots_lock(set(roots_of.values()))
        moved = [i for i, root_id in roots_of.items() if root_id in stale]
        if not moved:
            break
        for i in moved:
            del roots_of[i]
            _resolve_slowly(brand_id, i, normalised, sources, results, roots_of)
        slow.extend(moved)
    else:
        if slow:
            _roots_lock(set(roots_of.values()))
    if slow:  # what was read before may have changed: clusters grew, accounts switched
        roots = _roots_load(set(roots_of.values()))
    for i, root_id in roots_of.items():
        results[i] = roots[root_id].resolved()
    return results  # type: ignore[return-value]  # every index is filled above


def _identifiers_lookup(brand_id: int, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Active identifier of the brand → its root person id, for every key that exists."""
    if not keys:
        return {}
    rows = Identifier.objects.filter(
        brand_id=brand_id,
        is_active=True,
        kind__in=sorted({kind for kind, _ in keys}),
        value__in=sorted({value for _, value in keys}),
    ).values_list("kind", "value", Coalesce("person__merged_into_id", "person_id"))
    return {(kind, value): root for kind, value, root in rows if (kind, value) in keys}


def _roots_load(root_ids: set[int]) -> dict[int, _Root]:
    """Root people with their cluster members and whether the root row has a current account."""
    if not root_ids:
        return {}
    ids = sorted(root_ids)
    people = Person.objects.filter(id__in=ids) | Person.objects.filter(merged_into_id__in=ids)
    roots: dict[int, _Root] = {}
    members: dict[int, list[int]] = {}
    for person in people:
        if person.id in root_ids and person.merged_into_id is None:
            roots[person.id] = _Root(person=person, members=[])
        members.setdefault(person.merged_into_id or person.id, []).append(person.id)
    for root_id, root in roots.items():
        root.members = sorted(members.get(root_id, [root_id]))
    root_of_member = {m: root_id for root_id, root in roots.items() for m in root.members}
    current = BankAccount.objects.filter(person_id__in=list(root_of_member), is_current=True).values_list(
        "person_id", "created_at", "id", "iban_fingerprint", "country"
    )
    for person_id, created_at, account_id, fingerprint, country in current:
        root_id = root_of_member[person_id]
        roots[root_id].accounts.append((person_id == root_id, created_at, account_id, fingerprint, country))
    return roots


def _nothing_to_write(root: _Root, identity: Identity) -> bool:
    person = root.person
    if person.erased_at:
        return False
    if (identity.name and not person.display_name) or (identity.language and not person.preferred_language):
        return False
    return identity.iban is None or root.has_current_on_root


def _people_create(
    brand_id: int, fresh: list[int], normalised: dict[int, Identity], sources: list[str]
) -> dict[int, Resolved] | None:
    """Insert brand-new people with their identifiers and bank accounts, in one savepoint, one
    statement per table. Returns identity index → its new person (a cluster of one, paid into the
    account just created), or None when a concurrent writer took an identifier first."""
    now = timezone.now()
    with_iban = [i for i in fresh if normalised[i].iban is not None]
    try:
        with transaction.atomic():
            people = rows_insert(
                Person,
                [
                    Person(
                        brand_id=brand_id,
                        display_name=normalised[i].name,
                        preferred_language=normalised[i].language,
                        created_source=sources[i],
                        created_at=now,
                    )
                    for i in fresh
                ],
            )
            by_index = dict(zip(fresh, people, strict=True))
            # Ascending (kind, value), the order the slow way inserts in: no deadlock cycle.
            rows_insert(
                Identifier,
                [
                    Identifier(
                        person=by_index[i], brand_id=brand_id, kind=kind, value=value, source=sources[i], created_at=now
                    )
                    for kind, value, i in sorted((kind, value, i) for i in fresh for kind, value in normalised[i].keys)
                ],
                keys=False,
            )
            accounts = rows_insert(
                BankAccount, [_account(by_index[i], normalised[i], sources[i], now) for i in with_iban]
            )
            # The audit row _bank_account_make_current writes. No payouts hook: a person created
            # this instant has nothing owed to them yet.
            rows_insert(
                PersonEvent,
                [
                    PersonEvent(
                        person=account.person,
                        kind=PersonEventKind.IBAN_SET,
                        source=account.source,
                        detail={
                            "bank_account": account.id,
                            "previous_bank_account": None,
                            "country": account.country,
                            "reused": False,
                        },
                        created_at=now,
                    )
                    for account in accounts
                ],
                keys=False,
            )
    except IntegrityError as exc:
        if constraint_name(exc) not in RACE_CONSTRAINTS:
            raise
        return None
    account_of = dict(zip(with_iban, accounts, strict=True))
    return {
        i: Resolved(
            person=person,
            cluster=[person.id],
            fingerprint=account_of[i].iban_fingerprint if i in account_of else "",
            country=account_of[i].country if i in account_of else "",
        )
        for i, person in by_index.items()
    }


def _account(person: Person, identity: Identity, source: str, now) -> BankAccount:
    return BankAccount(
        person=person,
        iban_fingerprint=identity.iban_fingerprint,
        **bank_account_columns(identity.iban),
        is_current=True,
        source=source,
        created_at=now,
    )


def _resolve_slowly(brand_id: int, i: int, normalised, sources, results, roots_of: dict[int, int]) -> None:
    try:
        with transaction.atomic():
            person, _ = run_with_retries(
                lambda: resolve_once(
                    normalised[i], brand_id=brand_id, source=sources[i], anchor=None, iban_always_current=False
                )
            )
    except ApplicationError as exc:
        results[i] = exc
        return
    roots_of[i] = person.id


def _roots_lock(root_ids: set[int]) -> set[int]:
    """Lock the root rows, ascending, in one statement; returns those no longer roots (merged
    or erased since they were read)."""
    if not root_ids:
        return set()
    rows = (
        Person.objects.filter(id__in=sorted(root_ids)).order_by("id").values_list("id", "merged_into_id", "erased_at")
    )
    if connection.vendor == "postgresql":
        rows = rows.select_for_update()
    seen = {person_id: (merged is None and erased is None) for person_id, merged, erased in rows}
    return {root_id for root_id in root_ids if not seen.get(root_id, False)}


def person_resolve(*, brand_id: int, identity: IdentityInput, source: str) -> Person:
    """Find or create the person of ``brand_id`` these identifiers belong to and attach every
    given identifier it may (``people_resolve`` for one identity; the linking rules are
    ``recipients.services.identity``'s). Returns the root person, locked until the caller's
    transaction ends.

    Raises InvalidInput (``invalid_email``, ``invalid_phone``, ``invalid_iban``, ``invalid_social``,
    ``invalid_language``, ``no_identifier``) before writing anything; Conflict
    (``person_contended``) if it kept losing races (practically never). Idempotent. Joins the
    caller's transaction (savepoints)."""
    with transaction.atomic():
        (result,) = people_resolve(brand_id=brand_id, identities=[identity], sources=[source])
    if isinstance(result, ApplicationError):
        raise result
    return result.person


def person_set_iban(*, person: Person, iban: str, source: str, actor=None) -> BankAccount:
    """Make ``iban`` the current bank account of ``person``'s root: the caller has the authority
    to (the person's own claim link, or the brand's API for its own person). The previous account
    stays, not current. Another person of the brand holding the IBAN is merged first (both are
    then the same human). Giving the current IBAN again is a no-op.

    Raises InvalidInput(``invalid_iban``) before writing anything; InvalidTransition
    (``person_erased``) for an erased person. Joins the caller's transaction (savepoint)."""
    info = iban_normalise(iban)
    identity = Identity(
        name="", language="", keys=((IdentifierKind.IBAN, crypto.iban_fingerprint(info.normalised)),), iban=info
    )
    _, account = run_with_retries(
        lambda: resolve_once(
            identity,
            brand_id=person.brand_id,
            source=source,
            anchor=person,
            iban_always_current=True,
            actor=actor,
        )
    )
    return account
