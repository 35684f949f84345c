"""Consent, access and erasure: what a person agreed to, everything we hold about them, and
wiping it.

Erasure reaches every table a person's data lands in, not only this app's: the trigger events
(identifiers, IP, device, evidence), payouts (creditor name, VoP suggestion, masked IBAN) and the
pain.001 files and statement lines that carry them, raw inbound webhook bodies, finished django-q
task records and the free-form columns of audit rows. Those tables belong to apps that import
recipients, so each app declares its own to the personal-data registry (``core.personal_data``)
and its audit tables to the audit registry (``core.audit_sql``); erasure and export iterate them.

Audit rows are append-only and hash-chained in PostgreSQL (``core.audit_sql``): their one
allowed UPDATE removes personal keys from ``data`` and blanks a ``reason`` that names the
person, forgets the row's salt and sets ``erased_at``; the chain still verifies because a row's
hash covers a salted digest of those columns, not the columns themselves.
"""

import ipaddress
import json

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from core.audit_sql import audited_tables
from core.exceptions import Conflict, InvalidInput, InvalidTransition, TemporaryFailure
from core.personal_data import EraseAgain, Erasure, mentions, personal_data
from recipients.models import (
    AccountChange,
    BankAccount,
    Consent,
    Identifier,
    IdentifierKind,
    Notice,
    NoticeDelivery,
    Person,
    PersonEvent,
    PersonEventKind,
)
from recipients.models_claims import AccountChangeStatus, WhatsAppOptInCode
from recipients.normalise import IBAN
from recipients.selectors import person_cluster_ids
from recipients.services.roots import Retry, person_root_lock, run_with_retries

# A local account's fields shared by strangers — a kind, a branch's sort code or routing number,
# a city or post code: searching other rows for them would erase strangers' data. They go with
# the account row itself.
ACCOUNT_DETAILS_NOT_SEARCHED = frozenset(
    {
        "legalType",
        "accountType",
        "sortCode",
        "abartn",
        "address.country",
        "address.state",
        "address.city",
        "address.postCode",
    }
)
# Shorter account values (a 5-digit number) occur in unrelated ids and amounts.
_ACCOUNT_NEEDLE_MIN = 8
# Audit ``data`` keys that hold what a person or their bank said about them (a VoP suggestion,
# the holder name a confirmed one replaced).
PERSONAL_DATA_KEYS = ("suggested", "name", "name_was", "email", "whatsapp", "iban", "ip", "open_id")


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


def person_export(*, person: Person, actor=None, source: str = "admin") -> dict:
    """Everything held about the human behind ``person`` (the root and everyone merged into it),
    as JSON-serialisable data: an access request's answer. Clear identifier values and — only
    here — the clear IBANs are included; amounts are integer minor units with their currency.

    Reaches the same tables as erasure (the personal-data registry: trigger events, rewards,
    video submissions, payouts), notices (and their deliveries) and WhatsApp codes. Records one ``exported``
    event with the actor on the root, in the caller's transaction (savepoint), so every export
    is in the audit trail. Video access tokens are never exported. Raises Person.DoesNotExist."""
    root = Person.objects.select_related("merged_into").get(pk=person.pk)
    root = root.merged_into or root
    cluster = person_cluster_ids(person=root)
    people = Person.objects.filter(id__in=cluster).order_by("id")
    export = {
        "person_id": root.pk,
        "brand_id": root.brand_id,
        "exported_at": timezone.now(),
        "people": _rows(
            people,
            "id",
            "display_name",
            "preferred_language",
            "created_source",
            "created_at",
            "merged_into_id",
            "merged_at",
            "erased_at",
        ),
        "identifiers": _rows(
            Identifier.objects.filter(person_id__in=cluster).exclude(kind=IdentifierKind.IBAN),
            "id",
            "person_id",
            "kind",
            "value",
            "is_active",
            "source",
            "created_at",
        ),
        "bank_accounts": [
            {
                "id": account.pk,
                "person_id": account.person_id,
                "kind": account.kind,
                "currency": account.currency,
                "iban": account.iban(),
                "details": account.details(),
                "masked": account.masked,
                "country": account.country,
                "bic": account.bic,
                "bank_name": account.bank_name,
                "is_current": account.is_current,
                "holder_name": account.holder_name,
                "source": account.source,
                "created_at": account.created_at,
                "payee_check_result": account.payee_check_result,
                "payee_check_name": account.payee_check_name,
                "payee_checked_at": account.payee_checked_at,
            }
            for account in BankAccount.objects.filter(person_id__in=cluster).order_by("id")
        ],
        "consents": _rows(
            Consent.objects.filter(person_id__in=cluster),
            "id",
            "person_id",
            "terms_version",
            "channel",
            "ip",
            "created_at",
        ),
        "person_events": _rows(
            PersonEvent.objects.filter(person_id__in=cluster),
            "id",
            "person_id",
            "kind",
            "source",
            "detail",
            "created_at",
        ),
        "notices": _rows(
            Notice.objects.filter(person_id__in=cluster),
            "id",
            "kind",
            "reward_id",
            "payout_id",
            "status",
            "created_at",
            "done_at",
        ),
        "notice_deliveries": _rows(
            NoticeDelivery.objects.filter(notice__person_id__in=cluster),
            "id",
            "notice_id",
            "channel",
            "status",
            "attempts",
            "sent_at",
            "error_code",
        ),
        "whatsapp_codes": _rows(
            WhatsAppOptInCode.objects.filter(person_id__in=cluster),
            "id",
            "code",
            "campaign_id",
            "created_at",
            "expires_at",
            "used_at",
        ),
        **{
            entry.kind: _rows(entry.model.objects.filter(person_id__in=cluster), *entry.export)
            for entry in personal_data()
            if entry.export
        },
    }
    sections = {k: len(v) for k, v in export.items() if isinstance(v, list)}
    PersonEvent.objects.create(
        person=root, kind=PersonEventKind.EXPORTED, actor=actor, source=source, detail={"sections": sections}
    )
    return json.loads(json.dumps(export, cls=DjangoJSONEncoder))


