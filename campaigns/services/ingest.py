"""``event_ingest``: from a trigger event to a reserved reward (or a reasoned rejection).

The evaluation itself is set-wise and shared with bulk ingestion: ``ingest_batch`` (a batch of one
here); bulk: ``ingest_bulk``; the campaign and its rules: ``ingest_steps``.

One short durable transaction per event: resolve and lock the person, lock the IBAN, gather the
facts, evaluate the rule (``campaigns.evaluation``), then — under the campaign tally lock, as late
as possible — check the campaign-wide caps and reserve reward + fee as a ledger hold on the
no-overdraft budget. Lock order and why: ``campaigns.locks``.

Idempotency: ``(brand, external_id)`` is unique. A replay with the same payload (``request_hash``)
returns the first outcome with ``replayed=True``; the same id with another payload raises
IdempotencyConflict. Two concurrent deliveries of one event: the loser's insert of the event row
fails the unique constraint, its transaction rolls back whole and it answers with the winner's
outcome.
"""

import hashlib
import ipaddress
import json
from collections.abc import Callable
from dataclasses import fields
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from campaigns.models import EventSource, Reward, Trigger, TriggerEvent
from campaigns.services.ingest_batch import Item, ingest_batch
from campaigns.services.ingest_steps import campaign_context
from campaigns.services.ingest_types import EventInput, IngestResult, PreparedEvent
from core.exceptions import IdempotencyConflict, InvalidInput
from core.money import currency_exponent
from recipients import crypto
from recipients.models import Person
from recipients.normalise import email_normalise, phone_normalise, social_normalise
from recipients.selectors import iban_validate
from reconciliation.db import constraint_name

# An event claiming to come from the future beyond clock skew is refused: period caps count by
# occurred_at, and a future date would dodge today's cap.
FUTURE_TOLERANCE = timedelta(minutes=5)


_FIELDS = tuple(f.name for f in fields(EventInput))
_TEXT_FIELDS = ("custom_name", "social_provider", "social_uid", "device_fingerprint", "order_id", "code")


def _request_hash(payload: EventInput) -> str:
    # A shallow dict serialises exactly as ``asdict`` would (the JSON of the evidence is the
    # same), without deep-copying every payload: stored hashes keep matching their replays.
    data = {name: getattr(payload, name) for name in _FIELDS}
    data["occurred_at"] = payload.occurred_at.isoformat() if payload.occurred_at else None
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


# Sets, once: a choices enum's ``.values`` builds a new list on every access (two per event).
_TRIGGERS = frozenset(Trigger.values)
_SOURCES = frozenset(EventSource.values)


def event_prepare(payload: EventInput, *, now: datetime) -> PreparedEvent:
    """Validate and normalise without touching the database. Raises InvalidInput."""
    if not payload.external_id or len(payload.external_id) > 200:
        raise InvalidInput("external_id must be 1 to 200 characters.", code="invalid_external_id")
    if payload.type not in _TRIGGERS:
        raise InvalidInput(f"Unknown event type {payload.type!r}.", code="invalid_event_type")
    if payload.source not in _SOURCES:
        raise InvalidInput(f"Unknown source {payload.source!r}.", code="invalid_source")
    if payload.purchase_amount_minor is not None and (
        type(payload.purchase_amount_minor) is not int or payload.purchase_amount_minor <= 0
    ):
        raise InvalidInput("purchase_amount_minor is a positive integer.", code="invalid_amount")
    ip = _fields_check(payload)
    occurred_at = payload.occurred_at or now
    if timezone.is_naive(occurred_at):
        raise InvalidInput("occurred_at needs a time zone.", code="invalid_occurred_at")
    if occurred_at > now + FUTURE_TOLERANCE:
        raise InvalidInput("occurred_at is in the future.", code="invalid_occurred_at")
    iban_info = iban_validate(payload.iban) if payload.iban.strip() else None
    social = ""
    if payload.social_provider or payload.social_uid:
        social = social_normalise(payload.social_provider, payload.social_uid)
    return PreparedEvent(
        payload=payload,
        request_hash=_request_hash(payload),
        occurred_at=occurred_at,
        email=email_normalise(payload.email) if payload.email.strip() else "",
        whatsapp=phone_normalise(payload.whatsapp, region=payload.phone_region) if payload.whatsapp.strip() else "",
        social=social,
        iban_fingerprint=crypto.iban_fingerprint(iban_info.normalised) if iban_info else "",
        ip=ip,
        iban_info=iban_info,
    )


# Free-text fields and the column (or the person's) they end up in: checked here, so a bad one is
# this event's InvalidInput, not a database error that fails every event of its bulk chunk.
_LENGTH_LIMITED = {
    **{name: TriggerEvent._meta.get_field(name).max_length for name in _TEXT_FIELDS},
    "name": Person._meta.get_field("display_name").max_length,
}


