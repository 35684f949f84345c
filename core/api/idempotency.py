"""Idempotency-Key for POST and PATCH.

1. ``idempotency_claim`` inserts the key's row (status ``in_flight``) in its own short transaction
   *before* the work (``INSERT … ON CONFLICT DO NOTHING``). The unique constraint on (brand, key)
   decides between concurrent requests: exactly one inserts, the others find its row and get 409
   while it is in flight.
2. The view does the work (its services own their transactions).
3. ``idempotency_complete`` stores the response (status, body, content type) on the row, or
   ``idempotency_release`` deletes the row when the work ended in a server error, so a retry runs
   again instead of replaying a 500.

A later request with the same key and the same method, path and body (sha256 of the raw bytes)
gets the stored response again; with anything different it gets 422. Rows live at least
``IDEMPOTENCY_TTL_HOURS``; an expired row is replaced. A row left ``in_flight`` by a crashed worker
is taken over after ``IDEMPOTENCY_IN_FLIGHT_TIMEOUT_SECONDS`` (only safe because the work behind
every endpoint is idempotent on its own: events by external_id, transitions by state).
"""

import functools
import hashlib
import re
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.exceptions import ApplicationError, Conflict
from core.models import IdempotencyRecord, IdempotencyStatus

MAX_KEY_LENGTH = 255
# Visible ASCII: what an HTTP header carries unchanged through proxies and the WSGI server's
# latin-1 decoding (spaces at either end would be stripped on the way). The OpenAPI schema
# declares this pattern (core.api.schema).
KEY_PATTERN = rf"^[!-~]{{1,{MAX_KEY_LENGTH}}}$"
_KEY = re.compile(KEY_PATTERN)


class IdempotencyKeyReused(ApplicationError):
    code = "idempotency_key_reused"
    http_status = 422


class IdempotencyInFlight(Conflict):
    code = "idempotency_in_flight"


@dataclass(frozen=True)
class Claim:
    record: IdempotencyRecord
    replay: bool  # True: ``record`` holds the stored response to send again


_TABLE = IdempotencyRecord._meta.db_table


@functools.cache
def _claim_sql() -> str:
    return (
        f"INSERT INTO {_TABLE} (brand_id, key, method, path, request_hash, status, response_content_type, "  # noqa: S608
        "created_at, expires_at) VALUES (%s, %s, %s, %s, %s, %s, '', %s, %s) "
        "ON CONFLICT (brand_id, key) DO NOTHING RETURNING id"
    )


def _stored_time(value):
    """A datetime as the ORM stores it (raw SQL skips that step): on SQLite naive UTC text, which
    the ORM's own comparisons — the stale in-flight takeover on ``created_at`` — must match."""
    return connection.ops.adapt_datetimefield_value(value)


def _ttl() -> timedelta:
    return timedelta(hours=settings.IDEMPOTENCY_TTL_HOURS)


def key_validate(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise ApplicationError(
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} visible ASCII characters (no spaces).",
            code="invalid_idempotency_key",
        )
    return key


def idempotency_claim(*, brand, key: str, method: str, path: str, body: bytes) -> Claim:
    """Claim ``key`` for this request, or find the earlier request that used it.

    Returns ``Claim(replay=False)`` when this request owns the key and must do the work,
    ``Claim(replay=True)`` when the same request completed before. Raises IdempotencyKeyReused
    (422: same key, different method, path or body), IdempotencyInFlight (409: the first request
    is still running). Each step is its own short transaction; nothing else is written."""
    key = key_validate(key)
    request_hash = hashlib.sha256(body).hexdigest()
    for _ in range(3):
        now = timezone.now()
        # One statement on every POST: the key's row, or nothing when the key is taken. ON
        # CONFLICT DO NOTHING raises nothing, so it needs no savepoint inside a caller's
        # transaction, and in autocommit it is a transaction of its own.
        fields = {
            "brand": brand,
            "key": key,
            "method": method,
            "path": path,
            "request_hash": request_hash,
            "status": IdempotencyStatus.IN_FLIGHT,
            "created_at": now,
            "expires_at": now + _ttl(),
        }
        with connection.cursor() as cursor:
            cursor.execute(
                _claim_sql(),
                [brand.pk, key, method, path, request_hash, IdempotencyStatus.IN_FLIGHT.value]
                + [_stored_time(now), _stored_time(fields["expires_at"])],
            )
            row = cursor.fetchone()
        if row is not None:
            record = IdempotencyRecord(pk=row[0], **fields)
            record._state.adding = False
            return Claim(record=record, replay=False)
        existing = IdempotencyRecord.objects.filter(brand=brand, key=key).first()
        if existing is None:  # released by its owner (a 5xx) between our insert and our read
            continue
        if existing.expires_at <= now:
            IdempotencyRecord.objects.filter(pk=existing.pk, expires_at__lte=now).delete()
            continue
        if (existing.method, existing.path, existing.request_hash) != (method, path, request_hash):
            raise IdempotencyKeyReused(
                "This Idempotency-Key was used before with a different request.",
                details={"first_method": existing.method, "first_path": existing.path},
            )
        if existing.status == IdempotencyStatus.DONE:
            return Claim(record=existing, replay=True)
        stale_before = now - timedelta(seconds=settings.IDEMPOTENCY_IN_FLIGHT_TIMEOUT_SECONDS)
        if existing.created_at < stale_before:
            taken = IdempotencyRecord.objects.filter(
                pk=existing.pk, status=IdempotencyStatus.IN_FLIGHT, created_at=existing.created_at
            ).update(created_at=now, expires_at=now + _ttl())
            if taken == 1:
                existing.refresh_from_db()
                return Claim(record=existing, replay=False)
        raise IdempotencyInFlight("A request with this Idempotency-Key is still being processed; retry later.")
    raise IdempotencyInFlight("This Idempotency-Key is contended; retry later.")


def idempotency_complete(*, record: IdempotencyRecord, status: int, body: bytes, content_type: str) -> None:
    """Store the response of the request that owns ``record``."""
    now = timezone.now()
    IdempotencyRecord.objects.filter(pk=record.pk, status=IdempotencyStatus.IN_FLIGHT).update(
        status=IdempotencyStatus.DONE,
        response_status=status,
        response_body=body,
        response_content_type=content_type,
        completed_at=now,
        expires_at=max(record.expires_at, now + _ttl()),
    )


def idempotency_release(*, record: IdempotencyRecord) -> None:
    """Forget an in-flight key whose request failed unexpectedly, so a retry does the work."""
    IdempotencyRecord.objects.filter(pk=record.pk, status=IdempotencyStatus.IN_FLIGHT).delete()


def idempotency_records_purge(*, now=None) -> int:
    """Delete expired records. Returns how many."""
    deleted, _ = IdempotencyRecord.objects.filter(expires_at__lte=now or timezone.now()).delete()
    return deleted
