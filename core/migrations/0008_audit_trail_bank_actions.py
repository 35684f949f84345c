"""The cross-object audit view also lists the bank side's staff actions (reconciliation actions,
append-only since reconciliation 0015): imports, matches by hand, undos, suspense, duplicates,
write-off requests and their four-eyes decisions, each with who, when, why and the line's amount.

A decision's actor is the approver (the requester is in ``data``), its time the decision's; its
kind is ``write_off.approved`` / ``write_off.rejected``, a request's ``write_off.requested``. An
import names no line: its object is the import (``bank_file``). PostgreSQL replaces the view in
place (grants on it stay), so every column keeps its type; SQLite cannot, and drops it first."""

from django.db import migrations

from core.migrations._audit_0004 import AUDIT_TABLES

# The four selects of 0004, as 0004 wrote them.
EVENTS = " UNION ALL ".join(
    f"SELECT '{t.label}:' || id AS uid, '{t.label}' AS object_type, {t.stream} AS object_id, kind, actor_id, "
    f"{t.reason or chr(39) * 2} AS reason, {t.data} AS data, created_at FROM {t.table}"
    for t in AUDIT_TABLES
)

BANK_KIND = (
    "(a.kind || CASE a.status WHEN 'pending_approval' THEN '.requested' WHEN 'approved' THEN '.approved' "
    "WHEN 'rejected' THEN '.rejected' ELSE '' END)"
)
BANK_FROM = (
    "FROM reconciliation_reconciliationaction a LEFT JOIN reconciliation_statementline l ON l.id = a.line_id"
)
BANK_POSTGRESQL = f"""
SELECT 'bank:' || a.id AS uid,
       CASE WHEN a.line_id IS NULL THEN 'bank_file' ELSE 'bank_line' END AS object_type,
       coalesce(a.line_id, (a.detail ->> 'import_id')::bigint) AS object_id,
       {BANK_KIND}::varchar AS kind,
       coalesce(a.approved_by_id, a.actor_id) AS actor_id,
       a.reason::varchar AS reason,
       a.detail || jsonb_strip_nulls(jsonb_build_object(
           'status', a.status, 'requested_by', a.actor_id, 'approved_by', a.approved_by_id,
           'decides', a.decides_id, 'amount', l.amount::text, 'currency', l.currency,
           'credit_debit', l.credit_debit)) AS data,
       coalesce(a.decided_at, a.created_at) AS created_at
  {BANK_FROM}
"""
BANK_SQLITE = f"""
SELECT 'bank:' || a.id AS uid,
       CASE WHEN a.line_id IS NULL THEN 'bank_file' ELSE 'bank_line' END AS object_type,
       coalesce(a.line_id, CAST(json_extract(a.detail, '$.import_id') AS INTEGER)) AS object_id,
       {BANK_KIND} AS kind,
       coalesce(a.approved_by_id, a.actor_id) AS actor_id,
       a.reason AS reason,
       json_patch(a.detail, json_object(
           'status', a.status, 'requested_by', a.actor_id, 'approved_by', a.approved_by_id,
           'decides', a.decides_id, 'amount', CAST(l.amount AS TEXT), 'currency', l.currency,
           'credit_debit', l.credit_debit)) AS data,
       coalesce(a.decided_at, a.created_at) AS created_at
  {BANK_FROM}
"""


def replace_view(with_bank: bool):
    def run(apps, schema_editor):
        postgresql = schema_editor.connection.vendor == "postgresql"
        select = EVENTS
        if with_bank:
            select += " UNION ALL " + (BANK_POSTGRESQL if postgresql else BANK_SQLITE)
        with schema_editor.connection.cursor() as cursor:
            if postgresql:
                cursor.execute(f"CREATE OR REPLACE VIEW core_audittrail AS {select}")
            else:
                cursor.execute("DROP VIEW IF EXISTS core_audittrail")
                cursor.execute(f"CREATE VIEW core_audittrail AS {select}")

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0007_audit_verify_schedule"),
        ("reconciliation", "0015_actions_append_only"),
    ]

    operations = [migrations.RunPython(replace_view(with_bank=True), replace_view(with_bank=False))]