def _rows(queryset, *fields: str) -> list[dict]:
    return list(queryset.order_by("id").values(*fields))


def person_erase(*, person: Person, actor=None, source: str = "admin") -> Person:
    """Pseudonymise the human behind ``person`` (the root and everyone merged into it).

    Wiped: names, language, clear identifier values (emails, numbers, social ids), bank account
    ciphertexts (IBANs and local accounts with their holder's address), consent IPs; masked
    accounts are reduced to the country. Beyond this app: the
    person's trigger events (and those of the brand carrying their identifiers), payouts'
    creditor names (unless ``PRIVACY_PAYOUT_NAME_KEEP_DAYS`` keeps recent ones for the
    bookkeeping: the retention purge blanks them later), the person's name and IBAN in their
    transactions of downloaded pain.001 files (of a file not downloaded yet: at its download),
    the counterparty name, IBAN and their values in remittance text of the bank statement lines
    matched to their payouts (``reconciliation.services.pseudonymise``: dedupe keys, amounts and
    bank references stay, so a re-imported statement still finds those bookings known),
    inbound webhook bodies and finished task records naming them, and personal free-form content
    of audit rows (see the module docstring). Kept: every row (ledger
    accounts, rewards and payouts point at people and bank accounts) and the keyed IBAN
    fingerprints, so per-IBAN caps and fraud signals still count this money; fingerprints cannot be
    reversed without the fingerprint key. All identifiers become inactive: the person can no
    longer be found, and coming back with the same identifiers creates a new person.

    Beyond this app, each table is erased as its app declared it (``core.personal_data``).

    Lock order: the root person row, then the statement lines tied to their payouts, then the
    person's payout batches and payouts in the payout
    engine's order (``payouts.payment_files.payouts_lock``: batches before payouts, as pain.002
    takes them). A deadlock or serialization failure against some other writer rolls the attempt
    back (its savepoint) and runs it again; nothing is ever half erased.

    Returns the erased root. Idempotent. One ``erased`` event with the actor, in the same
    transaction. Joins the caller's transaction (savepoint). Raises TemporaryFailure
    (``erasure_contended``, nothing erased: try again) when every attempt lost to another writer."""

    def erase_once() -> Person:
        root = person_root_lock(person=person)
        if root.erased_at:
            return root
        now = timezone.now()
        cluster = person_cluster_ids(person=root)
        values = _personal_values(cluster)
        elsewhere = _erase_beyond_recipients(brand_id=root.brand_id, cluster=cluster, values=values, now=now)
        Person.objects.filter(id__in=cluster).update(display_name="", preferred_language="", erased_at=now)
        identifiers = Identifier.objects.filter(person_id__in=cluster, is_active=True)
        wiped = identifiers.exclude(kind=IdentifierKind.IBAN).update(value="", is_active=False)
        kept = identifiers.filter(kind=IdentifierKind.IBAN).update(is_active=False)
        accounts = BankAccount.objects.filter(person_id__in=cluster).update(
            ciphertext="", masked=Concat(F("country"), Value(" (erased)")), holder_name="", payee_check_name=""
        )
        Consent.objects.filter(person_id__in=cluster).update(ip=None)
        # An account change still waiting for its code dies with the details it held.
        AccountChange.objects.filter(person_id__in=cluster, status=AccountChangeStatus.PENDING).update(
            status=AccountChangeStatus.LOCKED, decided_at=now
        )
        AccountChange.objects.filter(person_id__in=cluster).update(details_ciphertext="")
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
                **elsewhere,
            },
        )
        root.refresh_from_db()
        return root

    try:
        return run_with_retries(erase_once)
    except Conflict as exc:
        if exc.code != "person_contended":
            raise
        raise TemporaryFailure(
            "The erasure kept colliding with other writers and was rolled back: nothing was erased. Try again.",
            code="erasure_contended",
        ) from exc


