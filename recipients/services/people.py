"""The person resolver, one algorithm: ``people_resolve`` finds or creates the people of one brand
behind many identities in a constant number of queries; a single identity is a batch of one
(``person_resolve``, ``person_set_iban``). Who may link people and change where they are paid is
decided in ``recipients.services.identity``.

Ingestion resolves a person per event; doing it one by one costs a dozen round trips each. Most
identities in a batch are one of two easy cases, answered set-wise:

* **known**: every identifier is already active on one root person and nothing would be written
  (name and language set, the IBAN already the cluster's, a current account on the root);
* **new**: no identifier exists yet and none is shared with another identity of the batch —
  the people, identifiers, bank accounts and their ``iban_set`` events are inserted in bulk.

Everything else needs writes that change what the identities after it see: a merge, a new
identifier for a known person, a changed IBAN, two identities of the batch that share an
identifier, an unproven identifier someone else holds, and every identity given with an
``anchor`` (the person the caller vouches for: their own claim link, the brand's
``PATCH /people/<id>``; its account becomes the current one). Those are written one by one, in
batch order, each in its own savepoint retried on a lost race (``roots.run_with_retries``),
before the easy cases are settled, so those see their writes. Such an identity whose look-up
finds nothing left to write is answered as a known one, without a lock.

Locks (classes 1 and 2 of ``core.locks``), all through ``roots.person_roots_lock``: an identity
with writes locks the roots it touches (ascending id) before writing, then inserts identifiers in
ascending ``(kind, value)``; and every root returned is locked (ascending id, one statement)
before returning: the caller counts caps per person and needs them stable until commit. A root
merged or erased by someone else between the read and the lock is resolved again with writes.
New people are invisible to others until commit. Races on the identifiers' unique index (two
transactions creating the same person) roll back the bulk insert's savepoint and those identities
are resolved one by one, which retries. None of these services is durable: they join the caller's
transaction (``event_ingest`` resolves the person inside its own).
"""

import logging
from dataclasses import dataclass, field, replace

from django.db import IntegrityError, transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.bulk import rows_insert
from core.exceptions import ApplicationError, InvalidTransition
from recipients.models import BankAccount, Identifier, IdentifierKind, Person, PersonEvent, PersonEventKind
from recipients.services.bank_accounts import AccountWrite, bank_accounts_make_current
from recipients.services.identity import Identity, IdentityInput, identity_normalise
from recipients.services.roots import Retry, person_roots_lock, race_lost, run_with_retries

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resolved:
    """A resolved identity: the root person, its cluster (what caps count over) and the account
    the cluster is paid into (``person_current_bank_account``'s choice; "" when none)."""

    person: Person
    cluster: list[int]
    fingerprint: str
    country: str
    account: BankAccount | None = None  # the account this resolution made current, if it made one


@dataclass
class _Root:
    person: Person
    members: list[int]
    # The cluster's current accounts: (is the root's own, created_at, id, fingerprint, country).
    accounts: list[tuple] = field(default_factory=list)

    @property
    def has_current_on_root(self) -> bool:
        return any(own for own, *_ in self.accounts)

    def resolved(self, account: BankAccount | None = None) -> Resolved:
        """``person_current_bank_account``'s choice: the root's own current account, else the
        newest of the cluster; none for an erased person."""
        fingerprint = country = ""
        if self.accounts and not self.person.erased_at:
            *_, fingerprint, country = max(self.accounts)
        return Resolved(
            person=self.person, cluster=self.members, fingerprint=fingerprint, country=country, account=account
        )


class ComplexBatch(Exception):
    """Raised by ``people_resolve(simple_only=True)`` before it writes anything: some identity
    needs writes (a merge, a switched account) that change what the others of the batch would
    see if they came one by one."""


