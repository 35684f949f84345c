"""Ingesting trigger events: from a partner's event to a reserved reward (or a reasoned rejection).

``event_ingest`` takes one event, ``event_ingest_bulk`` up to 1,000. Both take the same path: the
events are validated without touching the database (``event_prepare``), then evaluated set-wise
by ``ingest_batch`` in durable transactions of at most ``BULK_CHUNK`` events — a single event is a
batch of one in its own short transaction. Lock order and why: ``campaigns.locks``.

Idempotency: ``(brand, external_id)`` is unique. A replay with the same payload (``request_hash``)
returns the first outcome with ``replayed=True``; the same id with another payload is an
IdempotencyConflict. When a concurrent delivery stores one of a batch's events first, the batch's
event INSERT fails on that key, the whole transaction rolls back, and the batch runs again
without it: that event is a replay now, so nothing the loser evaluated is kept.
"""

import hashlib
import ipaddress
import json
from dataclasses import fields
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.models import EventSource, Reward, Trigger, TriggerEvent
from campaigns.services.ingest_batch import ingest_batch
from campaigns.services.ingest_reads import campaign_context
from campaigns.services.ingest_types import CampaignContext, EventInput, IngestResult, Item, PreparedEvent
from core.exceptions import ApplicationError, IdempotencyConflict, InvalidInput, TemporaryFailure
from core.money import currency_exponent
from recipients import crypto
from recipients.models import Person
from recipients.normalise import email_mixed_script, email_normalise, iban_normalise, phone_normalise, social_normalise
from recipients.services import ComplexBatch

BULK_MAX = 1000
# Events per durable transaction. The campaign's tally lock is held from the evaluation to the
# commit, so a chunk is also how long single-event callers of the same campaign may wait.
BULK_CHUNK = 250
# A chunk whose events other callers keep storing first is run again this many times at most.
_DUPLICATE_RETRIES = 5
# An event claiming to come from the future beyond clock skew is refused: period caps count by
# occurred_at, and a future date would dodge today's cap.
FUTURE_TOLERANCE = timedelta(minutes=5)


def event_ingest(*, brand, payload: EventInput) -> IngestResult:
    """Ingest one trigger event: evaluate the campaign's rule for it and reserve the reward.

    Outcomes: ``rejected`` (``reason`` is a stable code: campaign_not_active, no_matching_rule,
    a failed condition, a full cap, budget_exhausted …), ``review`` (money reserved, a person
    decides; ``review_reasons`` stored), ``held`` (money reserved until ``matures_at``) or
    ``rewarded`` (no hold period: payable at the next maturing run). A business rejection is
    stored and replayed like any outcome.
    Raises: InvalidInput (bad identifiers, type, amounts — nothing stored), NotFound (campaign),
    IdempotencyConflict (same external_id, different payload), TemporaryFailure (other callers
    kept storing it first: send it again).
    Transaction: one ``atomic(durable=True)``; when the budget cannot cover the smallest reward
    afterwards (or could not cover this one) the campaign is paused in the same transaction.
    """
    (result,) = _ingest_prepared(brand=brand, prepared={0: event_prepare(payload, now=timezone.now())})
    if result.error is not None:
        raise result.error
    return result


def event_ingest_bulk(*, brand, payloads: list[EventInput]) -> list[IngestResult]:
    """Ingest up to 1,000 events; one result per payload, in order.

    An invalid event (outcome ``error`` with the ApplicationError, nothing stored) does not
    affect the others. Events are evaluated in order, each seeing the ones before it, exactly as
    one ``event_ingest`` call after another would, in chunks of ``BULK_CHUNK`` per durable
    transaction: locks are held briefly and a crash loses at most the uncommitted chunk (a retry
    of the whole call replays the committed ones). A chunk where someone's identity needs writes
    (two new identities of one person, a merge, a new IBAN for a known person) runs one event per
    transaction instead.
    Raises InvalidInput when more than 1,000 payloads are given.
    """
    if len(payloads) > BULK_MAX:
        raise InvalidInput(f"At most {BULK_MAX} events per call.", code="too_many_events")
    now = timezone.now()
    prepared: dict[int, PreparedEvent] = {}
    refused: dict[int, IngestResult] = {}
    for i, payload in enumerate(payloads):
        try:
            prepared[i] = event_prepare(payload, now=now)
        except ApplicationError as exc:
            refused[i] = _error(exc)
    results = dict(zip(prepared, _ingest_prepared(brand=brand, prepared=prepared), strict=True))
    return [refused[i] if i in refused else results[i] for i in range(len(payloads))]


# --- validation, without the database ----------------------------------------------------------

_FIELDS = tuple(f.name for f in fields(EventInput))
_TEXT_FIELDS = ("custom_name", "social_provider", "social_uid", "device_fingerprint", "order_id", "code")
_TRIGGERS = frozenset(Trigger.values)
_SOURCES = frozenset(EventSource.values)
# Free-text fields and the column (or the person's) they end up in: checked here, so a bad one is
# this event's InvalidInput, not a database error that fails every event of its chunk.
_LENGTH_LIMITED = {
    **{name: TriggerEvent._meta.get_field(name).max_length for name in _TEXT_FIELDS},
    "name": Person._meta.get_field("display_name").max_length,
}


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
    iban_info = iban_normalise(payload.iban) if payload.iban.strip() else None
    email = email_normalise(payload.email) if payload.email.strip() else ""
    social = ""
    if payload.social_provider or payload.social_uid:
        social = social_normalise(payload.social_provider, payload.social_uid)
    return PreparedEvent(
        payload=payload,
        request_hash=_request_hash(payload),
        occurred_at=occurred_at,
        email=email,
        whatsapp=phone_normalise(payload.whatsapp, region=payload.phone_region) if payload.whatsapp.strip() else "",
        social=social,
        iban_fingerprint=crypto.iban_fingerprint(iban_info.normalised) if iban_info else "",
        ip=ip,
        iban_info=iban_info,
        email_mixed_script=bool(email) and email_mixed_script(email),
    )


