"""Consent, access and erasure: what a person agreed to, everything we hold about them, and
wiping it.

Erasure reaches every table a person's data lands in, not only this app's: the trigger events
(identifiers, IP, device, evidence), payouts (creditor name, VoP suggestion, masked IBAN) and the
pain.001 files that carry them, raw inbound webhook bodies, finished django-q task records and
the free-form columns of audit rows. Those tables belong to apps that import recipients, so they
are reached through the app registry (``apps.get_model``), never imported.

Audit rows are append-only and hash-chained in PostgreSQL (``core.audit_sql``): their one
allowed UPDATE removes personal keys from ``data`` and blanks a ``reason`` that names the
person, forgets the row's salt and sets ``erased_at``; the chain still verifies because a row's
hash covers a salted digest of those columns, not the columns themselves.
"""

import ipaddress
import json
from datetime import timedelta

from django.apps import apps
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.models import F, Q, Value
from django.db.models.functions import Concat
from django.utils import timezone

from core.exceptions import Conflict, InvalidInput, InvalidTransition, TemporaryFailure
from core.payment_files import ERASED, payout_files_pseudonymise, payouts_lock
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
from recipients.models_claims import AccountChangeStatus
from recipients.normalise import IBAN
from recipients.selectors import person_cluster_ids
from recipients.services.roots import Retry, person_root_lock, run_with_retries
from reconciliation.services.pseudonymise import statement_lines_pseudonymise, statement_lines_tied

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

    Reaches the same tables as erasure (through the app registry): trigger events, rewards,
    payouts, notices (and their deliveries), WhatsApp codes and video submissions. Records one ``exported``
    event with the actor on the root, in the caller's transaction (savepoint), so every export
    is in the audit trail. Video access tokens are never exported. Raises Person.DoesNotExist."""
    root = Person.objects.select_related("merged_into").get(pk=person.pk)
    root = root.merged_into or root
    cluster = person_cluster_ids(person=root)
    TriggerEvent = apps.get_model("campaigns", "TriggerEvent")
    Reward = apps.get_model("campaigns", "Reward")
    VideoSubmission = apps.get_model("campaigns", "VideoSubmission")
    Payout = apps.get_model("payouts", "Payout")
    WhatsAppOptInCode = apps.get_model("recipients", "WhatsAppOptInCode")
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
        "trigger_events": _rows(
            TriggerEvent.objects.filter(person_id__in=cluster),
            "id",
            "campaign_id",
            "campaign__name",
            "type",
            "custom_name",
            "external_id",
            "occurred_at",
            "received_at",
            "source",
            "email",
            "whatsapp",
            "social_provider",
            "social_uid",
            "iban_country",
            "ip",
            "device_fingerprint",
            "evidence",
            "purchase_amount_minor",
            "purchase_currency",
            "order_id",
            "code",
            "view_count",
            "outcome",
            "reason",
        ),
        "rewards": _rows(
            Reward.objects.filter(person_id__in=cluster),
            "id",
            "event_id",
            "campaign_id",
            "campaign__name",
            "amount_minor",
            "currency",
            "status",
            "occurred_at",
            "matures_at",
            "decided_at",
            "decision_reason",
            "created_at",
            "updated_at",
        ),
        "payouts": _rows(
            Payout.objects.filter(person_id__in=cluster),
            "id",
            "amount_minor",
            "currency",
            "status",
            "rail",
            "end_to_end_id",
            "creditor_name",
            "creditor_iban_masked",
            "creditor_country",
            "vop_result",
            "vop_suggested_name",
            "reason_code",
            "reason_text",
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
        "video_submissions": _rows(
            VideoSubmission.objects.filter(person_id__in=cluster),
            "id",
            "campaign_id",
            "social_uid",
            "video_id",
            "status",
            "reason",
            "view_count",
            "checked_at",
            "created_at",
        ),
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

    Lock order: the root person row, then the statement lines tied to their payouts, then the
    person's payout batches and payouts in the payout
    engine's order (``core.payment_files.payouts_lock``: batches before payouts, as pain.002
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
    Payout = apps.get_model("payouts", "Payout")
    names = Payout.objects.filter(person_id__in=cluster).values_list("creditor_name", "vop_suggested_name")
    for name, suggested in names:
        values["name"] |= {n for n in (name, suggested) if n and n != ERASED}
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


def _mentions(value, needles: list[str]) -> bool:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return any(n.lower() in text.lower() for n in needles)


def _erase_beyond_recipients(*, brand_id, cluster: list[int], values: dict[str, set[str]], now) -> dict[str, int]:
    needles = _needles(values)
    # Lines before payouts: the lock order (``core.locks``).
    lines, tied = _statement_lines_erase(cluster=cluster, values=values, needles=needles)
    counts = {
        "trigger_events": _trigger_events_erase(brand_id=brand_id, cluster=cluster, values=values),
        "payouts": _payouts_erase(cluster=cluster, now=now, lines_done=tied),
        "statement_lines": lines,
        "inbound_webhooks": _raw_rows_erase("core_inboundwebhook", "body", needles, {"body": b"", "headers": "{}"}),
        "task_records": _task_records_erase(needles),
        "audit_rows": _audit_rows_erase(cluster=cluster, needles=needles),
    }
    return counts


def _trigger_events_erase(*, brand_id, cluster: list[int], values: dict[str, set[str]]) -> int:
    TriggerEvent = apps.get_model("campaigns", "TriggerEvent")
    theirs = Q(person_id__in=cluster)
    uids = {v.split(":", 1)[1] for v in values["social"] if ":" in v}
    if brand_id is not None and (values["email"] or values["whatsapp"] or uids):
        # Rejected events may name no person but still carry their identifiers.
        theirs |= Q(brand_id=brand_id) & (
            Q(email__in=values["email"]) | Q(whatsapp__in=values["whatsapp"]) | Q(social_uid__in=uids)
        )
    return TriggerEvent.objects.filter(theirs).update(
        email="", whatsapp="", social_uid="", ip=None, device_fingerprint="", evidence={}
    )


def _payout_lines(payouts) -> dict:
    rows = list(payouts.values_list("pk", "end_to_end_id", "batch_id", "bank_debit_line_id", "bank_return_line_id"))
    batches: dict[int, set[str]] = {}
    for _, end_to_end_id, batch_id, _, _ in rows:
        if batch_id is not None:
            batches.setdefault(batch_id, set()).add(end_to_end_id)
    return {
        "payout_ids": [r[0] for r in rows],
        "line_ids": {line for r in rows for line in r[3:] if line is not None},
        "batch_end_to_end_ids": batches,
        "end_to_end_ids": {r[1] for r in rows},
    }


def _statement_lines_erase(*, cluster: list[int], values: dict[str, set[str]], needles: list[str]):
    """Their payee data out of the statement lines tied to their payouts, and of lines carrying
    their IBAN (``reconciliation.services.pseudonymise``); dedupe keys, amounts, dates, bank
    references and matches stay. Returns how many lines changed and the lines tied."""
    Payout = apps.get_model("payouts", "Payout")
    tied = _payout_lines(Payout.objects.filter(person_id__in=cluster))
    return statement_lines_pseudonymise(**tied, ibans=values["iban"], needles=needles)


def _payouts_erase(*, cluster: list[int], now, lines_done: set[int]) -> int:
    """Names out of payouts, and name and IBAN out of their transactions in stored pain.001
    files (``core.payment_files``: a file not downloaded yet stays whole until its download). A
    payout keeps its amount, status, ledger entries and the masked IBAN's country;
    ``PRIVACY_PAYOUT_NAME_KEEP_DAYS`` keeps the creditor name, and the file's copy of it, of
    payouts younger than that where bookkeeping law requires it (purged when older)."""
    Payout = apps.get_model("payouts", "Payout")
    payouts = Payout.objects.filter(pk__in=payouts_lock(payouts=Payout.objects.filter(person_id__in=cluster)))
    tied = _payout_lines(payouts)
    if (
        statement_lines_tied(
            payout_ids=tied["payout_ids"], line_ids=tied["line_ids"], batch_ids=tied["batch_end_to_end_ids"]
        )
        - lines_done
    ):
        raise Retry  # a line was matched to them after their lines were done: do them again
    keep_days = getattr(settings, "PRIVACY_PAYOUT_NAME_KEEP_DAYS", 0)
    erasable = payouts.filter(created_at__lt=now - timedelta(days=keep_days)) if keep_days else payouts
    erased = erasable.update(
        creditor_name=ERASED, vop_suggested_name="", creditor_iban_masked=Concat(F("creditor_country"), Value(" ***"))
    )
    payout_files_pseudonymise(payouts=erasable)
    return erased


def _task_records_erase(needles: list[str]) -> int:
    """Finished task records (django-q keeps the last ``save_limit``, 250 by default) whose
    arguments or result name the person: deleted. Their columns are pickles, so read in Python."""
    if not needles:
        return 0
    Task = apps.get_model("django_q", "Task")
    naming = [
        task.pk
        for task in Task.objects.only("args", "kwargs", "result").iterator()
        if _mentions(repr((task.args, task.kwargs, task.result)), needles)
    ]
    return Task.objects.filter(pk__in=naming).delete()[0]


def _raw_rows_erase(table: str, column: str, needles: list[str], blank: dict) -> int:
    """Rows of ``table`` whose raw bytes contain a needle, blanked: inbound webhook bodies, which
    no ORM lookup can search."""
    if not needles:
        return 0
    quoted = connection.ops.quote_name(table)
    columns = [column]
    if connection.vendor == "postgresql":
        match = " OR ".join(f"position(convert_to(%s, 'UTF8') in coalesce({c}, ''::bytea)) > 0" for c in columns)
    else:
        match = " OR ".join(f"instr(CAST({c} AS BLOB), CAST(%s AS BLOB)) > 0" for c in columns)
    where = " OR ".join(f"({match})" for _ in needles)
    params = [n for n in needles for _ in columns]
    sets = ", ".join(f"{connection.ops.quote_name(k)} = %s" for k in blank)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {quoted} SET {sets} WHERE {where}", [*blank.values(), *params])
        return cursor.rowcount


def _audit_rows_erase(*, cluster: list[int], needles: list[str]) -> int:
    """The one UPDATE the audit tables allow (``core.audit_sql``): personal keys out of ``data``
    and a ``reason`` naming the person blanked; everything else stays and the chain verifies."""
    streams = [
        ("campaigns_rewardevent", "reward_id", "reason", "data", _ids("campaigns", "Reward", cluster)),
        ("payouts_payoutevent", "payout_id", None, "data", _ids("payouts", "Payout", cluster)),
        ("recipients_personevent", "person_id", None, "detail", cluster),
    ]
    erased = 0
    with connection.cursor() as cursor:
        for table, stream, reason_col, data_col, ids in streams:
            if not ids:
                continue
            placeholders = ", ".join("%s" for _ in ids)
            cursor.execute(
                f"SELECT id, {reason_col or repr('')}, {data_col} FROM {table} WHERE {stream} IN ({placeholders})",
                list(ids),
            )
            for row_id, reason, raw in cursor.fetchall():
                data = (json.loads(raw) if isinstance(raw, str) else raw) or {}
                kept = {k: v for k, v in data.items() if k not in PERSONAL_DATA_KEYS and not _mentions(v, needles)}
                new_reason = "" if reason and _mentions(reason, needles) else reason
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


def _ids(app: str, model: str, cluster: list[int]) -> list[int]:
    return list(apps.get_model(app, model).objects.filter(person_id__in=cluster).values_list("id", flat=True))
