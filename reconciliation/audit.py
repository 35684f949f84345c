"""Reconciliation's audit table (``core.audit_sql``): the bank side's staff actions (reconciliation
0015: imports, matches by hand, undos, suspense, duplicates, write-off requests and their
four-eyes decisions), one stream per statement line; an import names no line, so each import row
is a chain of its own. Registered by ``ReconciliationConfig.ready``."""

from core.audit_sql import AuditTable

RECONCILIATION_ACTIONS = AuditTable(
    "reconciliation_reconciliationaction",
    "line_id",
    "bank",
    (
        "id",
        "kind",
        "status",
        "line_id",
        "actor_id",
        "approved_by_id",
        "decides_id",
        "created_at",
        "decided_at",
    ),
    "reason",
    "detail",
    add_stream_index=True,
    timestamps=("created_at", "decided_at"),
    nullable_stream=True,
)