def _request_hash(payload: EventInput) -> str:
    # A shallow dict serialises exactly as ``asdict`` would (the JSON of the evidence is the
    # same), without deep-copying every payload: stored hashes keep matching their replays.
    data = {name: getattr(payload, name) for name in _FIELDS}
    data["occurred_at"] = payload.occurred_at.isoformat() if payload.occurred_at else None
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


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


# --- the path every event takes ------------------------------------------------------------------


def _ingest_prepared(*, brand, prepared: dict[int, PreparedEvent]) -> list[IngestResult]:
    """One result per prepared event, in key order: stored events replay, the rest are
    evaluated chunk by chunk."""
    stored = stored_events(brand, [p.payload.external_id for p in prepared.values()])
    results: dict[int, IngestResult] = {}
    contexts: dict[str, CampaignContext | ApplicationError] = {}
    first: dict[str, int] = {}  # external_id -> its first index in this call
    todo: list[int] = []
    for i, p in prepared.items():
        ext = p.payload.external_id
        if ext in stored or ext in first:
            continue
        first[ext] = i
        slug = p.payload.campaign
        if slug not in contexts:
            try:
                contexts[slug] = campaign_context(brand, slug)
            except ApplicationError as exc:
                contexts[slug] = exc
        if isinstance(contexts[slug], ApplicationError):
            results[i] = _error(contexts[slug])
        else:
            todo.append(i)
    for start in range(0, len(todo), BULK_CHUNK):
        _chunk(
            brand=brand, chunk=todo[start : start + BULK_CHUNK], prepared=prepared, contexts=contexts, results=results
        )
    # Replays: earlier calls, copies within this call, and races lost to another caller — their
    # events and rewards in one query (a partner retrying a whole bulk call replays a thousand).
    replays = [i for i in prepared if i not in results]
    missing = [prepared[i].payload.external_id for i in replays if prepared[i].payload.external_id not in stored]
    stored |= stored_events(brand, missing)
    for i in replays:
        p = prepared[i]
        event = stored.get(p.payload.external_id)
        if event is None:
            # A copy of an event refused earlier in this call gets the same answer; an event lost
            # to other callers too often to settle is answered "send it again", never nothing.
            original = first.get(p.payload.external_id)
            results[i] = results[original] if original not in (None, i) and original in results else _contended(p)
            continue
        try:
            results[i] = event_replay(event, p.request_hash)
        except ApplicationError as exc:
            results[i] = _error(exc)
    return [results[i] for i in prepared]


def stored_events(brand, external_ids: list[str]) -> dict[str, TriggerEvent]:
    """The brand's stored events among ``external_ids``, with their campaigns and rewards: the one
    way to ask whether an event is stored already. Asked by id first: nearly every event is new,
    and a replay's rows are only read when there is one."""
    wanted = TriggerEvent.objects.filter(brand=brand, external_id__in=set(external_ids))
    if not external_ids or not wanted.exists():
        return {}
    return {e.external_id: e for e in wanted.select_related("campaign", "reward")}


def _chunk(*, brand, chunk: list[int], prepared, contexts, results: dict[int, IngestResult]) -> None:
    for _ in range(_DUPLICATE_RETRIES):
        # The same ``now`` as a single call gets: the moment this transaction starts.
        now = timezone.now()
        items = {i: Item(p=prepared[i], ctx=contexts[prepared[i].payload.campaign]) for i in chunk}
        try:
            with transaction.atomic(durable=True):
                ingest_batch(brand=brand, items=list(items.values()), now=now)
        except ComplexBatch:
            # Someone's identity needs writes (a merge, a switched account) that the others would
            # see had they come one by one: so they do, each in its own transaction.
            for i in chunk:
                _chunk(brand=brand, chunk=[i], prepared=prepared, contexts=contexts, results=results)
            return
        except IntegrityError:
            # Someone stored some of these first: they are replays now; run the rest again. Any
            # other integrity error stores none of the chunk's events and is raised as it is.
            taken = stored_events(brand, [prepared[i].payload.external_id for i in chunk])
            if not taken:
                raise
            chunk = [i for i in chunk if prepared[i].payload.external_id not in taken]
            if not chunk:
                return
            continue
        for i, item in items.items():
            results[i] = _result(item)
        return


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


def _result(item: Item) -> IngestResult:
    if item.error is not None:
        return _error(item.error)
    return IngestResult(item.event, item.reward, item.outcome, item.reason, False)


def _error(exc: ApplicationError) -> IngestResult:
    return IngestResult(None, None, "error", exc.code, False, error=exc)


def _contended(p: PreparedEvent) -> IngestResult:
    return _error(
        TemporaryFailure(
            f"Event {p.payload.external_id} is being stored by another request; send it again.",
            code="event_contended",
        )
    )
