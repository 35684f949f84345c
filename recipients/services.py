"""Writes about people: resolving identities, bank accounts, consent, erasure.

Linking rule: any shared identifier means the same human. ``person_resolve`` finds every person
row that owns one of the given identifiers; if there are several roots, the oldest survives and the
others are merged into it (rows are re-pointed, never deleted).

Concurrency: the partial unique constraint on active ``(kind, value)`` decides races. A look-up that
loses a race gets an IntegrityError inside its savepoint and simply runs again, now seeing the
winner's rows. Lock order (defined here only): root person rows in ascending id, then identifier
inserts in ascending ``(kind, value)`` order, so two resolvers can never wait on each other in a
cycle. None of these services is durable: they join the caller's transaction (``event_ingest``
resolves the person inside its own) and use a savepoint per attempt.
"""

import ipaddress
import logging
from dataclasses import dataclass

from django.db import IntegrityError, OperationalError, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Concat
from django.utils import timezone

from core.exceptions import Conflict, InvalidInput, InvalidTransition
from recipients import crypto
from recipients.models import (
    BankAccount,
    Consent,
    Identifier,
    IdentifierKind,
    Language,
    Person,
    PersonEvent,
    PersonEventKind,
)
from recipients.normalise import IbanInfo, email_normalise, iban_normalise, phone_normalise, social_normalise

logger = logging.getLogger(__name__)

_MAX_ATTEMPTS = 10
_SQLITE_UNIQUE = "sqlite_unique"
_RACE_CONSTRAINTS = frozenset(
    {"identifier_active_unique", "bank_account_one_current", "bank_account_person_iban_unique", _SQLITE_UNIQUE}
)
_DEADLOCK_SQLSTATE = "40P01"


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
    iban_info: IbanInfo | None = None  # ``iban`` already normalised (``iban_normalise``) by the caller


@dataclass(frozen=True)
class _Identity:
    name: str
    language: str
    keys: tuple[tuple[str, str], ...]  # (kind, value), sorted: the insert order that avoids deadlocks
    iban: IbanInfo | None

    @property
    def iban_fingerprint(self) -> str:
        """The IBAN's fingerprint as computed for ``keys`` ("" without an IBAN): not again."""
        return next((value for kind, value in self.keys if kind == IdentifierKind.IBAN), "")


class _Retry(Exception):
    """Another transaction changed the people we locked (merged or erased them); look again."""


_LANGUAGES = frozenset(Language.values)  # once: ``.values`` builds a new list on every access


def _identity_normalise(identity: IdentityInput) -> _Identity:
    keys: list[tuple[str, str]] = []
    if identity.email.strip():
        keys.append((IdentifierKind.EMAIL, email_normalise(identity.email)))
    if identity.whatsapp.strip():
        keys.append((IdentifierKind.WHATSAPP, phone_normalise(identity.whatsapp, region=identity.phone_region)))
    if identity.social_provider.strip() or identity.social_uid.strip():
        keys.append((IdentifierKind.SOCIAL, social_normalise(identity.social_provider, identity.social_uid)))
    iban = identity.iban_info or (iban_normalise(identity.iban) if identity.iban.strip() else None)
    if iban is not None:
        keys.append((IdentifierKind.IBAN, crypto.iban_fingerprint(iban.normalised)))
    if not keys:
        raise InvalidInput(
            "Give at least one of: email, WhatsApp number, IBAN or social account.", code="no_identifier"
        )
    language = identity.language.strip().lower()
    if language and language not in _LANGUAGES:
        raise InvalidInput(f"'{identity.language}' is not a supported language.", code="invalid_language")
    return _Identity(name=identity.name.strip()[:200], language=language, keys=tuple(sorted(keys)), iban=iban)


def _constraint_name(exc: IntegrityError) -> str:
    """PostgreSQL names the violated constraint in the diagnostics; SQLite names only the columns,
    and every unique constraint on our tables is one of the race deciders."""
    name = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None)
    if name:
        return name
    return _SQLITE_UNIQUE if str(exc).startswith("UNIQUE constraint failed: recipients_") else ""


def _run_with_retries(attempt_once):
    """Run ``attempt_once`` in a savepoint until it is not beaten by a concurrent writer."""
    for _ in range(_MAX_ATTEMPTS):
        try:
            with transaction.atomic():
                return attempt_once()
        except _Retry:
            continue
        except IntegrityError as exc:
            if _constraint_name(exc) not in _RACE_CONSTRAINTS:
                raise
            continue
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != _DEADLOCK_SQLSTATE:
                raise
            continue
    raise Conflict("Could not settle who this person is under heavy contention; try again.", code="person_contended")