def _personal_values(cluster: list[int]) -> dict[str, set[str]]:
    """Every clear value we hold about the people in ``cluster``, by kind, read before wiping."""
    values: dict[str, set[str]] = {
        "email": set(),
        "whatsapp": set(),
        "social": set(),
        "name": set(),
        "iban": set(),
        "account": set(),  # a local account's number and its holder's address
    }
    for kind, value in (
        Identifier.objects.filter(person_id__in=cluster).exclude(kind=IdentifierKind.IBAN).values_list("kind", "value")
    ):
        if value:
            values[kind].add(value)
    values["name"] |= {n for n in Person.objects.filter(id__in=cluster).values_list("display_name", flat=True) if n}
    for held in BankAccount.objects.filter(person_id__in=cluster).values_list("holder_name", "payee_check_name"):
        values["name"] |= {n for n in held if n}
    for account in BankAccount.objects.filter(person_id__in=cluster).exclude(ciphertext=""):
        if account.kind == IBAN:
            values["iban"].add(account.iban())
        else:
            values["account"] |= {
                v
                for k, v in account.details().items()
                if k not in ACCOUNT_DETAILS_NOT_SEARCHED and len(v) >= _ACCOUNT_NEEDLE_MIN
            }
    for entry in personal_data():
        for field in entry.names:
            erased = entry.blank.get(field)
            rows = entry.model.objects.filter(person_id__in=cluster).values_list(field, flat=True)
            values["name"] |= {n for n in rows if n and n != erased}
    return values


def _needles(values: dict[str, set[str]]) -> list[str]:
    """The strings whose presence in a raw body or a free-form column means "this is about them":
    a number also without its +, a social id without its ``provider:`` prefix."""
    found = set()
    for kind, items in values.items():
        for item in items:
            found.add(item)
            if kind == "whatsapp":
                found.add(item.lstrip("+"))
            if kind == "social" and ":" in item:
                found.add(item.split(":", 1)[1])
    return sorted(n for n in found if len(n) >= 4)


def _erase_beyond_recipients(*, brand_id, cluster: list[int], values: dict[str, set[str]], now) -> dict[str, int]:
    """Every other app's tables (the personal-data registry, in its order), then the audit rows."""
    erasure = Erasure(brand_id=brand_id, cluster=cluster, values=values, needles=_needles(values), now=now)
    counts: dict[str, int] = {}
    for entry in personal_data():
        if entry.erase is not None:
            try:
                counts |= entry.erase(erasure)
            except EraseAgain:
                raise Retry
    counts["audit_rows"] = _audit_rows_erase(cluster=cluster, needles=erasure.needles)
    return counts


def _audit_rows_erase(*, cluster: list[int], needles: list[str]) -> int:
    """The one UPDATE the audit tables allow (``core.audit_sql``): personal keys out of ``data``
    and a ``reason`` naming the person blanked; everything else stays and the chain verifies.
    Each audit table that is about people says which of its streams are theirs."""
    erased = 0
    with connection.cursor() as cursor:
        for spec in audited_tables():
            if spec.person_streams is None:
                continue
            ids = spec.person_streams(cluster)
            if not ids:
                continue
            table, stream, reason_col, data_col = spec.table, spec.stream, spec.reason, spec.data
            placeholders = ", ".join("%s" for _ in ids)
            cursor.execute(
                f"SELECT id, {reason_col or repr('')}, {data_col} FROM {table} WHERE {stream} IN ({placeholders})",
                list(ids),
            )
            for row_id, reason, raw in cursor.fetchall():
                data = (json.loads(raw) if isinstance(raw, str) else raw) or {}
                kept = {k: v for k, v in data.items() if k not in PERSONAL_DATA_KEYS and not mentions(v, needles)}
                new_reason = "" if reason and mentions(reason, needles) else reason
                if kept == data and new_reason == reason:
                    continue
                sets = [f"{data_col} = %s"] + ([f"{reason_col} = %s"] if reason_col else [])
                params = [json.dumps(kept)] + ([new_reason] if reason_col else [])
                if connection.vendor == "postgresql":
                    sets += ["personal_salt = NULL", "erased_at = now()"]
                    sets[0] = f"{data_col} = %s::jsonb"
                cursor.execute(f"UPDATE {table} SET {', '.join(sets)} WHERE id = %s", [*params, row_id])
                erased += 1
    return erased
