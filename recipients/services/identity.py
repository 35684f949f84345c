"""Who a person is: the slow, one-identity path of the person resolver and what it shares with
the set-wise path (``recipients.services.people``).

Who may change where a person is paid — the rule every resolution follows:

* People belong to one brand, and a look-up only ever sees the brand's own people: another brand's
  event, PATCH or registration carrying the same e-mail finds nothing and creates that brand's own
  person. Across brands identifiers link for fraud signals only (``recipients.selectors``).
* The brand's own API (events, ``POST``/``PATCH /people/``) vouches for every identifier it sends
  about its own people (``IdentityInput.proven`` is None): shared identifiers link its people (the
  younger merged into the oldest), and a new IBAN becomes the current account.
* A public page vouches only for what the person proved (``proven``: the TikTok account of an
  OAuth login, the WhatsApp number that sent the opt-in code) or for the person behind their own
  claim link (``anchor``). Only proven identifiers find or link existing people; an unproven one
  attaches to the person found only where no other person of the brand holds it, otherwise the
  link is refused and audited (``link_refused``). Typing someone's e-mail with your own IBAN
  therefore reaches nobody else's person, account or money.
* Every change of an existing person's current account is an ``iban_set`` event with the
  previous account and an ``account_changed`` notice to the person, in the same transaction.

Concurrency: the partial unique constraint on active ``(brand, kind, value)`` decides races. A
look-up that loses a race gets an IntegrityError inside its savepoint and simply runs again, now
seeing the winner's rows. Locks (classes 1 and 2 of ``core.locks``): root person rows in ascending
id, then identifier inserts in ascending ``(kind, value)`` order, so two resolvers can never wait
on each other in a cycle. None of these services is durable: they join the caller's transaction
(``event_ingest`` resolves the person inside its own) and use a savepoint per attempt.
"""

import logging
from dataclasses import dataclass

from django.db import IntegrityError, OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

from core.exceptions import Conflict, InvalidInput, InvalidTransition
from core.hooks import BANK_ACCOUNT_CHANGED, hook_fire
from recipients import crypto
from recipients.models import (
    BankAccount,
    Identifier,
    IdentifierKind,
    Language,
    NoticeKind,
    Person,
    PersonEvent,
    PersonEventKind,
)
from recipients.normalise import IBAN, AccountInfo, email_normalise, iban_normalise, phone_normalise, social_normalise
from recipients.services.notices import NoticeNew, notices_record

logger = logging.getLogger(__name__)

_MAX_ATTEMPTS = 10
_SQLITE_UNIQUE = "sqlite_unique"
RACE_CONSTRAINTS = frozenset(
    {"identifier_active_unique", "bank_account_one_current", "bank_account_person_iban_unique", _SQLITE_UNIQUE}
)
# PostgreSQL rolled the statement back to break a deadlock or a serialization conflict: the
# attempt's savepoint goes, and running it again is safe.
_RETRY_SQLSTATES = frozenset({"40P01", "40001"})


@dataclass(frozen=True)
class IdentityInput:
    name: str = ""
    email: str = ""
    whatsapp: str = ""  # any human format; normalised to E.164
    iban: str = ""  # any human format; validated and normalised with schwifty
    social_provider: str = ""  # e.g. "tiktok"
    social_uid: str = ""  # e.g. the TikTok open_id
    phone_region: str = ""  # default region for numbers without +, e.g. "IT"
    language: str = ""  # "en" / "it"; applied only if the person has none yet
    # The bank account already validated by the caller: ``iban`` normalised (``iban_normalise``),
    # or a local account (``recipients.accounts.account_normalise``). Wins over ``iban``.
    account: AccountInfo | None = None
    # The identifier kinds the person proved on a public page (see the module docstring); None
    # when the brand's own API vouches for all of them.
    proven: frozenset[str] | None = None


@dataclass(frozen=True)
class Identity:
    name: str
    language: str
    keys: tuple[tuple[str, str], ...]  # (kind, value), sorted: the insert order that avoids deadlocks
    iban: AccountInfo | None  # the bank account: an IBAN or a local account
    proven: frozenset[str] | None = None

    def may_link(self, key: tuple[str, str]) -> bool:
        """May this identifier find (and link) an existing person of the brand?"""
        return self.proven is None or key[0] in self.proven

    @property
    def iban_fingerprint(self) -> str:
        """The IBAN's fingerprint as computed for ``keys`` ("" without an IBAN): not again."""
        return next((value for kind, value in self.keys if kind == IdentifierKind.IBAN), "")


class Retry(Exception):
    """Another transaction changed the people we locked (merged or erased them); look again."""


_LANGUAGES = frozenset(Language.values)  # once: ``.values`` builds a new list on every access


