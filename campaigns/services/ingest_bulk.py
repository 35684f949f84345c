"""``event_ingest_bulk``: up to 1,000 events per call, each isolated, in short chunk transactions."""

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.locks import lock_campaign_tally, lock_ibans
from campaigns.models import TriggerEvent
from campaigns.services.ingest import early_rejection, event_prepare, event_replay, ingest_locked, is_duplicate_event
from campaigns.services.ingest_steps import CampaignContext, Who, campaign_context, who_resolve
from campaigns.services.ingest_types import EventInput, IngestResult, PreparedEvent
from core.exceptions import ApplicationError, InvalidInput

BULK_MAX = 1000
BULK_CHUNK = 100


def event_ingest_bulk(*, brand, payloads: list[EventInput]) -> list[IngestResult]:
    """Ingest up to 1,000 events; one result per payload, in order.

    Each event is isolated in its own savepoint: an invalid one (outcome ``error`` with the
    ApplicationError, nothing stored) or one that loses a race does not affect the others.
    Events run in chunks of 100 per durable transaction, so locks are held briefly and a crash
    loses at most the uncommitted chunk (a retry of the whole call replays the committed ones).
    Within a chunk the locks are taken class by class as ``campaigns.locks`` orders them: every
    person first, then every IBAN (ascending), then the campaign tallies (ascending), then the
    events are evaluated one by one in order — each sees the rewards of the ones before it.
    Raises InvalidInput when more than 1,000 payloads are given.
    """
    if len(payloads) > BULK_MAX:
        raise InvalidInput(f"At most {BULK_MAX} events per call.", code="too_many_events")
    now = timezone.now()
    results: list[IngestResult | None] = [None] * len(payloads)
    prepared: dict[int, PreparedEvent] = {}
    for i, payload in enumerate(payloads):
        try:
            prepared[i] = event_prepare(payload, now=now)
        except ApplicationError as exc:
            results[i] = IngestResult(None, None, "error", exc.code, False, error=exc)
    ids = [prepared[i].payload.external_id for i in prepared]
    existing = {e.external_id: e for e in TriggerEvent.objects.filter(brand=brand, external_id__in=ids)}
    contexts: dict[str, CampaignContext | ApplicationError] = {}
    todo: list[int] = []
    seen: dict[str, int] = {}
    for i, p in prepared.items():
        ext = p.payload.external_id
        if ext in existing or ext in seen:
            continue
        seen[ext] = i
        slug = p.payload.campaign
        if slug not in contexts:
            try:
                contexts[slug] = campaign_context(brand, slug)
            except ApplicationError as exc:
                contexts[slug] = exc
        if isinstance(contexts[slug], ApplicationError):
            results[i] = IngestResult(None, None, "error", contexts[slug].code, False, error=contexts[slug])
        else:
            todo.append(i)
    for start in range(0, len(todo), BULK_CHUNK):
        _bulk_chunk(
            brand=brand,
            chunk=todo[start : start + BULK_CHUNK],
            prepared=prepared,
            contexts=contexts,
            results=results,
            now=now,
        )
    # Replays: earlier calls, duplicates within this call, and races lost to another caller.
    for i, p in prepared.items():
        if results[i] is not None:
            continue
        try:
            event = existing.get(p.payload.external_id) or TriggerEvent.objects.get(
                brand=brand, external_id=p.payload.external_id
            )
            results[i] = event_replay(event, p.request_hash)
        except ApplicationError as exc:
            results[i] = IngestResult(None, None, "error", exc.code, False, error=exc)
    return results


def _bulk_chunk(*, brand, chunk: list[int], prepared, contexts, results, now: datetime) -> None:
    with transaction.atomic(durable=True):
        whos: dict[int, Who] = {}
        for i in chunk:
            p = prepared[i]
            if early_rejection(contexts[p.payload.campaign], p):
                continue
            try:
                with transaction.atomic():
                    whos[i] = who_resolve(p.payload)
            except ApplicationError as exc:
                results[i] = IngestResult(None, None, "error", exc.code, False, error=exc)
        lock_ibans(fingerprints=[who.fingerprint for who in whos.values()])
        for campaign_id in sorted({contexts[prepared[i].payload.campaign].campaign.pk for i in whos}):
            lock_campaign_tally(campaign_id=campaign_id)
        for i in chunk:
            if results[i] is not None:
                continue
            p = prepared[i]
            try:
                with transaction.atomic():
                    results[i] = ingest_locked(
                        brand=brand, ctx=contexts[p.payload.campaign], p=p, now=now, who=whos.get(i)
                    )
            except IntegrityError as exc:
                if not is_duplicate_event(exc):
                    raise
            except ApplicationError as exc:
                results[i] = IngestResult(None, None, "error", exc.code, False, error=exc)
