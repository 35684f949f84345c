"""Marketing consent (``recipients.models_consent``): giving it, confirming it (the double
opt-in), withdrawing it, and the audit row of every export of contacts.

Every write takes the person's root lock first (``person_root_lock``), so a consent and an erasure
or a merge of the same person never interleave, and joins the caller's transaction: a consent
given on a claim page commits with the claim, or not at all. Each change writes its
``ConsentEvent`` in the same transaction; the webhooks to the brand are collected from those rows
(``campaigns.webhooks``), after commit.

A "yes" whose channel nothing proves (an e-mail typed on a public page:
``recipients.selectors.marketing_consent_proof``) is recorded *pending*, with the notice that
e-mails the address its confirmation link (``consent_links``), in the same transaction. The
brand sees it, and hears of it, only once confirmed (``consent.confirmed``) before its
``confirm_by``.

The links (withdrawal, confirmation) are signed, name one consent and do one thing each
(``recipients.services.consent_links``).
"""

import hashlib
import ipaddress
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.exceptions import InvalidInput, InvalidTransition
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from recipients import crypto
from recipients.models import Identifier, IdentifierKind, NoticeKind, Person
from recipients.models_consent import (
    PENDING,
    ConsentChannel,
    ConsentEvent,
    ConsentEventKind,
    MarketingConsent,
    WithdrawalChannel,
)
from recipients.selectors import person_cluster_ids
from recipients.services.consent_links import CONFIRM_SALT, consent_from_token
from recipients.services.notices import NoticeNew, notices_record
from recipients.services.roots import person_root_lock