def _lock_roots(root_ids: set[int]) -> list[Person]:
    roots = list(Person.objects.select_for_update().filter(id__in=root_ids).order_by("id"))
    # A root merged or erased between our read and our lock is stale: start over.
    if len(roots) != len(root_ids) or any(r.merged_into_id or r.erased_at for r in roots):
        raise _Retry
    return roots


def _cluster_ids(root: Person) -> list[int]:
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


def _bank_account_make_current(*, person: Person, iban: IbanInfo, source: str, actor=None) -> BankAccount:
    """Make ``iban`` the person's current account, reusing the row if they gave it before. Caller
    holds the person's row lock."""
    fingerprint = crypto.iban_fingerprint(iban.normalised)
    rows = list(BankAccount.objects.filter(Q(person=person) & (Q(iban_fingerprint=fingerprint) | Q(is_current=True))))
    existing = next((r for r in rows if r.iban_fingerprint == fingerprint), None)
    current = next((r for r in rows if r.is_current), None)
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
            person=person,
            iban_ciphertext=crypto.encrypt(iban.normalised),
            iban_fingerprint=fingerprint,
            masked=iban.masked,
            country=iban.country,
            bic=iban.bic,
            bank_name=iban.bank_name,
            is_current=True,
            source=source,
        )
    PersonEvent.objects.create(
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
    return account


def _nothing_to_write(root: Person, identity: _Identity) -> bool:
    if root.merged_into_id or root.erased_at:
        return False
    if (identity.name and not root.display_name) or (identity.language and not root.preferred_language):
        return False
    return identity.iban is None or BankAccount.objects.filter(person=root, is_current=True).exists()


def _resolve_once(
    identity: _Identity, *, source: str, anchor: Person | None, iban_always_current: bool, actor=None
) -> tuple[Person, BankAccount | None]:
    key_filter = Q()
    for kind, value in identity.keys:
        key_filter |= Q(kind=kind, value=value)
    hits = list(
        Identifier.objects.filter(key_filter, is_active=True).values_list(
            "kind", "value", "person_id", "person__merged_into_id"
        )
    )
    root_ids = {merged_into or person_id for _, _, person_id, merged_into in hits}
    known = {(kind, value) for kind, value, _, _ in hits}
    if anchor is None and len(root_ids) == 1 and known.issuperset(identity.keys):
        # The common case (a returning person, nothing new): answer without locking, so bulk
        # callers resolving many known people in one transaction do not queue on person rows.
        (root_id,) = root_ids
        root = Person.objects.get(pk=root_id)
        if _nothing_to_write(root, identity):
            return root, None
    if anchor is not None:
        anchor_row = Person.objects.filter(pk=anchor.pk).values("merged_into_id", "erased_at").get()
        anchor_root = anchor_row["merged_into_id"] or anchor.pk
        if anchor_row["erased_at"] or Person.objects.filter(pk=anchor_root, erased_at__isnull=False).exists():
            raise InvalidTransition("This person has been erased.", code="person_erased")
        root_ids.add(anchor_root)

    if root_ids:
        roots = _lock_roots(root_ids)
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
            display_name=identity.name, preferred_language=identity.language, created_source=source
        )

    Identifier.objects.bulk_create(
        [Identifier(person=survivor, kind=k, value=v, source=source) for k, v in identity.keys if (k, v) not in known]
    )

    account = None
    if identity.iban is not None:
        # An active IBAN identifier exists exactly when the cluster already has an account for it.
        new_to_cluster = (IdentifierKind.IBAN, crypto.iban_fingerprint(identity.iban.normalised)) not in known
        has_current = BankAccount.objects.filter(person=survivor, is_current=True).exists()
        # A new IBAN is the freshest thing the person told us, so it becomes current; one they
        # gave before (maybe stale partner data) does not silently switch the account back.
        if iban_always_current or new_to_cluster or not has_current:
            account = _bank_account_make_current(person=survivor, iban=identity.iban, source=source, actor=actor)
    return survivor, account


def person_resolve(*, identity: IdentityInput, source: str) -> Person:
    """Find or create the person these identifiers belong to and attach every given identifier.

    Returns the root person. If the identifiers belong to two or more people, they are merged into
    the oldest (``merged_into`` set on the others, a ``merged`` event on each; nothing deleted).
    The name and language are filled in only when the person has none. A new IBAN becomes the
    current bank account; one the person gave before does not switch the current one back.

    Raises InvalidInput (``invalid_email``, ``invalid_phone``, ``invalid_iban``, ``invalid_social``,
    ``invalid_language``, ``no_identifier``) before writing anything; Conflict
    (``person_contended``) if it kept losing races (practically never).

    Idempotent. Joins the caller's transaction; each attempt runs in its own savepoint and is
    retried when a concurrent writer wins a unique constraint."""
    normalised = _identity_normalise(identity)
    person, _ = _run_with_retries(
        lambda: _resolve_once(normalised, source=source, anchor=None, iban_always_current=False)
    )
    return person