def _fields_check(payload: EventInput) -> str:
    """Raises InvalidInput for an over-long text, an unknown currency or a bad IP; returns the IP
    in its canonical form ("" for none)."""
    for name, limit in _LENGTH_LIMITED.items():
        if len(getattr(payload, name)) > limit:
            raise InvalidInput(
                f"{name} is longer than {limit} characters.", code="invalid_field", details={"field": name}
            )
    if payload.purchase_currency:
        currency_exponent(payload.purchase_currency.upper())  # InvalidInput(unknown_currency) if no ISO 4217 code
    if not payload.ip:
        return ""
    try:
        return str(ipaddress.ip_address(payload.ip.strip()))
    except ValueError:
        raise InvalidInput(f"{payload.ip!r} is not an IP address.", code="invalid_ip") from None


def event_replay(existing: TriggerEvent, request_hash: str) -> IngestResult:
    if existing.request_hash != request_hash:
        raise IdempotencyConflict(
            f"Event {existing.external_id!r} was sent before with different content.",
            details={"external_id": existing.external_id, "event_id": existing.pk},
        )
    try:
        reward = existing.reward  # loaded with the event (select_related) or read now
    except Reward.DoesNotExist:
        reward = None
    return IngestResult(event=existing, reward=reward, outcome=existing.outcome, reason=existing.reason, replayed=True)


def _stored(brand, external_id: str) -> bool:
    """Whether the event is stored already: raw, on every event's path (see ``campaign_context``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {TriggerEvent._meta.db_table} WHERE brand_id = %s AND external_id = %s",  # noqa: S608
            [brand.pk, external_id],
        )
        return cursor.fetchone() is not None


def ingest_one(*, brand, item: Item, now: datetime, also: Callable[[], None] | None = None) -> bool:
    """One event in its own durable transaction (``also`` runs in it, before the commit). False
    when another caller stored it first (the transaction rolled back whole; answer with a
    replay)."""
    try:
        with transaction.atomic(durable=True):
            ingest_batch(brand=brand, items=[item], now=now)
            if also is not None:
                also()
    except IntegrityError as exc:
        if not is_duplicate_event(exc):
            raise
        return False
    return True


def is_duplicate_event(exc: IntegrityError) -> bool:
    return constraint_name(exc) == "trigger_event_external_id_unique" or "external_id" in str(exc)


def event_ingest(*, brand, payload: EventInput) -> IngestResult:
    """Ingest one trigger event: evaluate the campaign's rule for it and reserve the reward.

    Outcomes: ``rejected`` (``reason`` is a stable code: campaign_not_active, no_matching_rule,
    a failed condition, a full cap, budget_exhausted …), ``review`` (money reserved, a person
    decides; ``review_reasons`` stored), ``held`` (money reserved until ``matures_at``) or
    ``rewarded`` (no hold period: payable at the next maturing run). A business rejection is
    stored and replayed like any outcome.
    Raises: InvalidInput (bad identifiers, type, amounts — nothing stored), NotFound (campaign),
    IdempotencyConflict (same external_id, different payload).
    Transaction: one ``atomic(durable=True)`` — on PostgreSQL outside a transaction, shared with
    concurrent callers of the same campaign (``ingest_combine``); when the budget cannot cover
    the smallest reward afterwards (or could not cover this one) the campaign is paused in the
    same transaction.
    """
    now = timezone.now()
    prepared = event_prepare(payload, now=now)
    # Imported here: ingest_combine builds on this module (and on ingest_bulk, which does too).
    from campaigns.services.ingest_combine import combining_available, event_ingest_combined

    if combining_available():
        return event_ingest_combined(brand=brand, prepared=prepared)
    if _stored(brand, payload.external_id):
        return event_replay(
            TriggerEvent.objects.get(brand=brand, external_id=payload.external_id), prepared.request_hash
        )
    return ingest_alone(brand=brand, prepared=prepared, now=now)


def ingest_alone(*, brand, prepared: PreparedEvent, now: datetime) -> IngestResult:
    """A prepared event in its own transaction: the outcome, the error (nothing stored), or —
    when another caller stored it first — the replay of theirs."""
    external_id = prepared.payload.external_id
    item = Item(p=prepared, ctx=campaign_context(brand, prepared.payload.campaign))
    if ingest_one(brand=brand, item=item, now=now):
        if item.error is not None:
            raise item.error
        return IngestResult(
            event=item.event, reward=item.reward, outcome=item.outcome, reason=item.reason, replayed=False
        )
    return event_replay(TriggerEvent.objects.get(brand=brand, external_id=external_id), prepared.request_hash)