USER_AGENT_MAX = 300
LANGUAGES = ("en", "it")
# Filters whose value is free text a person may be named in.
SEARCH_FILTERS = frozenset({"search", "q"})
# The proof a confirmation link gives (``ConsentEvent.channel`` of ``consent.confirmed``).
CONFIRMED_BY_EMAIL_LINK = "email_link"


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
    pending: bool = False,
    confirm_email_id: int | None = None,
    proof: str = "",
    now: datetime | None = None,
) -> MarketingConsent:
    """Record that the human behind ``person`` said yes to ``brand``'s marketing, to exactly
    ``text`` (shown in ``language``; ``version`` its SHA-256), through ``channel``. The proof kept
    is a keyed fingerprint of ``ip`` (never the address), the ``user_agent``, the claim link it
    was given behind and, in its event, ``proof`` (how the channel is known to be theirs).

    ``pending`` (an e-mail typed on a public page, nothing proving it is theirs): the consent
    waits ``CONSENT_CONFIRM_LINK_DAYS`` for its confirmation, and the notice e-mailing the link to
    ``confirm_email_id`` (one of the person's e-mail identifiers; none: nothing can confirm it,
    and it lapses) is recorded in the same transaction. It is not active until confirmed
    (``consent_confirm_by_link``): no contact, no export, no webhook.

    Idempotent: an open consent of theirs to the same version is returned as it is — a pending
    one is confirmed now if this "yes" is not pending (its channel is proven). One to an older
    text, or pending past its deadline, is closed (``superseded``) and a new one opened, so at
    most one is open per person and brand (the database's partial unique index is the backstop) —
    except that a pending "yes" leaves an active consent to older words as it is (returned).
    Writes a ``consent.given`` (or ``consent.pending``) event. Joins the caller's transaction (the
    root lock is held until it ends). Raises InvalidInput (``invalid_consent``: empty or
    unversioned text, unknown channel or language, a person of another brand, an e-mail to
    confirm on that is not theirs; ``invalid_ip``) before writing; InvalidTransition
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
    if confirm_email_id is not None and not (
        pending
        and Identifier.objects.filter(
            pk=confirm_email_id,
            person_id__in=person_cluster_ids(person=root),
            kind=IdentifierKind.EMAIL,
            is_active=True,
        ).exists()
    ):
        raise InvalidInput("The e-mail to confirm on is not this person's.", code="invalid_consent")
    current = list(_open(root=root, brand_id=brand.pk))
    same = next((c for c in current if c.text_version == version and _live(c, now)), None)
    if same is not None:
        if same.confirmed_at is None and not pending:
            _confirm(same, channel=channel, now=now, proof=proof)
        return same
    active = next((c for c in current if c.confirmed_at is not None), None)
    if pending and active is not None:
        # An unproven "yes" never ends a proven one: closing it would drop the person from the
        # brand's contacts (a superseded consent is not announced) for a "yes" that may lapse.
        return active
    for old in current:
        _close(old, channel=WithdrawalChannel.SUPERSEDED, now=now, actor=None)
    consent = MarketingConsent.objects.create(
        person=root,
        brand_id=brand.pk,
        text=text,
        text_version=version,
        language=language,
        channel=channel,
        given_at=now,
        confirmed_at=None if pending else now,
        confirm_by=now + timedelta(days=settings.CONSENT_CONFIRM_LINK_DAYS) if pending else None,
        confirm_email_id=confirm_email_id,
        ip_hash=ip_hash,
        user_agent=_printable(user_agent)[:USER_AGENT_MAX],
        claim_link_id=claim_link_id,
    )
    data = {"version": version, "language": language}
    if proof:
        data["proof"] = proof
    if pending:
        data["confirm_by"] = consent.confirm_by.isoformat()
    ConsentEvent.objects.create(
        brand_id=brand.pk,
        person=root,
        consent=consent,
        kind=ConsentEventKind.PENDING if pending else ConsentEventKind.GIVEN,
        channel=channel,
        data=data,
        created_at=now,
    )
    if pending and confirm_email_id is not None:
        notices_record(
            notices=[
                NoticeNew(
                    person_id=root.pk,
                    kind=NoticeKind.CONSENT_CONFIRM,
                    key=f"consent_confirm:{consent.pk}",
                    # Only to the address typed, only by e-mail: that is what it proves.
                    data={"consent": consent.pk, "identifier": confirm_email_id, "channels": ["email"]},
                )
            ],
            now=now,
        )
    hook_fire(AUDIT_ROWS_WRITTEN)  # the brand's webhook (for an active one), collected after the commit
    return consent


def consent_confirm_by_link(*, token: str, now: datetime | None = None) -> tuple[MarketingConsent, bool]:
    """The person followed the confirmation link e-mailed for a pending consent and confirmed on
    its page: the consent it names, and nothing else, becomes active now, with a
    ``consent.confirmed`` event (the proof: the time and the channel, ``email_link``) that the
    brand's ``person.consent_given`` webhook is collected from. Returns the consent and whether
    this call confirmed it: a replay, a consent past its ``confirm_by``, withdrawn, superseded
    or of an erased person changes nothing (False). Raises NotFound (``consent_link_invalid``)
    for a token that is tampered with, expired or not a confirmation link. Its own transaction
    (a savepoint inside the caller's), the person's root locked first."""
    now = now or timezone.now()
    consent = consent_from_token(token=token, salt=CONFIRM_SALT)
    with transaction.atomic():
        root = person_root_lock(person=consent.person)
        confirmed = root.erased_at is None and _confirm(consent, channel=CONFIRMED_BY_EMAIL_LINK, now=now)
    consent.refresh_from_db()
    return consent, confirmed


def consent_withdraw(
    *,
    person: Person,
    brand=None,
    channel: str,
    consent_id: int | None = None,
    actor=None,
    now: datetime | None = None,
) -> list[MarketingConsent]:
    """Withdraw, at once, the open marketing consent (active, or pending: then ``cancelled``,
    which the brand never hears of) of the human behind ``person`` — to
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
    """Erasure's part (``recipients.privacy``): the people's open consents end (``erasure``),
    each with its event (an active one's so the brand hears of it; a pending one's ``cancelled``,
    silent), and every consent's proof is blanked. The
    caller (``person_erase``) holds the root lock. Returns how many consents it touched."""
    for consent in MarketingConsent.objects.filter(person_id__in=cluster, withdrawn_at__isnull=True).order_by("id"):
        _close(consent, channel=WithdrawalChannel.ERASURE, now=now, actor=None)
    return MarketingConsent.objects.filter(person_id__in=cluster).update(ip_hash="", user_agent="")


def _open(*, root: Person, brand_id: int):
    """The person's consents to the brand not withdrawn: active, pending, or pending past its time."""
    return MarketingConsent.objects.filter(
        person_id__in=person_cluster_ids(person=root), brand_id=brand_id, withdrawn_at__isnull=True
    ).order_by("id")


def _live(consent: MarketingConsent, now: datetime) -> bool:
    """Active, or pending and still confirmable."""
    return consent.confirmed_at is not None or consent.confirm_by > now


def _confirm(consent: MarketingConsent, *, channel: str, now: datetime, proof: str = "") -> bool:
    """Pending → active by a conditional UPDATE (still pending, not withdrawn, before its
    deadline: exactly one caller wins), with its ``consent.confirmed`` event. The caller holds
    the person's root lock. Only the link e-mailed to the typed address proves that address: a
    consent confirmed otherwise (the same words again, on a channel already proven) lets go of
    it, so the address is never taken for confirmed (``brand_contacts``, ``email_confirmed``)."""
    by_link = channel == CONFIRMED_BY_EMAIL_LINK
    confirm_email_id = consent.confirm_email_id if by_link else None
    confirmed = MarketingConsent.objects.filter(PENDING, pk=consent.pk, confirm_by__gt=now).update(
        confirmed_at=now, confirm_email_id=confirm_email_id
    )
    if confirmed != 1:
        return False
    consent.confirmed_at, consent.confirm_email_id = now, confirm_email_id
    data = {"version": consent.text_version}
    if proof:
        data["proof"] = proof
    if confirm_email_id is not None:
        data["email_identifier"] = confirm_email_id
    ConsentEvent.objects.create(
        brand_id=consent.brand_id,
        person_id=consent.person_id,
        consent=consent,
        kind=ConsentEventKind.CONFIRMED,
        channel=channel,
        data=data,
        created_at=now,
    )
    hook_fire(AUDIT_ROWS_WRITTEN)
    return True


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
        # A consent never confirmed was never the brand's: its end is no withdrawal to announce.
        kind=ConsentEventKind.WITHDRAWN if consent.confirmed_at else ConsentEventKind.CANCELLED,
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


# --- withdrawing ---------------------------------------------------------------------------------


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