def people_resolve(
    *,
    brand_id: int | None,  # None: a person several brands knew before people were scoped per brand
    identities: list[IdentityInput],
    sources: list[str],
    anchors: list[Person | None] | None = None,
    actor=None,
    simple_only: bool = False,
) -> list[Resolved | ApplicationError]:
    """Resolve every identity among the people of ``brand_id``, in order, as if one by one; one
    result per identity: ``Resolved``, or the ApplicationError that identity raised (nothing
    written for it). ``anchors`` (one per identity, or None) names the person an identity is
    about: the caller vouches for it (its own claim link, the brand's API for its own person), so
    its people are merged with the anchor's and its account becomes the current one — errors
    ``person_erased`` and ``person_other_brand``. ``actor`` is recorded on what is written.

    With ``simple_only``, raise ComplexBatch (nothing written; some roots may be locked) when an
    identity needs writes: a caller evaluating the batch as if it came one by one must then
    take it one by one. Joins the caller's transaction and keeps every returned root locked until
    it ends."""
    anchors = anchors or [None] * len(identities)
    results: list[Resolved | ApplicationError | None] = [None] * len(identities)
    normalised: dict[int, Identity] = {}
    for i, identity in enumerate(identities):
        try:
            normalised[i] = identity_normalise(identity)
        except ApplicationError as exc:
            results[i] = exc
    roots_of: dict[int, int] = {}  # identity index → root person id
    made: dict[int, BankAccount] = {}  # identity index → the account its writes made current
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
        if anchors[i] is None:
            same_keys.setdefault(ident.keys, []).append(i)
    fresh: list[int] = []
    again: dict[int, int] = {}  # identity index → the index whose new person it is
    candidates: dict[int, int] = {}
    for i, ident in normalised.items():
        hit_roots = {known_by_key[key] for key in ident.keys if key in known_by_key}
        if anchors[i] is not None:
            slow.append(i)
        elif not hit_roots:
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
    locked = person_roots_lock(root_ids=set(candidates.values()))
    roots = _roots_load(set(locked))
    for i, root_id in candidates.items():
        root = roots.get(root_id)
        if root is not None and _nothing_to_write(root.person, normalised[i], lambda r=root: r.has_current_on_root):
            roots_of[i] = root_id
        else:
            slow.append(i)
    if slow and simple_only:
        raise ComplexBatch
    if fresh:
        created = _people_create(brand_id, fresh, normalised, sources)
        if created is None:  # lost a race on an identifier: one by one settles it
            if simple_only:
                raise ComplexBatch
            slow.extend(fresh)
            slow.extend(again)
        else:
            for i, resolved in created.items():
                results[i] = resolved
            for i, first in again.items():
                results[i] = replace(created[first], account=None)

    def with_writes(i: int) -> None:
        try:
            with transaction.atomic():
                person, account = run_with_retries(
                    lambda: _resolve_with_writes(
                        normalised[i], brand_id=brand_id, source=sources[i], anchor=anchors[i], actor=actor
                    )
                )
        except ApplicationError as exc:
            results[i] = exc
            return
        roots_of[i] = person.id
        if account is not None:
            made[i] = account

    for i in sorted(slow):
        with_writes(i)
    # Lock the roots found with writes (only writes lock; re-locking a root is free); anyone
    # merged or erased meanwhile (by another transaction, or by an identity of this batch) is
    # resolved again, which re-reads. New people are ours until commit.
    for _ in range(3 if slow else 0):
        locked = person_roots_lock(root_ids=set(roots_of.values()))
        moved = [i for i, root_id in roots_of.items() if root_id not in locked]
        if not moved:
            break
        for i in moved:
            del roots_of[i]
            with_writes(i)
        slow.extend(moved)
    else:
        if slow:
            person_roots_lock(root_ids=set(roots_of.values()))
    if slow:  # what was read before may have changed: clusters grew, accounts switched
        roots = _roots_load(set(roots_of.values()))
    for i, root_id in roots_of.items():
        results[i] = roots[root_id].resolved(made.get(i))
    return results  # type: ignore[return-value]  # every index is filled above


def person_resolve(
    *,
    brand_id: int | None,
    identity: IdentityInput,
    source: str,
    anchor: Person | None = None,
    actor=None,
) -> Person:
    """Find or create the person of ``brand_id`` these identifiers belong to and attach every
    given identifier it may (``people_resolve`` for one identity; the linking rules are
    ``recipients.services.identity``'s). With an ``anchor``, the identifiers are the anchor's
    person's and a given account becomes their current one. Returns the root person, locked until
    the caller's transaction ends.

    Raises InvalidInput (``invalid_email``, ``invalid_phone``, ``invalid_iban``, ``invalid_social``,
    ``invalid_language``, ``no_identifier``) before writing anything; InvalidTransition
    (``person_erased``, ``person_other_brand``) for an anchor that cannot take them; Conflict
    (``person_contended``) if it kept losing races (practically never). Idempotent. Joins the
    caller's transaction (savepoints)."""
    return _resolve_one(brand_id=brand_id, identity=identity, source=source, anchor=anchor, actor=actor).person


