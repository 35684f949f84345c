"""Webhooks to brands: endpoints, events, signed deliveries.

Events come from the audit rows the services already write in their own transactions
(RewardEvent, CampaignEvent, PayoutEvent, and the ledger's ``brand_topup`` entries): those rows are
the outbox. ``webhook_events_collect`` (a task right after the commits that write such rows,
``campaigns.webhook_kick``, and every minute as the safety net) turns new rows into one
WebhookEvent per brand with at least one endpoint, and a WebhookDelivery per subscribed endpoint.
``WebhookEvent.source`` is unique per brand, so collecting a row twice emits nothing new.

A row can commit after rows with higher ids (its transaction drew the id first): the collector
re-reads everything above its cursor, and moves the cursor only to an id read in an earlier
snapshot once every transaction that was running then has ended (PostgreSQL snapshots: the
current one's oldest running xid is at or past that snapshot's ``xmax``). A trigger on the outbox
tables gives each inserting transaction its xid before it draws an id, so no writer can hold an
id below the cursor unseen. A writer running longer than ``CURSOR_STUCK_AFTER`` is logged as an
error and the cursor moves on (re-reading an ever longer window every second would not scale).
``webhook_event_emit`` is the same step for callers that want to emit directly, in their own
transaction.

Delivery (``webhook_delivery_attempt``): claim with a conditional UPDATE, POST outside any
transaction, to a public address only (``campaigns.webhook_targets`` checks it at registration
and again against the address actually connected to), with ``JoyBack-Signature: t=<unix>,v1=<hex>``
(HMAC-SHA256 of ``"<t>.<raw body>"``; a second ``v1`` with the previous secret while a rotation is
in its overlap window), record the result in one short transaction. Failures (a refused address
too) retry with exponential backoff until the event is
``WEBHOOK_RETRY_HOURS`` old; an endpoint that has failed without a single success for
``WEBHOOK_DISABLE_AFTER_HOURS`` is disabled and the brand's owners are e-mailed. The payload
``{id, type, created, data}`` keeps the same ``id`` on every attempt: receivers de-duplicate by it.
"""

import hashlib
import hmac
import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

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
from campaigns.webhook_targets import webhook_post, webhook_url_validate
from core.exceptions import InvalidInput, InvalidTransition
from core.queue import enqueue, enqueue_on_commit
from recipients import crypto

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "JoyBack-Signature"
USER_AGENT = "JoyBack-Webhooks/1"
COLLECT_LIMIT = 5000  # rows per read; a collection reads at most COLLECT_PAGES of them per table
COLLECT_PAGES = 20
CURSOR_STUCK_AFTER = timedelta(minutes=10)
SENDING_STALE_AFTER = timedelta(minutes=5)


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
            status=DeliveryStatus.PENDING, next_attempt_at=now, attempt=0
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
            # robust: the endpoint is enabled either way; the minute tick sends what a lost
            # enqueue would have.
            enqueue_on_commit("campaigns.webhook_tasks.webhook_deliveries_enqueue_due_task", robust=True)
    return EndpointEnabled(endpoint=locked, requeued=requeued, expired=expired)


# --- events --------------------------------------------------------------------------------------


def webhook_event_emit(
    *, brand, type: str, data: dict, source: str, now: datetime | None = None
) -> WebhookEvent | None:
    """Record event ``type`` for ``brand`` and a pending delivery for each active endpoint that
    wants it, in the caller's transaction; deliveries are enqueued when it commits. ``source``
    names what caused it (unique per brand): emitting the same source twice returns None."""
    if type not in WEBHOOK_EVENT_TYPES:
        raise InvalidInput(f"Unknown webhook event type {type!r}.", code="invalid_event_types")
    now = now or timezone.now()
    with transaction.atomic():
        event, created = WebhookEvent.objects.get_or_create(
            brand_id=brand if isinstance(brand, int) else brand.pk,
            source=source,
            defaults={"public_id": "evt_" + secrets.token_hex(12), "type": type, "data": data, "created_at": now},
        )
        if not created:
            return None
        # Active endpoints only: enabling a disabled one creates the deliveries of the events it
        # missed inside the retry window (``webhook_endpoint_enable``). The brand's endpoints are
        # first key-share locked, inactive ones too: an enable in progress (FOR UPDATE) makes this
        # wait and the read below see it active — else neither this emit nor that enable's
        # backfill, which cannot see this uncommitted event, would write the delivery. Emits do
        # not block each other, nor the delivery worker's updates. (Django has no FOR KEY SHARE.)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT 1 FROM {WebhookEndpoint._meta.db_table} "  # noqa: S608 - the model's table
                    "WHERE brand_id = %s AND deleted_at IS NULL FOR KEY SHARE",
                    [event.brand_id],
                )
        endpoints = [
            e
            for e in WebhookEndpoint.objects.filter(brand_id=event.brand_id, deleted_at__isnull=True, is_active=True)
            if e.wants(type)
        ]
        deliveries = WebhookDelivery.objects.bulk_create(
            [WebhookDelivery(event=event, endpoint=e, next_attempt_at=now, created_at=now) for e in endpoints]
        )
    ids = [d.pk for d in deliveries]
    if ids:
        for delivery_id in ids:
            enqueue_on_commit("campaigns.webhook_tasks.webhook_delivery_task", delivery_id)
    return event


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
        "reason": row.reason,
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
            id__gt=cursor, to_status__in=("held", "payable", "voided"), reward__campaign__brand_id__in=brands
        )
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


