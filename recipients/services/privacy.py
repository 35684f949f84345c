"""Consent and erasure: what a person agreed to, and wiping what we hold about them."""

import ipaddress

from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from core.exceptions import InvalidInput, InvalidTransition
from recipients.models import BankAccount, Consent, Identifier, IdentifierKind, Person, PersonEvent, PersonEventKind
from recipients.services.identity import Retry, cluster_ids, run_with_retries


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
        cluster = cluster_ids(root)
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

    return run_with_retries(erase_once)


def _lock_roots_allow_erased(root_id: int) -> list[Person]:
    roots = list(Person.objects.select_for_update().filter(id=root_id))
    if not roots or roots[0].merged_into_id:
        raise Retry
    return roots
