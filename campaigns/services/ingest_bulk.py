"""``event_ingest_bulk``: up to 1,000 events per call, in short chunk transactions."""

from collections.abc import Callable

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from campaigns.models import TriggerEvent
from campaigns.services.ingest import event_prepare, event_replay, ingest_one, is_duplicate_event
from campaigns.services.ingest_batch import Item, ingest_batch
from campaigns.services.ingest_steps import CampaignContext, campaign_context
from campaigns.services.ingest_types import EventInput, IngestResult, PreparedEvent
from core.bulk import any_of
from core.exceptions import ApplicationError, InvalidInput, TemporaryFailure
from recipients.services import ComplexBatch

BULK_MAX = 1000
# Events per durable transaction. The campaign's tally lock is held from the evaluation to the
# commit, so a chunk is also how long single-event callers of the same campaign may wait.
BULK_CHUNK = 250
_DUPLICATE_RETRIES = 5


def event_ingest_bulk(*, brand, payloads: list[EventInput]) -> list[IngestResult]:
    """Ingest up to 1,000 events; one result per payload, in order.

    An invalid event (outcome ``error`` with the ApplicationError, nothing stored) does not
    affect the others. Events are evaluated in order, each seeing the ones before it, exactly as
    one ``event_ingest`` call after another would, but set-wise (``ingest_batch``) in chunks of
    ``BULK_CHUNK`` per durable transaction: locks are held briefly and a crash loses at most the
    uncommitted chunk (a retry of the whole call replays the committed ones). An event another
    caller stored first while a chunk ran rolls that chunk back; it runs again without it. A
    chunk where someone's identity needs writes (two new identities of one person, a merge, a
    new IBAN for a known person) runs one event per transaction instead.
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
    ingest_prepared(brand=brand, prepared=prepared, results=results)
    return results


OnStored = Callable[[dict[int, Item]], None]


def ingest_prepared(
    *,
    brand,
    prepared: dict[int, PreparedEvent],
    results: list[IngestResult | None],
    contexts: dict[str, CampaignContext | ApplicationError] | None = None,
    on_stored: OnStored | None = None,
    stored: set[str] | None = None,
) -> None:
    """The body of ``event_ingest_bulk`` for events already prepared: fills ``results[i]`` for
    every key of ``prepared``. ``contexts`` may hold campaigns already read (by slug);
    ``on_stored(items)`` runs inside each transaction that evaluated ``items`` (by index), just
    before its commit — ``ingest_combine`` retires its queued requests there, atomically with
    what they stored. Events stored before this call are replays and never reach it: ``stored``
    names those the caller already looked up (None: looked up here). A pre-check only — an event
    stored meanwhile is caught by the unique key and becomes a replay all the same."""
    contexts = dict(contexts or {})
    if stored is None:
        # One array parameter, not a thousand-placeholder IN list (see ``any_of``).
        external_in, params = any_of("external_id", [prepared[i].payload.external_id for i in prepared])
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT external_id FROM {TriggerEvent._meta.db_table} WHERE brand_id = %s AND {external_in}",  # noqa: S608
                [brand.pk, *params],
            )
            stored = {row[0] for row in cursor.fetchall()}
    todo: list[int] = []
    first: dict[str, int] = {}  # external_id -> its first index in this call
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
            results[i] = IngestResult(None, None, "error", contexts[slug].code, False, error=contexts[slug])
        else:
            todo.append(i)
    for start in range(0, len(todo), BULK_CHUNK):
        _chunk(
            brand=brand,
            chunk=todo[start : start + BULK_CHUNK],
            prepared=prepared,
            contexts=contexts,
            results=results,
            on_stored=on_stored,
        )
    # Replays: earlier calls, duplicates within this call, and races lost to another caller —
    # their events and rewards in one query, not two per replay (a partner retrying a whole bulk
    # call replays a thousand).
    replays = [i for i in prepared if results[i] is None]
    if not replays:
        return
    events = {
        e.external_id: e
        for e in TriggerEvent.objects.filter(
            brand=brand, external_id__in={prepared[i].payload.external_id for i in replays}
        ).select_related("reward")
    }
    for i in replays:
        p = prepared[i]
        event = events.get(p.payload.external_id)
        if event is None:
            # A copy of an event refused earlier in this call: nothing stored, the same answer.
            # Otherwise (looked up as stored, or given up on after lost races) nothing to
            # replay: say so rather than answer nothing.
            original = first.get(p.payload.external_id)
            answer = results[original] if original not in (None, i) else None
            results[i] = answer or _contended(p)
            continue
        try:
            results[i] = event_replay(event, p.request_hash)
        except ApplicationError as exc:
            results[i] = IngestResult(None, None, "error", exc.code, False, error=exc)


def _contended(p: PreparedEvent) -> IngestResult:
    error = TemporaryFailure(
        f"Event {p.payload.external_id} is being stored by another request; send it again.", code="event_contended"
    )
    return IngestResult(None, None, "error", error.code, False, error=error)


def _chunk(*, brand, chunk: list[int], prepared, contexts, results, on_stored: OnStored | None) -> None:
    for _ in range(_DUPLICATE_RETRIES):
        # The same ``now`` as a single call gets: the moment this transaction starts.
        now = timezone.now()
        items = {i: Item(p=prepared[i], ctx=contexts[prepared[i].payload.campaign]) for i in chunk}
        try:
            with transaction.atomic(durable=True):
                ingest_batch(brand=brand, items=list(items.values()), now=now)
                if on_stored is not None:
                    on_stored(items)
        except ComplexBatch:
            # Someone's identity needs writes (a merge, a switched account) that the others would
            # see had they come one by one: so they do, each in its own transaction.
            for i in chunk:
                item = Item(p=prepared[i], ctx=contexts[prepared[i].payload.campaign])
                also = None if on_stored is None else (lambda i=i, item=item: on_stored({i: item}))
                if ingest_one(brand=brand, item=item, now=timezone.now(), also=also):
                    results[i] = _result(item)
            return
        except IntegrityError as exc:
            if not is_duplicate_event(exc):
                raise
            # Someone stored some of these first: they are replays now; run the rest again.
            taken = set(
                TriggerEvent.objects.filter(
                    brand=brand, external_id__in=[prepared[i].payload.external_id for i in chunk]
                ).values_list("external_id", flat=True)
            )
            chunk = [i for i in chunk if prepared[i].payload.external_id not in taken]
            continue
        for i, item in items.items():
            results[i] = _result(item)
        return


def _result(item: Item) -> IngestResult:
    if item.error is not None:
        return IngestResult(None, None, "error", item.error.code, False, error=item.error)
    return IngestResult(item.event, item.reward, item.outcome, item.reason, False)