def _collect_payouts(cursor: int, brands: set[int]):
    from payouts.models import PayoutEvent, PayoutItem

    kinds = ("payout.submitted", "payout.settled", "payout.failed", "payout.returned")
    rows = list(
        PayoutEvent.objects.filter(id__gt=cursor, kind__in=kinds)
        .select_related("payout")
        .order_by("id")[:COLLECT_LIMIT]
    )
    items: dict[int, list] = {}
    for item in PayoutItem.objects.filter(
        payout_id__in={r.payout_id for r in rows}, reward__campaign__brand_id__in=brands
    ).values("payout_id", "reward_id", "amount_minor", "reward__campaign__brand_id"):
        items.setdefault(item["payout_id"], []).append(item)
    for row in rows:
        per_brand: dict[int, list] = {}
        for item in items.get(row.payout_id, []):
            per_brand.setdefault(item["reward__campaign__brand_id"], []).append(item)
        payout = row.payout
        yield (
            row.id,
            [
                (
                    brand_id,
                    row.kind,
                    {
                        "payout": {
                            "id": payout.pk,
                            "status": row.to_status,
                            "currency": payout.currency,
                            "amount_minor": sum(i["amount_minor"] for i in brand_items),
                            "reward_ids": [i["reward_id"] for i in brand_items],
                            "reason_code": payout.reason_code,
                        }
                    },
                )
                for brand_id, brand_items in per_brand.items()
            ],
        )


def _collect_topups(cursor: int, brands: set[int]):
    from reconciliation.models import JournalEntry, Posting

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


def _horizon(source: str) -> tuple[int, int, int]:
    """``(top, xmin, xmax)`` of one snapshot: the table's highest visible id, the oldest xid still
    running and the first xid not yet assigned. Elsewhere than PostgreSQL (SQLite: one writer at a
    time, ids visible in order) every id seen is final: ``(top, 0, 0)``."""
    from payouts.models import PayoutEvent
    from reconciliation.models import JournalEntry

    model = {
        "reward_event": RewardEvent,
        "campaign_event": CampaignEvent,
        "payout_event": PayoutEvent,
        "topup": JournalEntry,
    }[source]
    if connection.vendor != "postgresql":
        return model.objects.aggregate(top=Max("id"))["top"] or 0, 0, 0
    with connection.cursor() as cursor:
        # One statement, so the max and the xids describe the same snapshot.
        cursor.execute(
            f"SELECT (SELECT max(id) FROM {model._meta.db_table}), "  # noqa: S608 - a model's table
            "pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint FROM pg_current_snapshot() s"
        )
        top, xmin, xmax = cursor.fetchone()
    return top or 0, xmin, xmax


_COLLECTORS = {
    "reward_event": _collect_rewards,
    "campaign_event": _collect_campaigns,
    "payout_event": _collect_payouts,
    "topup": _collect_topups,
}


def webhook_events_collect(*, now: datetime | None = None) -> int:
    """Emit webhook events for the audit rows written since the last run (see the module
    docstring). Idempotent; safe to run concurrently (the unique source decides). Returns how
    many events were emitted."""
    now = now or timezone.now()
    wanted: dict[int, set[str]] = {}
    # Disabled endpoints count: the cursor moves past these rows for good (see webhook_event_emit).
    live = WebhookEndpoint.objects.filter(deleted_at__isnull=True)
    for brand_id, types in live.values_list("brand_id", "event_types"):
        wanted.setdefault(brand_id, set()).update(types or WEBHOOK_EVENT_TYPES)
    brands = set(wanted)
    emitted = 0
    for source, collect in _COLLECTORS.items():
        cursor, _ = WebhookCursor.objects.get_or_create(source=source)
        top, xmin, xmax = _horizon(source)
        # Before reading: every writer that could still hold an id up to pending_top has ended
        # when the oldest running xid is past the xids of that snapshot; the reads below see them.
        settled = cursor.pending_xmax is not None and xmin >= cursor.pending_xmax
        read_to = top
        if brands:
            after = cursor.last_id
            for _ in range(COLLECT_PAGES):
                found = list(collect(after, brands))
                emitted += _emit_found(source, found, wanted, now=now)
                if len(found) < COLLECT_LIMIT:
                    break
                after = found[-1][0]
            else:
                read_to = after  # more rows than one collection reads: the rest next time
        _cursor_advance(cursor, top=top, xmax=xmax, settled=settled, read_to=read_to, now=now)
    return emitted