def person_set_iban(*, person: Person, iban: str, source: str, actor=None) -> BankAccount:
    """Make ``iban`` the current bank account of ``person``'s root: the caller has the authority
    to (the person's own claim link, or the brand's API for its own person). The previous account
    stays, not current. Another person of the brand holding the IBAN is merged first (both are
    then the same human). Giving the current IBAN again is a no-op. ``person_resolve`` with
    ``person`` as the anchor and only the IBAN.

    Raises InvalidInput(``invalid_iban``) before writing anything; InvalidTransition
    (``person_erased``) for an erased person. Joins the caller's transaction (savepoint)."""
    resolved = _resolve_one(
        brand_id=person.brand_id, identity=IdentityInput(iban=iban), source=source, anchor=person, actor=actor
    )
    return resolved.account


def _resolve_one(*, brand_id, identity: IdentityInput, source: str, anchor: Person | None, actor) -> Resolved:
    with transaction.atomic():
        (result,) = people_resolve(
            brand_id=brand_id, identities=[identity], sources=[source], anchors=[anchor], actor=actor
        )
    if isinstance(result, ApplicationError):
        raise result
    return result


def _identifiers_lookup(brand_id: int | None, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
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


def _nothing_to_write(person: Person, identity: Identity, has_current_on_root) -> bool:
    """Whether resolving ``identity`` to the root ``person`` (found by all its identifiers, and
    by nobody else's) would write nothing; ``has_current_on_root`` answers, when asked, whether
    the root row has a current account."""
    if person.merged_into_id or person.erased_at:
        return False
    if (identity.name and not person.display_name) or (identity.language and not person.preferred_language):
        return False
    return identity.iban is None or has_current_on_root()


def _people_create(
    brand_id: int | None, fresh: list[int], normalised: dict[int, Identity], sources: list[str]
) -> dict[int, Resolved] | None:
    """Insert brand-new people with their identifiers and bank accounts, in one savepoint, one
    statement per table. Returns identity index → its new person (a cluster of one, paid into the
    account just created), or None when a concurrent writer took an identifier first."""
    now = timezone.now()
    with_iban = [i for i in fresh if normalised[i].iban is not None]
    try:
        with transaction.atomic():
            people = _people_insert(brand_id, [(normalised[i], sources[i]) for i in fresh], now)
            by_index = dict(zip(fresh, people, strict=True))
            _identifiers_insert(
                [(by_index[i], key, sources[i]) for i in fresh for key in normalised[i].keys], brand_id, now
            )
            accounts = bank_accounts_make_current(
                writes=[
                    AccountWrite(
                        person=by_index[i],
                        account=normalised[i].iban,
                        fingerprint=normalised[i].iban_fingerprint,
                        source=sources[i],
                        new_person=True,
                    )
                    for i in with_iban
                ]
            )
    except IntegrityError as exc:
        if not race_lost(exc):
            raise
        return None
    account_of = dict(zip(with_iban, accounts, strict=True))
    return {
        i: Resolved(
            person=person,
            cluster=[person.id],
            fingerprint=account_of[i].iban_fingerprint if i in account_of else "",
            country=account_of[i].country if i in account_of else "",
            account=account_of.get(i),
        )
        for i, person in by_index.items()
    }


def _people_insert(brand_id: int | None, identities: list[tuple[Identity, str]], now) -> list[Person]:
    """New people, one per (identity, source), in one statement."""
    return rows_insert(
        Person,
        [
            Person(
                brand_id=brand_id,
                display_name=identity.name,
                preferred_language=identity.language,
                created_source=source,
                created_at=now,
            )
            for identity, source in identities
        ],
    )


def _identifiers_insert(rows: list[tuple[Person, tuple[str, str], str]], brand_id: int | None, now) -> None:
    """Active identifiers (person, (kind, value), source) in one statement, in ascending (kind,
    value): the order every resolver inserts in, so two can never wait on each other in a cycle."""
    rows_insert(
        Identifier,
        [
            Identifier(person=person, brand_id=brand_id, kind=kind, value=value, source=source, created_at=now)
            for person, (kind, value), source in sorted(rows, key=lambda row: row[1])
        ],
        keys=False,
    )


def _resolve_with_writes(
    identity: Identity, *, brand_id: int | None, source: str, anchor: Person | None, actor
) -> tuple[Person, BankAccount | None]:
    """One attempt at resolving ``identity`` with the writes it needs (run it through
    ``run_with_retries``): lock the roots its identifiers and anchor reach, merge them into the
    oldest, fill in a blank name or language, attach the identifiers nobody else holds, and make
    the account current when it is new to the person (always with an anchor). Returns the root
    and the account made current (None if none was)."""
    root_of = _identifiers_lookup(brand_id, set(identity.keys))
    root_ids = {root for key, root in root_of.items() if identity.may_link(key)}
    if anchor is None and len(root_ids) == 1 and set(root_of) == set(identity.keys):
        # Nothing left to write (an identity of the batch before wrote it): a known one.
        (root_id,) = root_ids
        root = Person.objects.get(pk=root_id)
        if set(root_of.values()) == {root_id} and _nothing_to_write(
            root, identity, lambda: BankAccount.objects.filter(person=root, is_current=True).exists()
        ):
            return root, None
    if anchor is not None:
        anchor_row = Person.objects.filter(pk=anchor.pk).values("merged_into_id", "erased_at", "brand_id").get()
        anchor_root = anchor_row["merged_into_id"] or anchor.pk
        if anchor_row["erased_at"] or Person.objects.filter(pk=anchor_root, erased_at__isnull=False).exists():
            raise InvalidTransition("This person has been erased.", code="person_erased")
        if anchor_row["brand_id"] != brand_id:
            raise InvalidTransition("This person belongs to another brand.", code="person_other_brand")
        root_ids.add(anchor_root)

    created = not root_ids
    if root_ids:
        roots = person_roots_lock(root_ids=root_ids)
        if len(roots) != len(root_ids):
            raise Retry  # merged or erased between our read and our lock
        survivor = min(roots.values(), key=lambda p: (p.created_at, p.id))
        losers = [p for p in roots.values() if p.id != survivor.id]
        if losers:
            _people_merge(survivor=survivor, losers=losers, source=source, actor=actor)
        changed = []
        if identity.name and not survivor.display_name:
            survivor.display_name = identity.name
            changed.append("display_name")
        if identity.language and not survivor.preferred_language:
            survivor.preferred_language = identity.language
            changed.append("preferred_language")
        if changed:
            survivor.save(update_fields=changed)
    else:
        (survivor,) = _people_insert(brand_id, [(identity, source)], timezone.now())
    ours = root_ids | {survivor.id}
    # An unproven identifier another person of the brand holds links nobody: refused, audited.
    refused = sorted(key for key, root in root_of.items() if root not in ours)
    if refused:
        PersonEvent.objects.create(
            person=survivor,
            kind=PersonEventKind.LINK_REFUSED,
            actor=actor,
            source=source,
            detail={"kinds": [kind for kind, _ in refused], "held_by": sorted({root_of[key] for key in refused})},
        )
    _identifiers_insert(
        [(survivor, key, source) for key in identity.keys if key not in root_of], brand_id, timezone.now()
    )
    if identity.iban is None:
        return survivor, None
    # An active IBAN identifier of ours exists exactly when the cluster has an account for it. A
    # new IBAN is the freshest thing the person told us, so it becomes current; one they gave
    # before (maybe stale partner data) does not silently switch the account back.
    new_to_cluster = root_of.get((IdentifierKind.IBAN, identity.iban_fingerprint)) not in ours
    if not (
        anchor is not None
        or new_to_cluster
        or not BankAccount.objects.filter(person=survivor, is_current=True).exists()
    ):
        return survivor, None
    (account,) = bank_accounts_make_current(
        writes=[
            AccountWrite(
                person=survivor,
                account=identity.iban,
                fingerprint=identity.iban_fingerprint,
                source=source,
                actor=actor,
                new_person=created,
            )
        ]
    )
    return survivor, account


def _people_merge(*, survivor: Person, losers: list[Person], source: str, actor=None) -> None:
    """Re-point the losers and everyone already merged into them at ``survivor``. Callers hold the
    row locks of all of them."""
    now = timezone.now()
    loser_ids = [p.id for p in losers]
    moved = list(Person.objects.filter(merged_into_id__in=loser_ids).values_list("id", flat=True))
    Person.objects.filter(id__in=loser_ids).update(merged_into=survivor, merged_at=now)
    # Members of a loser were merged earlier: keep that merged_at, only flatten the pointer.
    Person.objects.filter(id__in=moved).update(merged_into=survivor)
    events = [
        PersonEvent(
            person=survivor,
            kind=PersonEventKind.MERGED,
            actor=actor,
            source=source,
            detail={"merged": loser_ids, "members_moved": sorted(moved)},
        )
    ]
    events += [
        PersonEvent(person=loser, kind=PersonEventKind.MERGED, actor=actor, source=source, detail={"into": survivor.id})
        for loser in losers
    ]
    PersonEvent.objects.bulk_create(events)
    logger.info("people merged", extra={"survivor": survivor.id, "merged": loser_ids})