def identity_normalise(identity: IdentityInput) -> Identity:
    keys: list[tuple[str, str]] = []
    if identity.email.strip():
        keys.append((IdentifierKind.EMAIL, email_normalise(identity.email)))
    if identity.whatsapp.strip():
        keys.append((IdentifierKind.WHATSAPP, phone_normalise(identity.whatsapp, region=identity.phone_region)))
    if identity.social_provider.strip() or identity.social_uid.strip():
        keys.append((IdentifierKind.SOCIAL, social_normalise(identity.social_provider, identity.social_uid)))
    iban = identity.account or (iban_normalise(identity.iban) if identity.iban.strip() else None)
    if iban is not None:
        keys.append((IdentifierKind.IBAN, crypto.iban_fingerprint(iban.normalised)))
    if not keys:
        raise InvalidInput(
            "Give at least one of: email, WhatsApp number, IBAN or social account.", code="no_identifier"
        )
    language = identity.language.strip().lower()
    if language and language not in _LANGUAGES:
        raise InvalidInput(f"'{identity.language}' is not a supported language.", code="invalid_language")
    return Identity(
        name=identity.name.strip()[:200],
        language=language,
        keys=tuple(sorted(keys)),
        iban=iban,
        proven=frozenset(identity.proven) if identity.proven is not None else None,
    )


def constraint_name(exc: IntegrityError) -> str:
    """PostgreSQL names the violated constraint in the diagnostics; SQLite names only the columns,
    and every unique constraint on our tables is one of the race deciders."""
    name = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None)
    if name:
        return name
    return _SQLITE_UNIQUE if str(exc).startswith("UNIQUE constraint failed: recipients_") else ""


def run_with_retries(attempt_once):
    """Run ``attempt_once`` in a savepoint until it is not beaten by a concurrent writer."""
    for _ in range(_MAX_ATTEMPTS):
        try:
            with transaction.atomic():
                return attempt_once()
        except Retry:
            continue
        except IntegrityError as exc:
            if constraint_name(exc) not in RACE_CONSTRAINTS:
                raise
            continue
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) not in _RETRY_SQLSTATES:
                raise
            continue
    raise Conflict("Could not settle who this person is under heavy contention; try again.", code="person_contended")


def lock_roots(root_ids: set[int]) -> list[Person]:
    roots = list(Person.objects.select_for_update().filter(id__in=root_ids).order_by("id"))
    # A root merged or erased between our read and our lock is stale: start over.
    if len(roots) != len(root_ids) or any(r.merged_into_id or r.erased_at for r in roots):
        raise Retry
    return roots


def person_root_lock(*, person: Person) -> Person:
    """Lock the root row of ``person``'s human (erased or not) and return it: what a change of
    where they are paid takes first, so a caller holding it sees every account given before and
    none given meanwhile. Joins the caller's transaction (savepoints); a merge in between is
    followed to the new root. Raises Conflict (``person_contended``) like ``run_with_retries``."""

    def once() -> Person:
        row = Person.objects.filter(pk=person.pk).values("id", "merged_into_id").get()
        root = Person.objects.select_for_update().get(pk=row["merged_into_id"] or row["id"])
        if root.merged_into_id:
            raise Retry
        return root

    return run_with_retries(once)


def cluster_ids(root: Person) -> list[int]:
    return sorted(Person.objects.filter(Q(id=root.id) | Q(merged_into_id=root.id)).values_list("id", flat=True))


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


def bank_account_columns(account: AccountInfo) -> dict:
    """The BankAccount columns that describe ``account`` (all but its fingerprint): the one way
    both writers, this module's and ``people``'s set-wise one, fill them."""
    return {
        "kind": account.kind,
        "currency": account.currency,
        "ciphertext": crypto.encrypt(account.secret),
        "masked": account.masked,
        "country": account.country,
        "bic": account.bic,
        "bank_name": account.bank_name,
    }