def person_set_iban(*, person: Person, iban: str, source: str, actor=None) -> BankAccount:
    """Make ``iban`` the current bank account of ``person``'s root; the previous one stays, not
    current. If another person already owns the IBAN, both are the same human and are merged
    first (the account then belongs to the survivor). Giving the current IBAN again is a no-op.

    Raises InvalidInput(``invalid_iban``) before writing anything; InvalidTransition
    (``person_erased``) for an erased person. Joins the caller's transaction (savepoint)."""
    info = iban_normalise(iban)
    identity = _Identity(
        name="", language="", keys=((IdentifierKind.IBAN, crypto.iban_fingerprint(info.normalised)),), iban=info
    )
    _, account = _run_with_retries(
        lambda: _resolve_once(identity, source=source, anchor=person, iban_always_current=True, actor=actor)
    )
    return account


def consent_record(*, person: Person, terms_version: str, channel: str, ip: str = "") -> Consent:
    """Record that the person accepted ``terms_version`` through ``channel`` (claim page,
    WhatsApp, API …), on the root person. Every acceptance is a new row.

    Raises InvalidInput (``invalid_consent``, ``invalid_ip``); InvalidTransition (``person_erased``)."""
    terms_version, channel, ip = terms_version.strip(), channel.strip(), (ip or "").strip()
    if not terms_version or not channel:
        raise InvalidInput("Consent needs the terms version and the channel.", code="invalid_consent")
    if ip:
        try:
            ip = str(ipaddress.ip_address(ip))
        except ValueError:
            raise InvalidInput(f"'{ip}' is not an IP address.", code="invalid_ip")
    root = Person.objects.filter(pk=person.pk).select_related("merged_into").get()
    root = root.merged_into or root
    if root.erased_at:
        raise InvalidTransition("This person has been erased.", code="person_erased")
    return Consent.objects.create(person=root, terms_version=terms_version, channel=channel, ip=ip or None)


def person_erase(*, person: Person, actor=None, source: str = "admin") -> Person:
    """Pseudonymise the human behind ``person`` (the root and everyone merged into it).

    Wiped: names, language, clear identifier values (emails, numbers, social ids), IBAN
    ciphertexts, consent IPs; masked IBANs are reduced to the country. Kept: every row (ledger
    accounts, rewards and payouts point at people and bank accounts) and the keyed IBAN
    fingerprints, so per-IBAN caps and fraud signals still count this money; fingerprints cannot be
    reversed without the fingerprint key. All identifiers become inactive: the person can no
    longer be found, and coming back with the same identifiers creates a new person.

    Returns the erased root. Idempotent. One ``erased`` event with the actor, in the same
    transaction. Joins the caller's transaction (savepoint)."""

    def erase_once() -> Person:
        row = Person.objects.filter(pk=person.pk).values("merged_into_id").get()
        (root,) = _lock_roots_allow_erased(row["merged_into_id"] or person.pk)
        if root.erased_at:
            return root
        now = timezone.now()
        cluster = _cluster_ids(root)
        Person.objects.filter(id__in=cluster).update(display_name="", preferred_language="", erased_at=now)
        identifiers = Identifier.objects.filter(person_id__in=cluster, is_active=True)
        wiped = identifiers.exclude(kind=IdentifierKind.IBAN).update(value="", is_active=False)
        kept = identifiers.filter(kind=IdentifierKind.IBAN).update(is_active=False)
        accounts = BankAccount.objects.filter(person_id__in=cluster).update(
            iban_ciphertext="", masked=Concat(F("country"), Value(" (erased)"))
        )
        Consent.objects.filter(person_id__in=cluster).update(ip=None)
        PersonEvent.objects.create(
            person=root,
            kind=PersonEventKind.ERASED,
            actor=actor,
            source=source,
            detail={
                "people": cluster,
                "identifiers_wiped": wiped,
                "iban_fingerprints_kept": kept,
                "bank_accounts": accounts,
            },
        )
        root.refresh_from_db()
        return root

    return _run_with_retries(erase_once)


def _lock_roots_allow_erased(root_id: int) -> list[Person]:
    roots = list(Person.objects.select_for_update().filter(id=root_id))
    if not roots or roots[0].merged_into_id:
        raise _Retry
    return roots
