"""Combined ingestion: concurrent ``event_ingest`` callers of one campaign share a transaction.

Why: every reservation of a campaign serialises on its tally row, and a single event costs the
same dozen statements and round trips as a batch of fifty (measured: ~10 ms of CPU per event
alone, ~3 ms per event in batches of eight). So callers that arrive together are ingested
together — group commit, as databases do for their own log — by whichever of them gets there
first, through the bulk path (``ingest_prepared``): the same evaluation, event by event in
arrival order, each seeing the ones before it.

Per call (PostgreSQL, the caller in autocommit; anywhere else ``event_ingest`` ingests alone):

1. The prepared event is committed to ``IngestRequest`` (one statement). From here a crash
   loses nothing: the next combiner of the campaign, or the minute sweep, ingests it.
2. The caller takes the campaign's combining lock (a session advisory lock, so waiting costs no
   polling) and, in the same round trip, reads its request. Still pending: it is the combiner —
   it ingests the campaign's pending requests, oldest first, ``BULK_CHUNK`` per transaction,
   until its own is done. Each transaction deletes the requests it stored (or marks those that
   failed) before it commits, so a request is never both stored and still pending.
3. It releases the lock and reads its outcome: the stored event and reward, the error a
   combiner recorded (nothing stored, as ever), or a replay.

A combiner's waiters hold no other lock while they wait (their request is committed), and the
combiner takes the ingest locks in the documented order (``campaigns.locks``): the combining
lock adds no cycle. A batch that fails for an unexpected reason is not retried with others: the
caller then ingests its own request alone and, if that fails too, withdraws it and raises —
one bad event cannot stall a campaign's queue.
"""

import json
import logging
from contextlib import contextmanager
from dataclasses import fields
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

import core.exceptions
from campaigns.models import Campaign, IngestRequest, Reward, TriggerEvent
from campaigns.services.ingest import event_replay, ingest_alone, ingest_one
from campaigns.services.ingest_bulk import BULK_CHUNK, ingest_prepared
from campaigns.services.ingest_reads import ip_key
from campaigns.services.ingest_steps import CampaignContext, campaign_context
from campaigns.services.ingest_types import EventInput, IngestResult, Item, PreparedEvent
from core.bulk import model_columns, model_from_row, queries_run, statements_run
from core.exceptions import ApplicationError, NotFound, TemporaryFailure
from recipients.crypto import decrypt, encrypt
from recipients.normalise import IbanInfo

logger = logging.getLogger(__name__)

_LOCK_CLASS = 7303  # pg_advisory_lock(class, campaign id); 7302 is the IBAN class (locks.py)
_KEY_SQL = "(c.id %% 2147483647)::int4"  # _key() of the campaign row ``c``, in a statement
_TABLE = IngestRequest._meta.db_table
_CAMPAIGNS = Campaign._meta.db_table
_EVENTS = TriggerEvent._meta.db_table
_PENDING, _FAILED, _REPLAYED = IngestRequest.State.PENDING, IngestRequest.State.FAILED, IngestRequest.State.REPLAYED
# A request older than this with nobody combining it was left by a caller that died.
SWEEP_AFTER = timedelta(seconds=10)
ABANDONED_AFTER = timedelta(hours=1)


def combining_available() -> bool:
    """Whether ``event_ingest`` may combine: on PostgreSQL, switched on, and not inside the
    caller's transaction (the request must commit before anyone else can take it)."""
    return connection.vendor == "postgresql" and settings.INGEST_COMBINE and not connection.in_atomic_block


