"""A write-off is a staff action that moves money: it is in the cross-object audit trail with who,
when, why and how much, and in PostgreSQL its rows are append-only and hash-chained like the
other audit tables, so the four-eyes decision is a new row, never an edit (issue 18)."""

import csv
import io
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import DatabaseError, connection, transaction

from bench.camt_gen import GenLine, GenStatement, write_camt053
from core.audit import audit_verify
from core.audit_models import AuditTrail
from core.exceptions import InvalidTransition
from reconciliation.bank_selectors import open_exceptions, write_offs_waiting
from reconciliation.models import JournalEntry, ReconciliationAction, StatementLine, StatementLineStatus
from reconciliation.services.matching import statement_lines_match, write_off_decide, write_off_request
from reconciliation.services.statements import platform_bank_account_create, statement_import

pytestmark = pytest.mark.django_db
IBAN = "NL91ABNA0417164300"
REASON = "bank rounding, under 1 EUR"


def staff(username: str, *codenames: str):
    user = get_user_model().objects.create_user(username, password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return get_user_model().objects.get(pk=user.pk)


@pytest.fixture
def stray(tmp_path):
    """A 0.07 EUR credit nobody explains, parked in suspense."""
    platform_bank_account_create(name="Operating", iban=IBAN, currency="EUR")
    path = tmp_path / "s.xml"
    line = GenLine(amount=Decimal("0.07"), credit_debit="CRDT", remittance="rounding")
    write_camt053(
        path,
        [GenStatement(statement_id="S1", account_iban=IBAN, currency="EUR", opening_balance=Decimal(0), lines=[line])],
    )
    statement_import(source=path, filename=path.name, origin="command", match=False)
    statement_lines_match()
    return StatementLine.objects.get()


@pytest.fixture
def requested(stray):
    alice = staff("alice", "reconcile_statement", "view_reconciliationaction")
    return write_off_request(line_id=stray.pk, actor=alice, reason=REASON)


def approve_in_the_admin(client, request):
    bob = staff("bob", "reconcile_statement", "approve_write_off", "view_reconciliationaction")
    client.force_login(bob)
    response = client.post(
        "/admin/reconciliation/reconciliationaction/", {"action": "approve", "_selected_action": [request.pk]}
    )
    assert response.status_code == 302
    return bob


def test_a_write_off_approved_in_the_admin_is_in_the_audit_trail_with_who_when_why(client, stray, requested):
    bob = approve_in_the_admin(client, requested)

    decision = ReconciliationAction.objects.get(decides=requested)
    assert decision.status == "approved" and StatementLine.objects.get().status == StatementLineStatus.WRITTEN_OFF
    rows = {
        row.kind: row for row in AuditTrail.objects.filter(object_type="bank_line", object_id=stray.pk)
    }  # the cross-object view
    asked, approved = rows["write_off.requested"], rows["write_off.approved"]
    assert (asked.actor_id, asked.reason) == (requested.actor_id, REASON)
    assert (approved.actor_id, approved.reason, approved.created_at) == (bob.pk, REASON, decision.decided_at)
    assert approved.data["requested_by"] == requested.actor_id and approved.data["decides"] == requested.pk
    assert (Decimal(approved.data["amount"]), approved.data["currency"]) == (Decimal("0.07"), "EUR")
    assert approved.data["amount_minor"] == 7 and JournalEntry.objects.filter(pk=approved.data["entry_id"]).exists()
    assert "bank_file" in set(AuditTrail.objects.values_list("object_type", flat=True))  # the import too


def test_the_admin_audit_trail_filters_and_exports_it(client, stray, requested):
    approve_in_the_admin(client, requested)
    client.force_login(get_user_model().objects.create_superuser("auditor", password="x"))
    query = {"object_type": "bank_line", "kind": "write_off.approved"}

    page = client.get("/admin/core/audittrail/", query)
    export = client.get("/admin/core/audittrail/export/", query)

    assert [(r.kind, r.object_id) for r in page.context["cl"].result_list] == [("write_off.approved", stray.pk)]
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [(r["object_type"], r["object_id"], r["kind"], r["actor"], r["reason"]) for r in rows] == [
        ("bank_line", str(stray.pk), "write_off.approved", "bob", REASON)
    ]


def test_a_request_is_decided_once_and_then_waits_no_more(client, requested):
    assert list(write_offs_waiting()) == [requested]
    bob = approve_in_the_admin(client, requested)
    entries = JournalEntry.objects.count()

    for approve in (True, False):
        with pytest.raises(InvalidTransition):
            write_off_decide(action_id=requested.pk, approver=bob, approve=approve)

    assert JournalEntry.objects.count() == entries
    assert ReconciliationAction.objects.filter(decides=requested).count() == 1
    assert not write_offs_waiting().exists()
    assert {e.kind: e.count for e in open_exceptions()}["write_off_pending"] == 0
    listed = client.get("/admin/reconciliation/reconciliationaction/", {"waiting": "1"})
    assert list(listed.context["cl"].result_list) == []


def test_a_rejected_write_off_moves_nothing_and_is_its_own_row(requested):
    carol = staff("carol", "approve_write_off")
    entries = JournalEntry.objects.count()

    decision = write_off_decide(action_id=requested.pk, approver=carol, approve=False)

    assert (decision.status, decision.approved_by, decision.decides) == ("rejected", carol, requested)
    assert ReconciliationAction.objects.get(pk=requested.pk).status == "pending_approval"  # the request as asked
    assert JournalEntry.objects.count() == entries
    assert StatementLine.objects.get().status == StatementLineStatus.UNMATCHED
    assert AuditTrail.objects.filter(kind="write_off.rejected", actor=carol).exists()


@pytest.mark.postgres
def test_write_off_rows_cannot_be_edited_and_a_tampered_one_is_reported(client, requested):
    approve_in_the_admin(client, requested)
    decision = ReconciliationAction.objects.get(decides=requested)
    table = "reconciliation_reconciliationaction"
    assert audit_verify().ok
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT prev_hash = (SELECT row_hash FROM {table} WHERE id = %s) FROM {table} WHERE id = %s",
                       [requested.pk, decision.pk])  # fmt: skip
        assert cursor.fetchone() == (True,)  # the decision is chained to its request

    for statement in (
        f"UPDATE {table} SET approved_by_id = actor_id, actor_id = NULL WHERE id = {decision.pk}",
        f"UPDATE {table} SET status = 'pending_approval' WHERE id = {requested.pk}",
        f"DELETE FROM {table} WHERE id = {decision.pk}",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)

    with connection.cursor() as cursor:  # what a superuser could do: switch the triggers off
        cursor.execute("SET session_replication_role = replica")
        cursor.execute(f"UPDATE {table} SET reason = 'approved by the CFO' WHERE id = %s", [decision.pk])
        cursor.execute("SET session_replication_role = DEFAULT")
    assert f"{table} #{decision.pk}: free-form columns changed" in audit_verify().problems