def _bank_account_make_current(*, person: Person, iban: AccountInfo, source: str, actor=None) -> BankAccount:
    """Make ``iban`` (an IBAN or a local account) the person's current account, reusing the row if
    they gave it before. Caller holds the person's row lock."""
    fingerprint = crypto.iban_fingerprint(iban.normalised)
    rows = list(BankAccount.objects.filter(Q(person=person) & (Q(iban_fingerprint=fingerprint) | Q(is_current=True))))
    existing = next((r for r in rows if r.iban_fingerprint == fingerprint), None)
    current = next((r for r in rows if r.is_current), None)
    if existing is not None and existing.kind != IBAN:
        # The same local account given again may carry new holder details (an address, which the
        # fingerprint leaves out): the newest are the ones to pay with.
        existing.ciphertext = crypto.encrypt(iban.secret)
        existing.save(update_fields=["ciphertext"])
    if existing is not None and existing.is_current:
        return existing
    if current is not None:
        current.is_current = False
        current.save(update_fields=["is_current"])
    if existing is not None:
        existing.is_current = True
        existing.save(update_fields=["is_current"])
        account = existing
    else:
        account = BankAccount.objects.create(
            person=person, iban_fingerprint=fingerprint, is_current=True, source=source, **bank_account_columns(iban)
        )
    event = PersonEvent.objects.create(
        person=person,
        kind=PersonEventKind.IBAN_SET,
        actor=actor,
        source=source,
        detail={
            "bank_account": account.id,
            "previous_bank_account": current.id if current else None,
            "country": iban.country,
            "reused": existing is not None,
        },
    )
    if current is not None:
        # Someone who did not make the change must learn of it before the money moves.
        notices_record(
            notices=[
                NoticeNew(
                    person_id=person.id,
                    kind=NoticeKind.ACCOUNT_CHANGED,
                    key=f"account_changed:{event.pk}",
                    data={"bank_account": account.id},
                )
            ]
        )
    hook_fire(BANK_ACCOUNT_CHANGED, event)
    return account


def _nothing_to_write(root: Person, identity: Identity) -> bool:
    if root.merged_into_id or root.erased_at:
        return False
    if (identity.name and not root.display_name) or (identity.language and not root.preferred_language):
        return False
    return identity.iban is None or BankAccount.objects.filter(person=root, is_current=True).exists()


def resolve_once(
    identity: Identity,
    *,
    brand_id: int | None,  # None: a person several brands knew before people were scoped per brand
    source: str,
    anchor: Person | None,
    iban_always_current: bool,
    actor=None,
) -> tuple[Person, BankAccount | None]:
    """One attempt at resolving ``identity`` among the people of ``brand_id`` (run it through
    ``run_with_retries``). Returns the root and the account made current (None if none was)."""
    key_filter = Q()
    for kind, value in identity.keys:
        key_filter |= Q(kind=kind, value=value)
    hits = list(
        Identifier.objects.filter(key_filter, brand_id=brand_id, is_active=True).values_list(
            "kind", "value", "person_id", "person__merged_into_id"
        )
    )
    root_of = {(kind, value): merged_into or person_id for kind, value, person_id, merged_into in hits}
    root_ids = {root for key, root in root_of.items() if identity.may_link(key)}
    if anchor is None and len(root_ids) == 1 and set(root_of) == set(identity.keys):
        # The common case (a returning person, nothing new): answer without locking, so bulk
        # callers resolving many known people in one transaction do not queue on person rows.
        (root_id,) = root_ids
        root = Person.objects.get(pk=root_id)
        if set(root_of.values()) == {root_id} and _nothing_to_write(root, identity):
            return root, None
    if anchor is not None:
        anchor_row = Person.objects.filter(pk=anchor.pk).values("merged_into_id", "erased_at", "brand_id").get()
        anchor_root = anchor_row["merged_into_id"] or anchor.pk
        if anchor_row["erased_at"] or Person.objects.filter(pk=anchor_root, erased_at__isnull=False).exists():
            raise InvalidTransition("This person has been erased.", code="person_erased")
        if anchor_row["brand_id"] != brand_id:
            raise InvalidTransition("This person belongs to another brand.", code="person_other_brand")
        root_ids.add(anchor_root)

    if root_ids:
        roots = lock_roots(root_ids)
        survivor = min(roots, key=lambda p: (p.created_at, p.id))
        losers = [p for p in roots if p.id != survivor.id]
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
        survivor = Person.objects.create(
            brand_id=brand_id, display_name=identity.name, preferred_language=identity.language, created_source=source
        )
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
    Identifier.objects.bulk_create(
        [
            Identifier(person=survivor, brand_id=brand_id, kind=k, value=v, source=source)
            for k, v in identity.keys
            if (k, v) not in root_of
        ]
    )

    account = None
    if identity.iban is not None:
        # An active IBAN identifier of ours exists exactly when the cluster has an account for it.
        new_to_cluster = root_of.get((IdentifierKind.IBAN, identity.iban_fingerprint)) not in ours
        has_current = BankAccount.objects.filter(person=survivor, is_current=True).exists()
        # A new IBAN is the freshest thing the person told us, so it becomes current; one they
        # gave before (maybe stale partner data) does not silently switch the account back.
        if iban_always_current or new_to_cluster or not has_current:
            account = _bank_account_make_current(person=survivor, iban=identity.iban, source=source, actor=actor)
    return survivor, account
