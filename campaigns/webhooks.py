"""Webhooks to brands: endpoints, events, signed deliveries.

Events come from the audit rows the services already write in their own transactions
(RewardEvent, CampaignEvent, the ledger's ``brand_topup`` entries, and PayoutEvent): those rows are
the outbox. Each outbox table is a ``WebhookCollector`` in a small registry: campaigns registers
its own, payouts its payout events (``payouts.webhook_sources``), each from its AppConfig.ready, so
campaigns never imports payouts. ``webhook_events_collect`` (a task right after the commits that
write such rows, ``campaigns.webhook_kick``, and every minute as the safety net) turns new rows
into one WebhookEvent per brand with at least one endpoint, and a WebhookDelivery per subscribed
endpoint. ``WebhookEvent.source`` is unique per brand, so collecting a row twice emits nothing new.

A row can commit after rows with higher ids (its transaction drew the id first): the collector
re-reads everything above its cursor, and moves the cursor only to an id read in an earlier
snapshot once every transaction that was running then has ended (PostgreSQL snapshots: the
current one's oldest running xid is at or past that snapshot's ``xmax``). A trigger on the outbox
tables gives each inserting transaction its xid before it draws an id, so no writer can hold an
id below the cursor unseen. A writer running longer than ``CURSOR_STUCK_AFTER`` is logged as an
error and the cursor moves on (re-reading an ever longer window every second would not scale).
``webhook_event_emit`` is the same step for callers that want to emit directly, in their own
transaction. A collection is bounded (``COLLECT_BUDGET_SECONDS``, pages of ``COLLECT_LIMIT`` rows,
each page's events and deliveries in one transaction) and leaves the rest to a continuation.

Delivery goes in batches: each task sends up to ``SEND_BATCH`` deliveries of one endpoint (a
1,000-event bulk call to 20 endpoints is ~200 queue rows, not 20,000). A delivery is *queued*
(``queued_at``) from the write that hands it to a task until that task claims it; the tick queues
only deliveries no task holds, so it never adds copies to a backlog. Each delivery
(``webhook_deliveries_send``): claim with a conditional UPDATE, POST outside any
transaction, to a public address only (``campaigns.webhook_targets`` checks it at registration
and again against the address actually connected to), with ``JoyBack-Signature: t=<unix>,v1=<hex>``
(HMAC-SHA256 of ``"<t>.<raw body>"``; a second ``v1`` with the previous secret while a rotation is
in its overlap window), record the result in one short transaction. Failures (a refused address
too) retry with exponential backoff until the event is
``WEBHOOK_RETRY_HOURS`` old; an endpoint that has failed without a single success for
``WEBHOOK_DISABLE_AFTER_HOURS`` is disabled and the brand's owners are e-mailed. The payload
``{id, type, created, livemode, data}`` keeps the same ``id`` on every attempt: receivers de-duplicate by it.
"""

import hashlib
import hmac
import json
import logging
import secrets
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import F, Max, Model, Q
from django.utils import timezone

from campaigns.evaluation import brand_visible_reason
from campaigns.models import (
    WEBHOOK_EVENT_TYPES,
    BrandMembership,
    BrandRole,
    CampaignEvent,
    DeliveryStatus,
    RewardEvent,
    WebhookCursor,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEndpointEvent,
    WebhookEvent,
)
from campaigns.webhook_keep import KeptConnections
from campaigns.webhook_kick import webhook_collect_enqueue
from campaigns.webhook_targets import PostResult, webhook_post, webhook_url_validate
from core.exceptions import InvalidInput, InvalidTransition
from core.locks import WEBHOOK_EMIT_CLASS
from core.queue import enqueue
from recipients import crypto
from recipients.models_consent import ConsentEvent, ConsentEventKind, WithdrawalChannel
from reconciliation.models import JournalEntry, Posting

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "JoyBack-Signature"
USER_AGENT = "JoyBack-Webhooks/1"
COLLECT_LIMIT = 500  # audit rows per read, emitted in one transaction (with up to 20 endpoints: 10,000 deliveries)
COLLECT_BUDGET_SECONDS = 10.0  # then a continuation: far below the 60 s task timeout (Q_CLUSTER)
CURSOR_STUCK_AFTER = timedelta(minutes=10)
SEND_BATCH = 100  # deliveries of one endpoint per send task
SEND_CLAIM = 25  # claimed together, and their answers recorded together
SEND_BUDGET_SECONDS = 10.0  # plus one POST (WEBHOOK_TIMEOUT_SECONDS): far below the task timeout
ENQUEUE_DUE_LIMIT = 5000  # deliveries the tick queues per run
SENDING_STALE_AFTER = timedelta(minutes=5)
# A queued task that has not claimed its deliveries after this long counts as lost (its enqueue
# failed, or it was dropped after failing); well above any queue wait a backlog makes.
QUEUED_STALE_AFTER = timedelta(minutes=10)


@dataclass(frozen=True)
class EndpointWithSecret:
    endpoint: WebhookEndpoint
    secret: str  # shown once


# --- signing -------------------------------------------------------------------------------------


def signature_header(*, secrets_: list[str], timestamp: int, body: bytes) -> str:
    """``t=<timestamp>,v1=<hex>[,v1=<hex>]``: one v1 per secret, current first."""
    signed = f"{timestamp}.".encode() + body
    parts = [f"t={timestamp}"]
    parts += [f"v1={hmac.new(s.encode(), signed, hashlib.sha256).hexdigest()}" for s in secrets_]
    return ",".join(parts)