def _emit_found(source: str, found: list, wanted: dict[int, set[str]], *, now: datetime) -> int:
    done = set(
        WebhookEvent.objects.filter(  # brand first: the (brand, source) unique index serves it
            brand_id__in=wanted, source__in=[f"{source}:{row_id}" for row_id, _ in found]
        ).values_list("brand_id", "source")
    )
    emitted = 0
    for row_id, emits in found:
        for brand_id, type_, data in emits:
            if (brand_id, f"{source}:{row_id}") in done or type_ not in wanted.get(brand_id, ()):
                continue
            with transaction.atomic():
                if webhook_event_emit(brand=brand_id, type=type_, data=data, source=f"{source}:{row_id}", now=now):
                    emitted += 1
    return emitted


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
    return json.dumps(
        {"id": event.public_id, "type": event.type, "created": event.created_at.isoformat(), "data": event.data},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


def webhook_delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> str:
    """Send one due delivery. Claims it (pending and due → sending, attempt + 1; a second worker
    loses the claim and returns ``skipped``), POSTs outside any transaction, records the answer.
    Returns the new status (or ``skipped``)."""
    now = now or timezone.now()
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now, endpoint__is_active=True
    ).update(status=DeliveryStatus.SENDING, claimed_at=now, attempt=F("attempt") + 1)
    if claimed != 1:
        return "skipped"
    delivery = WebhookDelivery.objects.select_related("event", "endpoint").get(pk=delivery_id)
    body = payload_bytes(delivery.event)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: signature_header(
            secrets_=signing_secrets(delivery.endpoint, now=now), timestamp=int(time.time()), body=body
        ),
        "JoyBack-Event-Id": delivery.event.public_id,
    }
    sent = webhook_post(url=delivery.endpoint.url, body=body, headers=headers, timeout=settings.WEBHOOK_TIMEOUT_SECONDS)
    return _delivery_record(delivery, status=sent.status, snippet=sent.snippet, error=sent.error)


def _delivery_record(delivery: WebhookDelivery, *, status: int | None, snippet: str, error: str) -> str:
    now = timezone.now()
    ok = status is not None and 200 <= status < 300
    notify = None
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=delivery.endpoint_id)
        fields = dict(response_code=status, response_snippet=snippet[:500], error=error[:200], last_attempt_at=now)
        if ok:
            fields.update(status=DeliveryStatus.DELIVERED, delivered_at=now, next_attempt_at=None)
            endpoint.failing_since, endpoint.failure_streak = None, 0
        else:
            if not error:
                fields["error"] = f"HTTP {status}"
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
                notify = endpoint.pk
        WebhookDelivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.SENDING).update(**fields)
        endpoint.save(update_fields=["failing_since", "failure_streak", "is_active", "disabled_at", "disabled_reason"])
        if notify:
            enqueue_on_commit("campaigns.webhook_tasks.webhook_endpoint_disabled_notify_task", notify)
    return fields["status"]


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


def webhook_deliveries_enqueue_due(*, now: datetime | None = None, limit: int = 1000) -> int:
    """Enqueue due deliveries; put deliveries stuck in ``sending`` (a worker died) back to pending."""
    now = now or timezone.now()
    WebhookDelivery.objects.filter(status=DeliveryStatus.SENDING, claimed_at__lt=now - SENDING_STALE_AFTER).update(
        status=DeliveryStatus.PENDING, next_attempt_at=now
    )
    ids = list(
        WebhookDelivery.objects.filter(
            status=DeliveryStatus.PENDING, next_attempt_at__lte=now, endpoint__is_active=True
        )
        .order_by("next_attempt_at")
        .values_list("id", flat=True)[:limit]
    )
    for delivery_id in ids:
        enqueue("campaigns.webhook_tasks.webhook_delivery_task", delivery_id)
    return len(ids)


def webhook_delivery_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Send a delivery again now (delivered or given up alike; the receiver de-duplicates by the
    event id). Raises InvalidTransition while it is being sent or when the endpoint is inactive."""
    now = timezone.now()
    with transaction.atomic():
        moved = WebhookDelivery.objects.filter(
            Q(status__in=(DeliveryStatus.DELIVERED, DeliveryStatus.FAILED, DeliveryStatus.PENDING)),
            pk=delivery.pk,
            endpoint__is_active=True,
        ).update(status=DeliveryStatus.PENDING, next_attempt_at=now, delivered_at=None)
        if moved != 1:
            raise InvalidTransition("This delivery cannot be sent again now (being sent, or the endpoint is disabled).")
        enqueue_on_commit("campaigns.webhook_tasks.webhook_delivery_task", delivery.pk)
    delivery.refresh_from_db()
    return delivery
