"""Marketing consent (``recipients.models_consent``): giving it, withdrawing it, the withdrawal link
every message carries, and the audit row of every export of contacts.

Every write takes the person's root lock first (``person_root_lock``), so a consent and an erasure
or a merge of the same person never interleave, and joins the caller's transaction: a consent
given on a claim page commits with the claim, or not at all. Each change writes its
``ConsentEvent`` in the same transaction; the webhooks to the brand are collected from those rows
(``campaigns.webhooks``), after commit.

The withdrawal link is signed (``django.core.signing``), names one consent and nothing else, and
expires after ``CONSENT_WITHDRAW_LINK_DAYS``. It can only withdraw: its page shows no personal
data, and a second use finds the consent withdrawn already and changes nothing.
"""

import hashlib
import ipaddress
from datetime import datetime

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from core.exceptions import InvalidInput, InvalidTransition, NotFound
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from recipients import crypto
from recipients.models import Identifier, IdentifierKind, Person
from recipients.models_consent import (
    ConsentChannel,
    ConsentEvent,
    ConsentEventKind,
    MarketingConsent,
    WithdrawalChannel,
)
from recipients.selectors import person_cluster_ids
from recipients.services.roots import person_root_lock

WITHDRAW_SALT = "consent.withdraw"
USER_AGENT_MAX = 300
LANGUAGES = ("en", "it")
# Filters whose value is free text a person may be named in.
SEARCH_FILTERS = frozenset({"search", "q"})


def consent_give(
    *,
    person: Person,
    brand,
    text: str,
    version: str,
    language: str,
    channel: str,
    ip: str = "",
    user_agent: str = "",
    claim_link_id: int | None = None,
    now: datetime | None = None,
) -> MarketingConsent:
    """Record that the human behind ``person`` said yes to ``brand``'s marketing, to exactly
    ``text`` (shown in ``language``; ``version`` its SHA-256), through ``channel``. The proof kept
    is a keyed fingerprint of ``ip`` (never the address), the ``user_agent`` and the claim link it
    was given behind.

    Idempotent: an active consent of theirs to the same version is returned as it is. One to an
    older text is closed (``superseded``) and a new one opened, so at most one is active per
    person and brand (the database's partial unique index is the backstop). Writes a
    ``consent.given`` event. Joins the caller's transaction (the root lock is held until it
    ends). Raises InvalidInput (``invalid_consent``: empty or unversioned text, unknown channel or
    language, a person of another brand; ``invalid_ip``) before writing; InvalidTransition
    (``person_erased``)."""
    now = now or timezone.now()
    text = text or ""
    if not text.strip() or version != hashlib.sha256(text.encode()).hexdigest():
        raise InvalidInput("Consent needs the exact text shown and its SHA-256.", code="invalid_consent")
    if channel not in ConsentChannel.values or language not in LANGUAGES:
        raise InvalidInput("Unknown consent channel or language.", code="invalid_consent")
    ip_hash = _ip_hash(ip)
    root = person_root_lock(person=person)
    if root.brand_id != brand.pk:
        raise InvalidInput("This person is not one of this brand's people.", code="invalid_consent")
    if root.erased_at:
        raise InvalidTransition("This person has been erased.", code="person_erased")
    active = list(_active(root=root, brand_id=brand.pk))
    same = next((c for c in active if c.text_version == version), None)
    if same is not None:
        return same
    for old in active:
        _close(old, channel=WithdrawalChannel.SUPERSEDED, now=now, actor=None)
    consent = MarketingConsent.objects.create(
        person=root,
        brand_id=brand.pk,
        text=text,
        text_version=version,
        language=language,
        channel=channel,
        given_at=now,
        ip_hash=ip_hash,
        user_agent=_printable(user_agent)[:USER_AGENT_MAX],
        claim_link_id=claim_link_id,
    )
    ConsentEvent.objects.create(
        brand_id=brand.pk,
        person=root,
        consent=consent,
        kind=ConsentEventKind.GIVEN,
        channel=channel,
        data={"version": version, "language": language},
        created_at=now,
    )
    hook_fire(AUDIT_ROWS_WRITTEN)  # the brand's webhook, collected after the commit
    return consent