def signing_secrets(endpoint: WebhookEndpoint, *, now: datetime) -> list[str]:
    keys = [crypto.decrypt(endpoint.secret_ciphertext)]
    if (
        endpoint.previous_secret_ciphertext
        and endpoint.previous_secret_expires_at
        and endpoint.previous_secret_expires_at > now
    ):
        keys.append(crypto.decrypt(endpoint.previous_secret_ciphertext))
    return keys


# --- endpoints -----------------------------------------------------------------------------------


def _secret_new() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def webhook_endpoint_create(*, brand, url: str, event_types: list[str], description: str = "") -> EndpointWithSecret:
    """Register an endpoint with a fresh signing secret (returned once, stored encrypted).
    Raises InvalidInput (``invalid_event_types``; ``invalid_webhook_url`` for anything but an
    https URL on a public address, ``campaigns.webhook_targets``); nothing is created then."""
    if any(t not in WEBHOOK_EVENT_TYPES for t in event_types):
        raise InvalidInput(
            "Unknown event type.", code="invalid_event_types", details={"known": list(WEBHOOK_EVENT_TYPES)}
        )
    secret = _secret_new()
    endpoint = WebhookEndpoint.objects.create(
        brand=brand,
        url=webhook_url_validate(url),
        description=description,
        event_types=sorted(set(event_types)),
        secret_ciphertext=crypto.encrypt(secret),
    )
    return EndpointWithSecret(endpoint=endpoint, secret=secret)