def event_ingest_combined(*, brand, prepared: PreparedEvent) -> IngestResult:
    """``event_ingest`` for one prepared event, combined with concurrent callers (module
    docstring). Same results and errors as ingesting it alone.

    One round trip for a caller whose event another combined: queue, commit, wait for the lock,
    and — still on the server, so the lock passes on without waking this process — release it
    at once when the request is no longer pending and read the outcome."""
    external_id, slug = prepared.payload.external_id, prepared.payload.campaign
    queued, locked, request, events, rewards = [], [], [], [], []
    campaign_key = f"(SELECT {_KEY_SQL} FROM {_CAMPAIGNS} c WHERE c.brand_id = %s AND c.slug = %s)"
    queries_run(
        [
            (_enqueue_statement(brand, prepared), queued.extend),
            # A pipeline is one implicit transaction until its end: commit the request now, so
            # the combiner this caller may wait for sees it, and a crash from here loses nothing.
            (("COMMIT", []), None),
            (
                (
                    f"SELECT c.id, pg_advisory_lock({_LOCK_CLASS}, {_KEY_SQL}) FROM {_CAMPAIGNS} c "  # noqa: S608
                    "WHERE c.brand_id = %s AND c.slug = %s",
                    [brand.pk, slug],
                ),
                locked.extend,
            ),
            _request_and_outcome_read(
                brand,
                external_id,
                request,
                events,
                rewards,
                unlock=(
                    "CASE WHEN r.state = 'pending' THEN NULL "
                    f"ELSE pg_advisory_unlock({_LOCK_CLASS}, {campaign_key}) END",
                    [brand.pk, slug],
                ),
            ),
        ]
    )
    if not locked:
        raise NotFound(f"No campaign {slug!r} for this brand.", code="campaign_not_found")
    campaign_id = locked[0][0]
    # Not queued: a request with this external_id is pending already — a concurrent delivery of
    # the same event, whose outcome this one shares (as a replay).
    ours = bool(queued)
    if request[0][1] != _PENDING:  # done by another combiner; the lock is released already
        return _outcome(brand, prepared, request[0] if request[0][0] else None, events, rewards, ours=ours)
    # This caller combines, then releases the lock and reads its outcome in one round trip.
    with _connection_pinned():
        try:
            _combine_until(brand, campaign_context(brand, slug), request[0][0])
        finally:
            request, events, rewards = [], [], []
            queries_run(
                [
                    (_unlock_statement(campaign_id), None),
                    _request_and_outcome_read(brand, external_id, request, events, rewards),
                ]
            )
    return _outcome(brand, prepared, request[0] if request[0][0] else None, events, rewards, ours=ours)


def _request_and_outcome_read(brand, external_id: str, request: list, events: list, rewards: list, *, unlock=None):
    """One statement, so one snapshot: the request's row (id, state, error, request_hash — all
    None once it is gone) into ``request``, the stored event and its reward, if any, into
    ``events`` / ``rewards`` (rows for ``model_from_row``). ``unlock``: an SQL expression of the
    request row ``r`` with its parameters, evaluated in the same statement (the conditional
    release of the combining lock)."""
    event_at = 5
    reward_at = event_at + len(TriggerEvent._meta.concrete_fields)
    unlock_sql, unlock_params = unlock or ("NULL", [])

    def parse(rows: list[tuple]) -> None:
        (row,) = rows
        request.append(row[:4])
        if row[event_at] is not None:  # the LEFT JOINs found the event …
            events.append(row[event_at:reward_at])
            if row[reward_at] is not None:  # … and its reward
                rewards.append(row[reward_at:])

    query = (
        f"SELECT r.id, r.state, r.error, r.request_hash, {unlock_sql}, "  # noqa: S608 - names from the models
        f"{model_columns(TriggerEvent, 'e')}, {model_columns(Reward, 'rw')} FROM (SELECT 1) one "
        f"LEFT JOIN {_TABLE} r ON r.brand_id = %s AND r.external_id = %s "
        f"LEFT JOIN {_EVENTS} e ON e.brand_id = %s AND e.external_id = %s "
        f"LEFT JOIN {Reward._meta.db_table} rw ON rw.event_id = e.id"
    )
    return (query, [*unlock_params, brand.pk, external_id, brand.pk, external_id]), parse