def consent_withdraw(
    *,
    person: Person,
    brand=None,
    channel: str,
    consent_id: int | None = None,
    actor=None,
    now: datetime | None = None,
) -> list[MarketingConsent]:
    """Withdraw, at once, the active marketing consent of the human behind ``person`` — to
    ``brand`` only when given, to only consent ``consent_id`` when given (the link) — through
    ``channel`` (``link``, ``whatsapp`` for a STOP reply, ``api``, ``admin``). Returns the consents
    withdrawn now: none when there was nothing active, so a replay (a STOP sent twice, a link
    opened again) is a no-op. A ``consent.withdrawn`` event for each. Joins the caller's
    transaction. Raises InvalidInput (``invalid_channel``) before writing."""
    if channel not in WithdrawalChannel.values or channel in (WithdrawalChannel.SUPERSEDED, WithdrawalChannel.ERASURE):
        raise InvalidInput("Unknown withdrawal channel.", code="invalid_channel")
    now = now or timezone.now()
    root = person_root_lock(person=person)
    active = MarketingConsent.objects.filter(person_id__in=person_cluster_ids(person=root), withdrawn_at__isnull=True)
    if brand is not None:
        active = active.filter(brand_id=brand.pk)
    if consent_id is not None:
        active = active.filter(pk=consent_id)
    withdrawn = []
    for consent in active.order_by("id"):
        _close(consent, channel=channel, now=now, actor=actor)
        withdrawn.append(consent)
    return withdrawn


def consents_close_erased(*, cluster: list[int], now: datetime) -> int:
    """Erasure's part (``recipients.privacy``): the people's active consents end (``erasure``),
    each with its event so the brand hears of it, and every consent's proof is blanked. The
    caller (``person_erase``) holds the root lock. Returns how many consents it touched."""
    for consent in MarketingConsent.objects.filter(person_id__in=cluster, withdrawn_at__isnull=True).order_by("id"):
        _close(consent, channel=WithdrawalChannel.ERASURE, now=now, actor=None)
    return MarketingConsent.objects.filter(person_id__in=cluster).update(ip_hash="", user_agent="")


def _active(*, root: Person, brand_id: int):
    return MarketingConsent.objects.filter(
        person_id__in=person_cluster_ids(person=root), brand_id=brand_id, withdrawn_at__isnull=True
    ).order_by("id")


def _close(consent: MarketingConsent, *, channel: str, now: datetime, actor) -> None:
    closed = MarketingConsent.objects.filter(pk=consent.pk, withdrawn_at__isnull=True).update(
        withdrawn_at=now, withdrawal_channel=channel
    )
    if closed != 1:
        return
    consent.withdrawn_at, consent.withdrawal_channel = now, channel
    ConsentEvent.objects.create(
        brand_id=consent.brand_id,
        person_id=consent.person_id,
        consent=consent,
        kind=ConsentEventKind.WITHDRAWN,
        channel=channel,
        actor=actor,
        data={"version": consent.text_version},
        created_at=now,
    )
    hook_fire(AUDIT_ROWS_WRITTEN)


def _ip_hash(ip: str) -> str:
    ip = (ip or "").strip()
    if not ip:
        return ""
    try:
        normalised = str(ipaddress.ip_address(ip))
    except ValueError:
        raise InvalidInput(f"'{ip}' is not an IP address.", code="invalid_ip")
    return crypto.fingerprint("consent-ip", normalised)


def _printable(value: str) -> str:
    return "".join(c for c in (value or "") if c.isprintable())


# --- the withdrawal link -------------------------------------------------------------------------


