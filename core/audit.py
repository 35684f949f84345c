"""Proving the audit trail: ``audit_verify`` recomputes every chain, ``audit_seal`` records what
it proved so that a later deletion of a stream's last rows shows too. How rows are chained, and
why erasure keeps the chain verifiable, is in ``core.audit_sql``."""

import hashlib
import json
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.utils import timezone

from core.audit_models import AuditSeal
from core.audit_sql import AuditTable, audited_tables, personal_digest_sql, row_hash_sql
from core.exceptions import InvalidTransition

# More than this many broken rows per table are counted, not listed.
LISTED_PER_TABLE = 20


@dataclass
class AuditReport:
    rows: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seal_id: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def audit_verify() -> AuditReport:
    """Recompute the chain of every audit table and check the rows the last seal covered.

    Reports (never raises on) a row whose hash, digest or link to the previous row of its stream
    does not recompute, a stream whose first row claims a predecessor, and a table with fewer or
    other rows under the last seal than it had. PostgreSQL only (elsewhere no chain is kept: an
    empty, passing report). Read-only; one REPEATABLE READ snapshot would be ideal, but each
    table is checked in its own statement, and rows appended meanwhile are simply not covered."""
    report = AuditReport()
    if connection.vendor != "postgresql":
        return report
    for spec in audited_tables():
        report.rows[spec.table] = _table_verify(spec, report.problems)
    _seal_check(report.problems)
    return report


def _table_verify(spec: AuditTable, problems: list[str]) -> int:
    digest = personal_digest_sql(spec, "t")
    recomputed = row_hash_sql(spec, "t", "t.prev_hash")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT id, CASE
                WHEN prev_hash IS DISTINCT FROM lag(row_hash) OVER w THEN 'link to the previous row broken'
                WHEN row_hash IS DISTINCT FROM {recomputed} THEN 'row changed'
                WHEN erased_at IS NULL AND personal_digest IS DISTINCT FROM {digest} THEN 'free-form columns changed'
                WHEN erased_at IS NOT NULL AND personal_salt IS NOT NULL THEN 'erased without forgetting the salt'
            END AS problem, count(*) OVER () AS total
              FROM {spec.table} AS t
            WINDOW w AS (PARTITION BY {spec.partition} ORDER BY id)
            """
        )
        rows = cursor.fetchall()
    total = rows[0][2] if rows else 0
    broken = [(row_id, problem) for row_id, problem, _ in rows if problem]
    for row_id, problem in broken[:LISTED_PER_TABLE]:
        problems.append(f"{spec.table} #{row_id}: {problem}")
    if len(broken) > LISTED_PER_TABLE:
        problems.append(f"{spec.table}: {len(broken) - LISTED_PER_TABLE} more broken rows")
    return total


def _table_digest(spec: AuditTable, max_id: int | None = None) -> dict:
    where = "WHERE id <= %s" if max_id is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT coalesce(max(id), 0), count(*), encode(sha256(coalesce(string_agg(row_hash, ''::bytea "
            f"ORDER BY id), ''::bytea)), 'hex') FROM {spec.table} {where}",
            [max_id] if max_id is not None else [],
        )
        top, count, digest = cursor.fetchone()
    return {"max_id": top, "count": count, "digest": digest}


def _seal_hash(prev_hash: str, tables: dict) -> str:
    return hashlib.sha256((prev_hash + json.dumps(tables, sort_keys=True)).encode()).hexdigest()


def _seal_check(problems: list[str]) -> None:
    previous = ""
    for seal in AuditSeal.objects.order_by("id").only("prev_hash", "seal_hash", "tables"):
        if seal.prev_hash != previous or seal.seal_hash != _seal_hash(seal.prev_hash, seal.tables):
            problems.append(f"audit seal #{seal.pk}: seal chain broken")
        previous = seal.seal_hash
    last = AuditSeal.objects.order_by("-id").first()
    if last is None:
        return
    for spec in audited_tables():
        sealed = last.tables.get(spec.table)
        if sealed is None:
            continue
        now = _table_digest(spec, sealed["max_id"])
        if (now["count"], now["digest"]) != (sealed["count"], sealed["digest"]):
            problems.append(
                f"{spec.table}: rows up to #{sealed['max_id']} differ from seal #{last.pk} "
                f"({now['count']} rows, sealed {sealed['count']})"
            )


def audit_seal() -> AuditSeal:
    """Verify, then append a seal of every audit table's rows as they are now.

    Raises InvalidTransition (``audit_broken``) without sealing when the verification fails: a
    seal vouches only for a trail that proved. Its own short transaction; the table lock on the
    seal table keeps two seals from racing for the same predecessor."""
    report = audit_verify()
    if not report.ok:
        raise InvalidTransition("The audit trail does not verify; nothing sealed.", code="audit_broken")
    with transaction.atomic(durable=True):
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("LOCK TABLE core_auditseal IN EXCLUSIVE MODE")
        last = AuditSeal.objects.order_by("-id").first()
        prev_hash = last.seal_hash if last else ""
        postgresql = connection.vendor == "postgresql"
        tables = {spec.table: _table_digest(spec) for spec in audited_tables()} if postgresql else {}
        return AuditSeal.objects.create(
            created_at=timezone.now(), tables=tables, prev_hash=prev_hash, seal_hash=_seal_hash(prev_hash, tables)
        )