def webhook_endpoint_rotate_secret(*, endpoint: WebhookEndpoint, now: datetime | None = None) -> EndpointWithSecret:
    """New secret at once; the old one keeps signing (second ``v1``) for
    ``WEBHOOK_ROTATION_OVERLAP_HOURS`` so the receiver can switch without losing events."""
    now = now or timezone.now()
    secret = _secret_new()
    with transaction.atomic():
        locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        locked.previous_secret_ciphertext = locked.secret_ciphertext
        locked.previous_secret_expires_at = now + timedelta(hours=settings.WEBHOOK_ROTATION_OVERLAP_HOURS)
        locked.secret_ciphertext = crypto.encrypt(secret)
        locked.rotated_at = now
        locked.save(
            update_fields=[
                "previous_secret_ciphertext",
                "previous_secret_expires_at",
                "secret_ciphertext",
                "rotated_at",
            ]
        )
    return EndpointWithSecret(endpoint=locked, secret=secret)


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Stop delivering to the endpoint; its delivery log stays. Pending deliveries are dropped."""
    now = timezone.now()
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            is_active=False, deleted_at=now, disabled_at=now, disabled_reason="deleted"
        )
        WebhookDelivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.PENDING).update(
            status=DeliveryStatus.FAILED, error="endpoint deleted", next_attempt_at=None
        )


@dataclass(frozen=True)
class EndpointEnabled:
    endpoint: WebhookEndpoint
    requeued: int  # deliveries of the outage due again now
    expired: int  # deliveries of the outage older than the retry window: given up, not sent


ENDPOINT_ENABLE_CHANNELS = ("api", "portal", "admin")


def webhook_endpoint_enable(
    *, endpoint: WebhookEndpoint, channel: str, actor=None, now: datetime | None = None
) -> EndpointEnabled:
    """Activate again an endpoint that was disabled for failing, once the brand has fixed its
    receiver. The failure streak starts from zero; the deliveries the outage left pending or
    failed whose event is younger than ``WEBHOOK_RETRY_HOURS`` are due again at once, and pending
    ones older than that are given up (``failed``) rather than sent days late; an
    ``endpoint.enabled`` audit row records who (``actor``, through ``channel``: api, portal or
    admin) and how many. Idempotent: on an active endpoint it changes nothing and returns
    ``requeued=0``. Raises InvalidTransition (``webhook_endpoint_deleted``) for a deleted
    endpoint. One transaction with the endpoint row locked (the delivery worker disables under
    the same lock); the due deliveries are enqueued when it commits."""
    if channel not in ENDPOINT_ENABLE_CHANNELS:
        raise InvalidInput(f"Unknown channel {channel!r}.")
    now = now or timezone.now()
    window_start = now - timedelta(hours=settings.WEBHOOK_RETRY_HOURS)
    with transaction.atomic():
        locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        if locked.deleted_at is not None:
            raise InvalidTransition(
                "A deleted endpoint cannot be enabled again; register the URL as a new endpoint.",
                code="webhook_endpoint_deleted",
            )
        if locked.is_active:
            return EndpointEnabled(endpoint=locked, requeued=0, expired=0)
        outage = WebhookDelivery.objects.filter(
            endpoint=locked, status__in=(DeliveryStatus.PENDING, DeliveryStatus.FAILED)
        )
        requeued = outage.filter(event__created_at__gt=window_start).update(
            status=DeliveryStatus.PENDING, next_attempt_at=now, attempt=0, queued_at=None
        )
        # Events of the outage itself have no delivery yet (``webhook_event_emit`` writes them for
        # active endpoints only, so a long-disabled endpoint piles nothing up): those inside the
        # retry window get one now, with their original ids.
        missed = [
            WebhookDelivery(event=event, endpoint=locked, next_attempt_at=now, created_at=now)
            for event in WebhookEvent.objects.filter(
                brand_id=locked.brand_id, created_at__gt=max(window_start, locked.created_at)
            ).exclude(deliveries__endpoint=locked)
            if locked.wants(event.type)
        ]
        requeued += len(WebhookDelivery.objects.bulk_create(missed, ignore_conflicts=True))
        expired = outage.filter(status=DeliveryStatus.PENDING, event__created_at__lte=window_start).update(
            status=DeliveryStatus.FAILED,
            next_attempt_at=None,
            error="not sent: older than the retry window when the endpoint was enabled again",
        )
        was = {
            "disabled_at": locked.disabled_at.isoformat() if locked.disabled_at else None,
            "disabled_reason": locked.disabled_reason,
            "failure_streak": locked.failure_streak,
        }
        locked.is_active, locked.disabled_at, locked.disabled_reason = True, None, ""
        locked.failing_since, locked.failure_streak = None, 0
        locked.save(update_fields=["is_active", "disabled_at", "disabled_reason", "failing_since", "failure_streak"])
        WebhookEndpointEvent.objects.create(
            endpoint=locked,
            kind="endpoint.enabled",
            actor=actor,
            channel=channel,
            data={**was, "requeued": requeued, "expired": expired},
            created_at=now,
        )
        if requeued:
            # The minute tick sends them too, should this task never run.
            enqueue("campaigns.webhook_tasks.webhook_deliveries_enqueue_due_task")
    return EndpointEnabled(endpoint=locked, requeued=requeued, expired=expired)


# --- events --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventNew:
    brand_id: int
    type: str
    data: dict
    source: str


def webhook_event_emit(
    *, brand, type: str, data: dict, source: str, now: datetime | None = None
) -> WebhookEvent | None:
    """Record event ``type`` for ``brand`` and a pending delivery for each active endpoint that
    wants it, in the caller's transaction; deliveries are enqueued when it commits. ``source``
    names what caused it (unique per brand): emitting the same source twice returns None."""
    if type not in WEBHOOK_EVENT_TYPES:
        raise InvalidInput(f"Unknown webhook event type {type!r}.", code="invalid_event_types")
    brand_id = brand if isinstance(brand, int) else brand.pk
    emitted = _events_emit(items=[EventNew(brand_id, type, data, source)], now=now or timezone.now())
    return emitted[0] if emitted else None


def _events_emit(*, items: list[EventNew], now: datetime) -> list[WebhookEvent]:
    """The one writer of webhook events and their deliveries (a single emit is a batch of one):
    the events of ``items`` not emitted yet, a delivery per active endpoint that wants each, in
    one transaction (the caller's, if any). The deliveries are created queued and handed, when it
    commits, to send tasks of up to ``SEND_BATCH`` deliveries of one endpoint each."""
    brand_ids = sorted({i.brand_id for i in items})
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                # Collectors running at once (a kick, the tick, a continuation) emit a page in
                # one statement each: per brand, one at a time, so the second sees the first's
                # events as done instead of failing on the unique (brand, source) index.
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(%s, b) FROM unnest(%s::int[]) AS b ORDER BY b",
                    [WEBHOOK_EMIT_CLASS, brand_ids],
                )
                # Active endpoints only: enabling a disabled one creates the deliveries of the
                # events it missed inside the retry window (``webhook_endpoint_enable``). The
                # brands' endpoints are first key-share locked, inactive ones too: an enable in
                # progress (FOR UPDATE) makes this wait and the read below see it active — else
                # neither this emit nor that enable's backfill, which cannot see these uncommitted
                # events, would write the delivery. Emits do not block the delivery worker's
                # updates. (Django has no FOR KEY SHARE.)
                cursor.execute(
                    f"SELECT 1 FROM {WebhookEndpoint._meta.db_table} "  # noqa: S608 - the model's table
                    "WHERE brand_id = ANY(%s) AND deleted_at IS NULL FOR KEY SHARE",
                    [brand_ids],
                )
        done = set(
            WebhookEvent.objects.filter(  # brand first: the (brand, source) unique index serves it
                brand_id__in=brand_ids, source__in=[i.source for i in items]
            ).values_list("brand_id", "source")
        )
        new = []
        for item in items:
            if (item.brand_id, item.source) not in done:
                done.add((item.brand_id, item.source))
                new.append(item)
        if not new:
            return []
        events = WebhookEvent.objects.bulk_create(
            [
                WebhookEvent(
                    public_id="evt_" + secrets.token_hex(12),
                    brand_id=i.brand_id,
                    type=i.type,
                    data=i.data,
                    source=i.source,
                    created_at=now,
                )
                for i in new
            ]
        )
        endpoints: dict[int, list[WebhookEndpoint]] = {}
        for endpoint in WebhookEndpoint.objects.filter(brand_id__in=brand_ids, deleted_at__isnull=True, is_active=True):
            endpoints.setdefault(endpoint.brand_id, []).append(endpoint)
        deliveries = WebhookDelivery.objects.bulk_create(
            [
                WebhookDelivery(event=event, endpoint=e, next_attempt_at=now, queued_at=now, created_at=now)
                for event in events
                for e in endpoints.get(event.brand_id, ())
                if e.wants(event.type)
            ],
            batch_size=2000,
        )
        _send_tasks_enqueue([(d.endpoint_id, d.pk) for d in deliveries])
    return events


# --- collectors ----------------------------------------------------------------------------------

Emit = tuple[int, str, dict]  # (brand id, event type, data)


@dataclass(frozen=True)
class WebhookCollector:
    """One outbox table. ``name`` keys its ``WebhookCursor`` and prefixes the events' ``source``
    (never rename it: the cursor and the emitted sources would start over). ``model`` is the table
    whose ids the cursor follows. ``collect(cursor, brands)`` reads only: up to ``COLLECT_LIMIT``
    rows with an id above ``cursor``, in id order, each as ``(row id, [Emit, …])`` for the brands
    of ``brands`` (an empty list for a row that emits nothing: it still counts as read).
    Collectors run in ``order``."""

    name: str
    model: type[Model]
    collect: Callable[[int, set[int]], Iterable[tuple[int, list[Emit]]]]
    order: int


_COLLECTORS: dict[str, WebhookCollector] = {}


def webhook_collector_register(collector: WebhookCollector) -> WebhookCollector:
    """Add (or replace, by name) an outbox table. Called from AppConfig.ready()."""
    _COLLECTORS[collector.name] = collector
    return collector


def webhook_collectors() -> list[WebhookCollector]:
    return sorted(_COLLECTORS.values(), key=lambda c: (c.order, c.name))


def _reward_data(row: RewardEvent) -> dict:
    reward = row.reward
    return {
        "reward": {
            "id": reward.pk,
            "campaign": reward.campaign.slug,
            "event_external_id": reward.event.external_id,
            "person": reward.person_id,
            "amount_minor": reward.amount_minor,
            "fee_minor": reward.fee_minor,
            "currency": reward.currency,
            "status": row.to_status,
            "matures_at": reward.matures_at.isoformat(),
        },
        "previous_status": row.from_status,
        "reason": brand_visible_reason(row.reason),
        **{k: v for k, v in (row.data or {}).items() if k == "returned_to"},
        # Why an undone action voided it (``UndoneReason``): "content_removed", "optin_withdrawn" …
        **(
            {"undone_reason": row.data["undone"]}
            if (row.data or {}).get("undone") and row.to_status == "voided"
            else {}
        ),
    }


def _campaign_data(row: CampaignEvent) -> dict:
    campaign = row.campaign
    return {
        "campaign": {"id": campaign.pk, "slug": campaign.slug, "status": row.to_status},
        "reason": row.reason,
        **{
            k: v
            for k, v in (row.data or {}).items()
            if k in ("threshold_pct", "funded_minor", "spent_minor", "available_minor", "automatic")
        },
    }


def _collect_rewards(cursor: int, brands: set[int]):
    rows = (
        RewardEvent.objects.filter(
            id__gt=cursor,
            to_status__in=("held", "payable", "voided", "expired"),
            reward__campaign__brand_id__in=brands,
        )
        # A note that a matured reward's action was undone changes no status: nothing to announce.
        .exclude(kind="reward.undone_noted")
        .select_related("reward__campaign", "reward__event")
        .order_by("id")[:COLLECT_LIMIT]
    )
    for row in rows:
        yield row.id, [(row.reward.campaign.brand_id, f"reward.{row.to_status}", _reward_data(row))]


def _collect_campaigns(cursor: int, brands: set[int]):
    rows = (
        CampaignEvent.objects.filter(
            id__gt=cursor, kind__in=("campaign.paused", "campaign.budget_threshold"), campaign__brand_id__in=brands
        )
        .select_related("campaign")
        .order_by("id")[:COLLECT_LIMIT]
    )
    for row in rows:
        yield row.id, [(row.campaign.brand_id, row.kind, _campaign_data(row))]


def _collect_topups(cursor: int, brands: set[int]):
    rows = list(
        JournalEntry.objects.filter(
            id__gt=cursor, kind="brand_topup", reference_type="brand", reference_id__in=[str(b) for b in brands]
        ).order_by("id")[:COLLECT_LIMIT]
    )
    credits = {
        p["entry_id"]: p
        for p in Posting.objects.filter(entry_id__in=[r.id for r in rows], amount_minor__lt=0).values(
            "entry_id", "amount_minor", "currency"
        )
    }
    for row in rows:
        credit = credits.get(row.id)
        if credit is None:
            # Still a row read: the page's length tells the collector whether there are more.
            yield row.id, []
            continue
        yield (
            row.id,
            [
                (
                    int(row.reference_id),
                    "topup.received",
                    {"amount_minor": -credit["amount_minor"], "currency": credit["currency"], "memo": row.memo},
                )
            ],
        )


def _collect_consents(cursor: int, brands: set[int]):
    """``person.consent_given`` / ``person.consent_withdrawn`` from the consent trail. Ids only:
    the brand reads the contact from ``GET /api/v1/contacts/`` while the consent lasts, so no
    webhook copy of a name or address outlives a withdrawal or an erasure. A consent replaced by
    one to newer words is not a withdrawal: its row emits nothing. A pending consent (double
    opt-in) is the brand's only once confirmed: ``consent.confirmed`` is its "given", and its
    ``consent.pending`` and ``consent.cancelled`` rows are not collected at all."""
    announced = (ConsentEventKind.GIVEN, ConsentEventKind.CONFIRMED, ConsentEventKind.WITHDRAWN)
    rows = ConsentEvent.objects.filter(id__gt=cursor, kind__in=announced, brand_id__in=brands).order_by("id")[
        :COLLECT_LIMIT
    ]
    for row in rows:
        if row.channel == WithdrawalChannel.SUPERSEDED:
            yield row.id, []
            continue
        given = row.kind != ConsentEventKind.WITHDRAWN
        data = {
            "person": row.person_id,
            "consent": {"id": row.consent_id, "version": row.data.get("version", ""), "channel": row.channel},
        }
        yield row.id, [(row.brand_id, "person.consent_given" if given else "person.consent_withdrawn", data)]


# Campaigns' own outbox tables, registered in CampaignsConfig.ready; payouts adds payout events
# between them (order 30).
COLLECTORS = (
    WebhookCollector(name="reward_event", model=RewardEvent, collect=_collect_rewards, order=10),
    WebhookCollector(name="campaign_event", model=CampaignEvent, collect=_collect_campaigns, order=20),
    WebhookCollector(name="topup", model=JournalEntry, collect=_collect_topups, order=40),
    WebhookCollector(name="consent_event", model=ConsentEvent, collect=_collect_consents, order=50),
)


def _horizon(model: type[Model]) -> tuple[int, int, int]:
    """``(top, xmin, xmax)`` of one snapshot: the table's highest visible id, the oldest xid still
    running in this database and the first xid not yet assigned. Elsewhere than PostgreSQL
    (SQLite: one writer at a time, ids visible in order) every id seen is final: ``(top, 0, 0)``."""
    if connection.vendor != "postgresql":
        return model.objects.aggregate(top=Max("id"))["top"] or 0, 0, 0
    with connection.cursor() as cursor:
        # One statement, so the max and the xids describe the same moment. Only this database's
        # transactions can write our tables: the snapshot's own xmin would wait for every
        # database of the server, and a long transaction elsewhere would hold the webhooks back.
        cursor.execute(
            f"SELECT (SELECT max(id) FROM {model._meta.db_table}), "  # noqa: S608 - a model's table
            "pg_snapshot_xmax(s)::text::bigint, "
            "(SELECT min(x::text::bigint) FROM ("
            "  SELECT backend_xid AS x FROM pg_stat_activity"
            "  WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL"
            "  UNION ALL SELECT transaction FROM pg_prepared_xacts WHERE database = current_database()) running) "
            "FROM pg_current_snapshot() s"
        )
        top, xmax, oldest = cursor.fetchone()
    return top or 0, _full_xid(oldest, xmax) if oldest is not None else xmax, xmax


def _full_xid(xid32: int, xmax: int) -> int:
    """A running transaction's 32-bit xid as the 64-bit xid of the snapshots: it is older than
    ``xmax``, so it belongs to xmax's epoch or, past a wraparound, to the one before."""
    full = (xmax >> 32 << 32) | xid32
    return full - (1 << 32) if full > xmax else full


def webhook_events_collect(*, now: datetime | None = None, budget_seconds: float | None = None) -> int:
    """Emit webhook events for the audit rows written since the last run (see the module
    docstring). Idempotent; safe to run concurrently (the unique source decides, and page emits
    of one brand take turns). Bounded: it reads no new page after ``budget_seconds``
    (``COLLECT_BUDGET_SECONDS``, shared between the tables) and then enqueues a continuation
    (``webhook_collect_enqueue``), so no run comes near the task timeout however large the
    backlog. Returns how many events were emitted."""
    now = now or timezone.now()
    budget = COLLECT_BUDGET_SECONDS if budget_seconds is None else budget_seconds
    deadline = time.monotonic() + budget
    # This run reads every row a queued collection would: that one need not hold others back.
    WebhookCursor.objects.filter(queued_at__isnull=False).update(queued_at=None)
    wanted: dict[int, set[str]] = {}
    # Disabled endpoints count: the cursor moves past these rows for good (see webhook_event_emit).
    live = WebhookEndpoint.objects.filter(deleted_at__isnull=True)
    for brand_id, types in live.values_list("brand_id", "event_types"):
        wanted.setdefault(brand_id, set()).update(types or WEBHOOK_EVENT_TYPES)
    brands = set(wanted)
    emitted = 0
    unfinished = False
    collectors = webhook_collectors()
    for n, collector in enumerate(collectors):
        # Each table gets its share of what is left, so one table's backlog cannot starve the rest.
        share = time.monotonic() + max(0.0, deadline - time.monotonic()) / (len(collectors) - n)
        cursor, _ = WebhookCursor.objects.get_or_create(source=collector.name)
        top, xmin, xmax = _horizon(collector.model)
        # Before reading: every writer that could still hold an id up to pending_top has ended
        # when the oldest running xid is past the xids of that snapshot; the reads below see them.
        settled = cursor.pending_xmax is not None and xmin >= cursor.pending_xmax
        read_to = top
        if brands:
            after = cursor.last_id
            while True:
                found = list(collector.collect(after, brands))
                emitted += _emit_found(collector.name, found, wanted, now=now)
                if len(found) < COLLECT_LIMIT:
                    break
                after = found[-1][0]
                if time.monotonic() >= share:
                    read_to, unfinished = after, True  # the rest next time
                    break
        _cursor_advance(cursor, top=top, xmax=xmax, settled=settled, read_to=read_to, now=now)
    if unfinished:
        webhook_collect_enqueue(now=now)
    return emitted


def _emit_found(source: str, found: list, wanted: dict[int, set[str]], *, now: datetime) -> int:
    items = [
        EventNew(brand_id, type_, data, f"{source}:{row_id}")
        for row_id, emits in found
        for brand_id, type_, data in emits
        if type_ in wanted.get(brand_id, ())
    ]
    return len(_events_emit(items=items, now=now)) if items else 0


def _cursor_advance(cursor: WebhookCursor, *, top: int, xmax: int, settled: bool, read_to: int, now: datetime) -> None:
    """Move ``last_id`` to the pending top once settled (never past what this collection read)
    and make this snapshot the pending one. Under the cursor's row lock: concurrent collectors
    only ever raise ``last_id``, and one that lost the race leaves the newer pending alone."""
    final = cursor.last_id
    renew = cursor.pending_xmax is None or settled
    if settled:
        final = min(cursor.pending_top, read_to)
    elif cursor.pending_since is not None and cursor.pending_since < now - CURSOR_STUCK_AFTER:
        # A writer has been running for minutes: rows it commits below this id will not be sent.
        logger.error(
            "webhook collector: %s rows up to id %s still had writers running after %s; moving on",
            cursor.source,
            cursor.pending_top,
            CURSOR_STUCK_AFTER,
        )
        final, renew = min(cursor.pending_top, read_to), True
    with transaction.atomic():
        current = WebhookCursor.objects.select_for_update().get(source=cursor.source)
        changed = []
        if final > current.last_id:
            current.last_id = final
            changed.append("last_id")
        if renew and current.pending_xmax == cursor.pending_xmax:
            current.pending_top, current.pending_xmax, current.pending_since = top, xmax, now
            changed += ["pending_top", "pending_xmax", "pending_since"]
        if changed:
            current.save(update_fields=[*changed, "updated_at"])


# --- delivery ------------------------------------------------------------------------------------


def backoff(attempt: int) -> timedelta:
    """30 s, 1 min, 2 min … doubling, at most 6 h between attempts (about 20 attempts in 72 h)."""
    return timedelta(seconds=min(30 * 2 ** max(0, attempt - 1), 6 * 3600))


def payload_bytes(event: WebhookEvent) -> bytes:
    """The signed body. ``livemode`` is false for a test tenant's events (issue 28), as the
    ``JoyBack-Livemode`` header says, so a receiver can tell test traffic before reading ``data``."""
    return json.dumps(
        {
            "id": event.public_id,
            "type": event.type,
            "created": event.created_at.isoformat(),
            "livemode": event.brand.livemode,
            "data": event.data,
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


SEND_TASK = "campaigns.webhook_tasks.webhook_deliveries_send_task"


def _send_tasks(pairs: list[tuple[int, int]]) -> list[list[int]]:
    """``(endpoint id, delivery id)`` pairs → lists of up to ``SEND_BATCH`` delivery ids of one
    endpoint each, in id order (so events reach an endpoint roughly in the order they happened)."""
    by_endpoint: dict[int, list[int]] = {}
    for endpoint_id, delivery_id in sorted(pairs):
        by_endpoint.setdefault(endpoint_id, []).append(delivery_id)
    return [ids[i : i + SEND_BATCH] for ids in by_endpoint.values() for i in range(0, len(ids), SEND_BATCH)]


def _send_tasks_enqueue(pairs: list[tuple[int, int]]) -> None:
    # Should a task never run, the tick sends its deliveries once they are QUEUED_STALE_AFTER old.
    for ids in _send_tasks(pairs):
        enqueue(SEND_TASK, ids)


@dataclass(frozen=True)
class DeliveriesSent:
    statuses: dict[int, str]  # delivery id → delivered / pending / failed, for those attempted
    continued: int  # handed to a follow-up task: this one's time was up
    released: int  # not attempted: the endpoint stopped answering; the tick sends them later


def webhook_deliveries_send(
    *, delivery_ids: list[int], now: datetime | None = None, budget_seconds: float | None = None
) -> DeliveriesSent:
    """Send the due ones of ``delivery_ids``, ``SEND_CLAIM`` at a time: claim them (pending and
    due → sending, attempt + 1, no longer queued; one a second worker has claimed is skipped),
    POST each outside any transaction, record the answers together in one short transaction.
    Bounded, so no task comes near the task timeout: after ``budget_seconds``
    (``SEND_BUDGET_SECONDS``) the ones not yet sent go to a follow-up task; when the endpoint
    gives no HTTP answer (refused, timed out) the rest are left to the tick rather than waiting
    out a timeout each. ``now`` fixes "due" (tests); the claim time is the clock's."""
    budget = SEND_BUDGET_SECONDS if budget_seconds is None else budget_seconds
    deadline = time.monotonic() + budget
    with KeptConnections() as kept:
        return _deliveries_send(delivery_ids, now=now, deadline=deadline, kept=kept)


def _deliveries_send(
    delivery_ids: list[int], *, now: datetime | None, deadline: float, kept: KeptConnections
) -> DeliveriesSent:
    statuses: dict[int, str] = {}
    rest = list(delivery_ids)
    while rest:
        chunk, rest = rest[:SEND_CLAIM], rest[SEND_CLAIM:]
        claimed = _deliveries_claim(ids=chunk, due_at=now or timezone.now())
        results: list[tuple[WebhookDelivery, PostResult]] = []
        unanswered = False
        for delivery in claimed:
            results.append((delivery, _delivery_post(delivery, kept=kept)))
            if results[-1][1].status is None:
                unanswered = True
                break
            if time.monotonic() >= deadline:
                break
        unsent = claimed[len(results) :]
        statuses.update(_deliveries_record(results, unsent=unsent))
        if unanswered:
            released = [d.pk for d in unsent] + rest
            # Claimed ones went back to pending above; the others were still marked queued.
            WebhookDelivery.objects.filter(pk__in=rest, queued_at__isnull=False).update(queued_at=None)
            return DeliveriesSent(statuses=statuses, continued=0, released=len(released))
        if time.monotonic() >= deadline and (unsent or rest):
            later = [d.pk for d in unsent] + rest
            _deliveries_continue(later)
            return DeliveriesSent(statuses=statuses, continued=len(later), released=0)
    return DeliveriesSent(statuses=statuses, continued=0, released=0)


def webhook_delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> str:
    """Send one due delivery (a batch of one, ``webhook_deliveries_send``). Returns its new
    status, or ``skipped`` when it was not claimed (not due, being sent, endpoint inactive)."""
    return webhook_deliveries_send(delivery_ids=[delivery_id], now=now).statuses.get(delivery_id, "skipped")


def _deliveries_claim(*, ids: list[int], due_at: datetime) -> list[WebhookDelivery]:
    claim_at = timezone.now()
    with transaction.atomic():
        mine = list(
            WebhookDelivery.objects.filter(
                pk__in=ids, status=DeliveryStatus.PENDING, next_attempt_at__lte=due_at, endpoint__is_active=True
            )
            .select_for_update(skip_locked=True, of=("self",))
            .values_list("pk", flat=True)
        )
        WebhookDelivery.objects.filter(pk__in=mine).update(
            status=DeliveryStatus.SENDING, claimed_at=claim_at, attempt=F("attempt") + 1, queued_at=None
        )
        # The ones not claimable (delivered meanwhile, endpoint disabled, not due) are no longer
        # queued either: this task was their ticket. Rows another claimer holds are left alone.
        WebhookDelivery.objects.filter(pk__in=ids, queued_at__isnull=False).exclude(
            status=DeliveryStatus.SENDING
        ).update(queued_at=None)
    return list(WebhookDelivery.objects.filter(pk__in=mine).select_related("event__brand", "endpoint").order_by("pk"))


def _delivery_post(delivery: WebhookDelivery, *, kept: KeptConnections) -> PostResult:
    body = payload_bytes(delivery.event)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: signature_header(
            secrets_=signing_secrets(delivery.endpoint, now=timezone.now()), timestamp=int(time.time()), body=body
        ),
        "JoyBack-Event-Id": delivery.event.public_id,
        "JoyBack-Livemode": "true" if delivery.event.brand.livemode else "false",
    }
    return webhook_post(
        url=delivery.endpoint.url, body=body, headers=headers, timeout=settings.WEBHOOK_TIMEOUT_SECONDS, kept=kept
    )


def _deliveries_continue(ids: list[int]) -> None:
    """Hand ``ids`` to a follow-up task: still queued (the clock restarts), claimed ones pending."""
    now = timezone.now()
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk__in=ids, status=DeliveryStatus.SENDING).update(
            status=DeliveryStatus.PENDING, attempt=F("attempt") - 1, next_attempt_at=now
        )
        WebhookDelivery.objects.filter(pk__in=ids, status=DeliveryStatus.PENDING).update(queued_at=now)
        enqueue(SEND_TASK, ids)


def _deliveries_record(
    results: list[tuple[WebhookDelivery, PostResult]], *, unsent: list[WebhookDelivery]
) -> dict[int, str]:
    """Record a chunk's answers in one transaction, under the endpoints' row locks (ascending;
    enabling and disabling take the same lock). ``unsent``: claimed but not sent (the time was
    up or the endpoint stopped answering) — pending again, the attempt not counted."""
    now = timezone.now()
    statuses: dict[int, str] = {}
    notify: list[int] = []
    answered = [(d, sent, sent.status is not None and 200 <= sent.status < 300) for d, sent in results]
    with transaction.atomic():
        endpoint_ids = sorted({d.endpoint_id for d, _ in results} | {d.endpoint_id for d in unsent})
        # Every answer a success to endpoints with no failure on record changes no endpoint: their
        # rows are not locked, so busy workers sending to one endpoint do not queue on it.
        quiet = all(ok for _, _, ok in answered) and not (
            WebhookEndpoint.objects.filter(pk__in=endpoint_ids)
            .filter(Q(failing_since__isnull=False) | Q(failure_streak__gt=0))
            .exists()
        )
        endpoints = (
            {}
            if quiet
            else {
                e.pk: e for e in WebhookEndpoint.objects.select_for_update().filter(pk__in=endpoint_ids).order_by("pk")
            }
        )
        updates: dict[tuple, list[int]] = defaultdict(list)
        for delivery, sent, ok in answered:
            fields = dict(
                response_code=sent.status,
                response_snippet=sent.snippet[:500],
                error=sent.error[:200],
                last_attempt_at=now,
            )
            if ok:
                fields.update(status=DeliveryStatus.DELIVERED, delivered_at=now, next_attempt_at=None)
                if not quiet:
                    endpoint = endpoints[delivery.endpoint_id]
                    endpoint.failing_since, endpoint.failure_streak = None, 0
            else:
                endpoint = endpoints[delivery.endpoint_id]
                if not sent.error:
                    fields["error"] = f"HTTP {sent.status}"
                give_up = now - delivery.event.created_at >= timedelta(hours=settings.WEBHOOK_RETRY_HOURS)
                if give_up:
                    fields.update(status=DeliveryStatus.FAILED, next_attempt_at=None)
                else:
                    fields.update(status=DeliveryStatus.PENDING, next_attempt_at=now + backoff(delivery.attempt))
                endpoint.failing_since = endpoint.failing_since or now
                endpoint.failure_streak += 1
                if endpoint.is_active and now - endpoint.failing_since >= timedelta(
                    hours=settings.WEBHOOK_DISABLE_AFTER_HOURS
                ):
                    endpoint.is_active, endpoint.disabled_at = False, now
                    endpoint.disabled_reason = f"failing since {endpoint.failing_since:%Y-%m-%d %H:%M} UTC"
                    WebhookEndpointEvent.objects.create(
                        endpoint=endpoint,
                        kind="endpoint.disabled",
                        channel="worker",
                        reason=endpoint.disabled_reason,
                        data={"failure_streak": endpoint.failure_streak},
                        created_at=now,
                    )
                    notify.append(endpoint.pk)
            # Deliveries with the same answer are recorded by one UPDATE (a chunk to one endpoint
            # usually gets one answer): a statement per answer, not per delivery.
            updates[tuple(sorted(fields.items()))].append(delivery.pk)
            statuses[delivery.pk] = fields["status"]
        for fields, ids in updates.items():
            WebhookDelivery.objects.filter(pk__in=ids, status=DeliveryStatus.SENDING).update(**dict(fields))
        if unsent:
            WebhookDelivery.objects.filter(pk__in=[d.pk for d in unsent], status=DeliveryStatus.SENDING).update(
                status=DeliveryStatus.PENDING, attempt=F("attempt") - 1, next_attempt_at=now
            )
        for endpoint in endpoints.values():
            endpoint.save(
                update_fields=["failing_since", "failure_streak", "is_active", "disabled_at", "disabled_reason"]
            )
        for endpoint_id in notify:
            enqueue("campaigns.webhook_tasks.webhook_endpoint_disabled_notify_task", endpoint_id)
    return statuses


def webhook_endpoint_disabled_notify(*, endpoint_id: int) -> int:
    """E-mail the brand's owners and admins that an endpoint was disabled. Returns mails sent."""
    endpoint = WebhookEndpoint.objects.select_related("brand").get(pk=endpoint_id)
    # Only "enabled again before this task ran" cancels the mail. A late 2xx of a delivery sent
    # before the endpoint was disabled clears ``failing_since`` but leaves it disabled: the brand
    # must still be told, so the mail says when it was disabled, not since when it failed.
    if endpoint.is_active or endpoint.disabled_at is None:
        return 0
    emails = sorted(
        set(
            BrandMembership.objects.filter(brand=endpoint.brand, role__in=(BrandRole.OWNER, BrandRole.ADMIN))
            .exclude(user__email="")
            .values_list("user__email", flat=True)
        )
    )
    if not emails:
        logger.warning("webhook endpoint %s disabled; brand %s has no owner e-mail", endpoint.pk, endpoint.brand_id)
        return 0
    send_mail(
        subject=f"[JoyBack] Webhook endpoint disabled: {endpoint.url}",
        message=(
            f"Deliveries to {endpoint.url} kept failing ({endpoint.disabled_reason}), so the endpoint was "
            f"disabled at {endpoint.disabled_at:%Y-%m-%d %H:%M} UTC. Fix the receiver, then enable the endpoint "
            "again: on the portal's Webhooks page (the endpoint's deliveries, 'Enable again') or with "
            f"POST /api/v1/webhook-endpoints/{endpoint.pk}/enable/. "
            f"Events of the last {settings.WEBHOOK_RETRY_HOURS} hours are then sent again with their original ids; "
            "older ones stay in the endpoint's delivery log, where each can be redelivered."
        ),
        from_email=None,
        recipient_list=emails,
    )
    return len(emails)


def webhook_deliveries_enqueue_due(*, now: datetime | None = None, limit: int = ENQUEUE_DUE_LIMIT) -> int:
    """Hand due deliveries that no queued task holds to send tasks (``SEND_BATCH`` of one
    endpoint each); put deliveries stuck in ``sending`` (a worker died) back to pending. A
    delivery is queued by the same conditional UPDATE that marks it (``queued_at``), so however
    often this runs it never queues one twice — except one queued for longer than
    ``QUEUED_STALE_AFTER``, whose task counts as lost. Returns how many deliveries it queued."""
    now = now or timezone.now()
    WebhookDelivery.objects.filter(status=DeliveryStatus.SENDING, claimed_at__lt=now - SENDING_STALE_AFTER).update(
        status=DeliveryStatus.PENDING, next_attempt_at=now
    )
    with transaction.atomic():
        pairs = list(
            WebhookDelivery.objects.filter(
                Q(queued_at__isnull=True) | Q(queued_at__lt=now - QUEUED_STALE_AFTER),
                status=DeliveryStatus.PENDING,
                next_attempt_at__lte=now,
                endpoint__is_active=True,
            )
            .order_by("next_attempt_at")
            .select_for_update(skip_locked=True, of=("self",))
            .values_list("endpoint_id", "id")[:limit]
        )
        WebhookDelivery.objects.filter(pk__in=[delivery_id for _, delivery_id in pairs]).update(queued_at=now)
        _send_tasks_enqueue(pairs)
    return len(pairs)


def webhook_delivery_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Send a delivery again now (delivered or given up alike; the receiver de-duplicates by the
    event id). Raises InvalidTransition while it is being sent or when the endpoint is inactive."""
    now = timezone.now()
    with transaction.atomic():
        moved = WebhookDelivery.objects.filter(
            Q(status__in=(DeliveryStatus.DELIVERED, DeliveryStatus.FAILED, DeliveryStatus.PENDING)),
            pk=delivery.pk,
            endpoint__is_active=True,
        ).update(status=DeliveryStatus.PENDING, next_attempt_at=now, delivered_at=None, queued_at=now)
        if moved != 1:
            raise InvalidTransition("This delivery cannot be sent again now (being sent, or the endpoint is disabled).")
        enqueue(SEND_TASK, [delivery.pk])
    delivery.refresh_from_db()
    return delivery