def consents_withdraw_by_whatsapp(*, number: str, now: datetime | None = None) -> list[MarketingConsent]:
    """A STOP sent to our WhatsApp number (``number`` in E.164): the number is ours, not one
    brand's, so every active marketing consent of every person reached through it ends at once
    (channel ``whatsapp``). Returns the consents withdrawn now; a replay withdraws nothing."""
    people = (
        Identifier.objects.filter(kind=IdentifierKind.WHATSAPP, value=number, is_active=True)
        .values_list("person_id", flat=True)
        .order_by("person_id")
        .distinct()
    )
    withdrawn: list[MarketingConsent] = []
    with transaction.atomic():
        for person in Person.objects.filter(pk__in=list(people)).order_by("pk"):
            withdrawn += consent_withdraw(person=person, channel=WithdrawalChannel.WHATSAPP, now=now)
    return withdrawn


def consent_withdraw_token(*, consent_id: int) -> str:
    return signing.dumps(consent_id, salt=WITHDRAW_SALT, compress=False)


def consent_from_token(*, token: str) -> MarketingConsent:
    """The consent a withdrawal link names, whatever its state; NotFound for a token that is
    tampered with, expired or names nothing."""
    try:
        consent_id = signing.loads(token, salt=WITHDRAW_SALT, max_age=settings.CONSENT_WITHDRAW_LINK_DAYS * 86400)
    except signing.BadSignature:
        consent_id = None
    consent = (
        MarketingConsent.objects.select_related("brand").filter(pk=consent_id).first()
        if isinstance(consent_id, int)
        else None
    )
    if consent is None:
        raise NotFound("This link does not work.", code="consent_link_invalid")
    return consent


def consent_withdraw_by_link(*, token: str, now: datetime | None = None) -> tuple[MarketingConsent, bool]:
    """The person confirmed on the withdrawal link's page: the consent it names is withdrawn
    (``link``). Returns it and whether this call withdrew it (a replay is a no-op: False).
    Raises NotFound for a token that does not work. Its own transaction (a savepoint inside the
    caller's)."""
    consent = consent_from_token(token=token)
    with transaction.atomic():
        withdrawn = consent_withdraw(
            person=consent.person, brand=consent.brand, channel=WithdrawalChannel.LINK, consent_id=consent.pk, now=now
        )
    consent.refresh_from_db()
    return consent, bool(withdrawn)


def consent_withdraw_url(*, consent_id: int) -> str:
    path = reverse("claim:consent_withdraw", kwargs={"token": consent_withdraw_token(consent_id=consent_id)})
    return settings.CLAIM_BASE_URL.rstrip("/") + path


def marketing_footer(*, person: Person) -> str:
    """The lines every e-mail to a person who consented to marketing ends with, in the active
    language: whom they said yes to and the link that withdraws it. "" without an active consent."""
    consents = MarketingConsent.objects.filter(
        person_id__in=person_cluster_ids(person=person), withdrawn_at__isnull=True
    ).select_related("brand")
    lines = [
        _("You agreed to hear from %(brand)s. To withdraw that consent at once: %(link)s")
        % {"brand": c.brand.name, "link": consent_withdraw_url(consent_id=c.pk)}
        for c in consents.order_by("id")
    ]
    return "\n\n--\n" + "\n".join(lines) if lines else ""


def contacts_export_record(
    *, brand, channel: str, actor=None, filters: dict | None = None, rows: int | None = None, api_key: str = ""
) -> ConsentEvent:
    """The audit row of one export of the brand's contacts (a portal CSV, an API page), written
    before the data leaves: who (``actor``, or the API key's prefix), through which channel, with
    which filters and, when known, how many rows. Joins the caller's transaction.

    A search's text is not kept, only that there was one: it may be someone's e-mail or name,
    and an export's row belongs to no person, so erasure would never find it."""
    used = {k: v for k, v in (filters or {}).items() if v not in (None, "")}
    data = {"filters": {k: "(given)" if k in SEARCH_FILTERS else str(v) for k, v in used.items()}}
    if rows is not None:
        data["rows"] = rows
    if api_key:
        data["api_key"] = api_key
    return ConsentEvent.objects.create(
        brand_id=brand.pk,
        kind=ConsentEventKind.EXPORTED,
        channel=channel,
        actor=actor if getattr(actor, "pk", None) else None,
        data=data,
        created_at=timezone.now(),
    )