def ingest_requests_sweep() -> int:
    """Ingest the requests whose callers died before combining them (the minute schedule).
    Skips a campaign someone is combining right now. Returns how many requests it took."""
    if connection.vendor != "postgresql":
        return 0
    cutoff = timezone.now() - SWEEP_AFTER
    # Outcomes nobody came back for (their caller died after the combiner recorded them).
    IngestRequest.objects.exclude(state=_PENDING).filter(created_at__lt=timezone.now() - ABANDONED_AFTER).delete()
    taken = 0
    for campaign_id in (
        IngestRequest.objects.filter(state=_PENDING, created_at__lt=cutoff)
        .values_list("campaign_id", flat=True)
        .distinct()
    ):
        rows: list = []
        queries_run([(("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_CLASS, _key(campaign_id)]), rows.extend)])
        if not rows[0][0]:
            continue
        with _connection_pinned():
            try:
                campaign = Campaign.objects.select_related("brand").get(pk=campaign_id)
                ctx = campaign_context(campaign.brand, campaign.slug)
                try:
                    while ids := _combine_batch(campaign.brand, ctx):
                        taken += len(ids)
                except Exception:
                    # Nobody waits for these: each alone now, and one that still fails is marked
                    # failed (a retry of the partner's takes it over) — never left to fail every
                    # combiner and every sweep of this campaign again.
                    logger.exception("sweep: combined batch of campaign %s failed; one by one", campaign_id)
                    taken += _sweep_one_by_one(campaign.brand, ctx, campaign_id)
            except Exception:  # one campaign's trouble does not stop the sweep of the others
                logger.exception("sweep of campaign %s failed", campaign_id)
            finally:
                queries_run([(_unlock_statement(campaign_id), None)])
    return taken


def _sweep_one_by_one(brand, ctx: CampaignContext, campaign_id: int) -> int:
    pending = IngestRequest.objects.filter(campaign_id=campaign_id, state=_PENDING).order_by("id")
    request_ids = list(pending.values_list("id", flat=True))
    for request_id in request_ids:
        try:
            _ingest_own_request(brand, ctx, request_id, withdraw=False)
        except Exception:
            logger.exception("sweep: request %s could not be ingested; marked failed", request_id)
            # 503, not 400: a database hiccup or a bug, not the event — the partner must retry.
            failure = TemporaryFailure("This event could not be ingested; send it again.", code="ingest_failed")
            statements_run([_fail_statement(request_id, failure)])
    return len(request_ids)


@contextmanager
def _connection_pinned():
    """Keep this connection open while it holds a combining lock. The lock is a session lock,
    and django-q2's enqueue — run by on-commit hooks of every batch (webhook kick, payouts) —
    calls close_old_connections(), which with DB_CONN_MAX_AGE=0 closes the connection and so
    would drop the lock while batches still run."""
    close_at, connection.close_at = connection.close_at, None
    try:
        yield
    finally:
        connection.close_at = close_at


# --- the queue ---------------------------------------------------------------------------------


def _enqueue_statement(brand, prepared: PreparedEvent) -> tuple[str, list]:
    """Commit the request (nothing when the campaign is not the brand's). A failed or replayed
    request left by an earlier caller under this external_id is taken over (it stored nothing,
    or its event is stored and this becomes a replay); a pending one is left alone."""
    return (
        f"INSERT INTO {_TABLE} (brand_id, campaign_id, external_id, request_hash, prepared, state, created_at) "  # noqa: S608
        f"SELECT %s, c.id, %s, %s, %s, 'pending', now() FROM {_CAMPAIGNS} c "
        "WHERE c.brand_id = %s AND c.slug = %s "
        "ON CONFLICT (brand_id, external_id) DO UPDATE SET campaign_id = EXCLUDED.campaign_id, "
        "request_hash = EXCLUDED.request_hash, prepared = EXCLUDED.prepared, state = 'pending', "
        f"error = NULL, created_at = EXCLUDED.created_at WHERE {_TABLE}.state <> 'pending' RETURNING id",
        [
            brand.pk,
            prepared.payload.external_id,
            prepared.request_hash,
            _dump(prepared),
            brand.pk,
            prepared.payload.campaign,
        ],
    )


def _unlock_statement(campaign_id: int) -> tuple[str, list]:
    return "SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, _key(campaign_id)]


def _key(campaign_id: int) -> int:
    """The lock's int4 half for a campaign (two campaigns sharing one only wait for each other):
    ``_KEY_SQL`` computed in Python."""
    return campaign_id % 2147483647


def _combine_until(brand, ctx: CampaignContext, request_id: int) -> None:
    """As the combiner: ingest pending requests, oldest first, until ``request_id`` is done.
    Every pending request of the campaign is taken, not only the older ones: the callers that
    queued on the lock behind this one sent theirs while it waited, and they are the batch."""
    while True:
        try:
            taken = _combine_batch(brand, ctx)
        except Exception:
            # Not retried together with the others: each caller now takes its own alone.
            logger.exception("combined ingest failed; ingesting request %s alone", request_id)
            _ingest_own_request(brand, ctx, request_id)
            return
        if not taken or request_id in taken:
            return


def _combine_batch(brand, ctx: CampaignContext) -> list[int]:
    """Ingest up to ``BULK_CHUNK`` pending requests of the campaign, oldest first, in one
    transaction (more only when identities need it: ``ingest_prepared``). Returns their ids."""
    rows: list = []
    queries_run(
        [
            (
                (
                    # Whether each is stored already (a replay) in the same statement: ingest_prepared
                    # need not look it up again.
                    f"SELECT r.id, r.prepared, r.external_id, EXISTS (SELECT 1 FROM {_EVENTS} e "  # noqa: S608
                    "WHERE e.brand_id = r.brand_id AND e.external_id = r.external_id) "
                    f"FROM {_TABLE} r WHERE r.campaign_id = %s AND r.state = 'pending' "
                    f"ORDER BY r.id LIMIT {BULK_CHUNK}",
                    [ctx.campaign.pk],
                ),
                rows.extend,
            )
        ]
    )
    if not rows:
        return []
    ids = [row[0] for row in rows]
    prepared = {k: _load(row[1]) for k, row in enumerate(rows)}
    stored = {external_id for _, _, external_id, is_stored in rows if is_stored}
    results: list[IngestResult | None] = [None] * len(rows)
    ingest_prepared(
        brand=brand,
        prepared=prepared,
        results=results,
        contexts={p.payload.campaign: ctx for p in prepared.values()},
        on_stored=lambda items: _retire({ids[k]: item for k, item in items.items()}),
        stored=stored,
    )
    # What was not evaluated in a transaction of its own: replays of events stored earlier, and
    # errors found before evaluating (an idempotency conflict). Recorded after. Only a request
    # still pending changes: one its transaction already retired (stored, or refused there and
    # so also an error here) is left as that transaction wrote it.
    statements = []
    for request_id, result in zip(ids, results, strict=True):
        if result is None:
            continue
        if result.replayed:
            statements.append(
                (
                    f"UPDATE {_TABLE} SET state = 'replayed', prepared = '' WHERE id = %s AND state = 'pending'",  # noqa: S608
                    [request_id],
                )
            )
        elif result.error is not None:
            statements.append(_fail_statement(request_id, result.error))
    if statements:
        statements_run(statements)
    return ids


def _retire(items: dict[int, Item]) -> None:
    """In the transaction that evaluated ``items`` (by request id): delete the requests whose
    events it stored, mark those it refused."""
    stored = [request_id for request_id, item in items.items() if item.error is None]
    statements = [_fail_statement(request_id, item.error) for request_id, item in items.items() if item.error]
    if stored:
        statements.append((f"DELETE FROM {_TABLE} WHERE id = ANY(%s)", [stored]))  # noqa: S608
    statements_run(statements)


def _fail_statement(request_id: int, error: ApplicationError) -> tuple[str, list]:
    data = {"class": type(error).__name__, **error.as_dict()}
    return (
        # The event is not needed any more (a retry sends it again): its personal data goes now,
        # not when the row does.
        f"UPDATE {_TABLE} SET state = 'failed', error = %s::jsonb, prepared = '' "  # noqa: S608
        "WHERE id = %s AND state = 'pending'",
        [json.dumps(data, default=str), request_id],
    )


def _ingest_own_request(brand, ctx: CampaignContext, request_id: int, *, withdraw: bool = True) -> None:
    """After a failed batch: this caller's request in its own transaction, as ``event_ingest``
    without combining would. If that fails too, the error is raised — and, with ``withdraw``
    (its caller is there to get the error), the request deleted."""
    row = IngestRequest.objects.filter(pk=request_id, state=_PENDING).values_list("prepared", flat=True).first()
    if row is None:
        return
    item = Item(p=_load(row), ctx=ctx)
    try:
        ingest_one(brand=brand, item=item, now=timezone.now(), also=lambda: _retire({request_id: item}))
    except Exception:
        if withdraw:
            IngestRequest.objects.filter(pk=request_id, state=_PENDING).delete()
        raise


def _outcome(brand, prepared: PreparedEvent, request, events: list, rewards: list, *, ours: bool) -> IngestResult:
    """What became of the request: ``request`` is its row (id, state, error, request_hash) or
    None once its event was stored; ``events`` / ``rewards`` the stored rows, read after it."""
    if request is not None and request[3] == prepared.request_hash and request[1] != _PENDING:
        request_id, state, error, _ = request
        IngestRequest.objects.filter(pk=request_id, state=state).delete()
        if state == _FAILED:
            raise _error(json.loads(error) if isinstance(error, str) else error)
        ours = False  # replayed: the event was stored before
    if not events:
        # Shared another delivery's request and that one failed, or a combiner gave up on it:
        # this payload's own turn, alone, as without combining.
        return ingest_alone(brand=brand, prepared=prepared, now=timezone.now())
    event = model_from_row(TriggerEvent, events[0])
    reward = model_from_row(Reward, rewards[0]) if rewards else None
    # The stored event is this payload's own only if its content is: another delivery under the
    # same external_id (a retry that took over our failed request, or a race our fallback lost)
    # must not be reported as what we sent — it is a replay, or a conflict.
    if not ours or event.request_hash != prepared.request_hash:
        TriggerEvent.reward.related.set_cached_value(event, reward)  # event_replay reads no more
        return event_replay(event, prepared.request_hash)
    return IngestResult(event=event, reward=reward, outcome=event.outcome, reason=event.reason, replayed=False)


def _error(data: dict) -> ApplicationError:
    cls = getattr(core.exceptions, data.get("class", ""), None)
    if not (isinstance(cls, type) and issubclass(cls, ApplicationError)):
        cls = ApplicationError
    return cls(data["message"], details=data.get("details") or {}, code=data["code"])


# --- (de)serialising a prepared event ---------------------------------------------------------

_INPUT_FIELDS = tuple(f.name for f in fields(EventInput))


_PREPARED_FIELDS = tuple(f.name for f in fields(PreparedEvent))


def _dump(prepared: PreparedEvent) -> str:
    """The prepared event sealed (``recipients.crypto.encrypt``): it carries the person's name,
    email, phone and clear IBAN, and the queue is a table like any other — in backups, in the
    admin, readable by whoever can read the database."""
    # Field by field, not asdict(): that deep-copies the evidence only for json to read it.
    data = {name: getattr(prepared, name) for name in _PREPARED_FIELDS}
    data["occurred_at"] = prepared.occurred_at.isoformat()
    payload = data["payload"] = {name: getattr(prepared.payload, name) for name in _INPUT_FIELDS}
    data["iban_info"] = vars(prepared.iban_info) if prepared.iban_info else None
    payload["occurred_at"] = prepared.payload.occurred_at.isoformat() if prepared.payload.occurred_at else None
    return encrypt(json.dumps(data, default=str))


def _load(sealed: str) -> PreparedEvent:
    # Requests queued in clear JSON by the version before sealing (the column was jsonb) start
    # with "{"; a Fernet token never does.
    data = json.loads(sealed if sealed.startswith("{") else decrypt(sealed))
    payload = dict(data["payload"])
    payload["occurred_at"] = _when(payload.get("occurred_at"))
    return PreparedEvent(
        payload=EventInput(**{name: payload[name] for name in _INPUT_FIELDS if name in payload}),
        request_hash=data["request_hash"],
        occurred_at=_when(data["occurred_at"]),
        email=data["email"],
        whatsapp=data["whatsapp"],
        social=data["social"],
        iban_fingerprint=data["iban_fingerprint"],
        # Requests queued before ``ip`` was kept: canonicalise the payload's.
        ip=data["ip"] if "ip" in data else ip_key(payload.get("ip") or ""),
        iban_info=IbanInfo(**data["iban_info"]) if data.get("iban_info") else None,
    )


def _when(value: str | None) -> datetime | None:
    return parse_datetime(value) if value else None
