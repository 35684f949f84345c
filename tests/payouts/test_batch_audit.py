"""Approving and downloading a pain.001 batch are staff actions that move money: each is an
append-only, hash-chained audit row (``PayoutBatchEvent``) with who, when and why, listed and
exported by the cross-object audit trail (issue 18)."""

import csv
import hashlib
import io

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.urls import reverse

from core.audit import audit_verify
from core.audit_models import AuditTrail
from core.exceptions import InvalidTransition, PermissionDenied
from payouts.models import PayoutBatchEvent, RouteRule
from payouts.services import payout_batch_approve, payout_batch_create, payouts_create_for_payable
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import iban, payable_reward, staff

pytestmark = pytest.mark.django_db


@pytest.fixture
def large_batch(sandbox, debtor, brand, campaign, settings):
    """A 10.00 file over a 5.00 threshold: it needs a second person before download."""
    settings.PAYOUT_BATCH_APPROVAL_THRESHOLD_MINOR = 500
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    for _ in range(2):
        payable_reward(brand, account_iban=iban())
    assert len(payouts_create_for_payable().created) == 2
    olga = staff("olga")
    batch = payout_batch_create(actor=olga)
    assert batch.requires_approval
    return batch, olga


def approve_and_download_in_the_admin(client, batch):
    piero = staff("piero", "approve_payoutbatch", "view_payoutbatch")
    client.force_login(piero)
    # Past the confirmation page (tests/payouts/test_payout_admin.py shows it first).
    response = client.post(
        reverse("admin:payouts_payoutbatch_changelist"),
        {"action": "approve", "_selected_action": [batch.pk], "confirm": "yes"},
    )
    assert response.status_code == 302
    dora = staff("dora", "download_payoutbatch")
    client.force_login(dora)
    download = client.get(reverse("admin:payouts_payoutbatch_download", args=[batch.pk]))
    assert download.status_code == 200
    return piero, dora, download.content


def test_approval_and_download_are_in_the_audit_trail_with_who_when_why(client, large_batch):
    batch, olga = large_batch

    piero, dora, handed_out = approve_and_download_in_the_admin(client, batch)

    batch.refresh_from_db()
    rows = {row.kind: row for row in AuditTrail.objects.filter(object_type="batch", object_id=batch.pk)}
    assert set(rows) == {"batch.built", "batch.approved", "batch.downloaded"}
    built, approved, downloaded = rows["batch.built"], rows["batch.approved"], rows["batch.downloaded"]
    assert built.actor_id == olga.pk and built.data["requires_approval"] is True
    assert (approved.actor_id, approved.created_at) == (piero.pk, batch.approved_at)
    assert approved.reason == "Four-eyes: €10.00 is at or above the approval threshold of €5.00"
    assert approved.data["created_by"] == olga.pk
    assert (approved.data["batch"], approved.data["control_sum_minor"], approved.data["count"]) == (
        batch.batch_id,
        1_000,
        2,
    )
    assert (downloaded.actor_id, downloaded.created_at) == (dora.pk, batch.downloaded_at)
    assert downloaded.reason == "First download, for upload to the bank"
    assert downloaded.data["sha256"] == hashlib.sha256(handed_out).hexdigest() and downloaded.data["first"]


def test_every_download_is_recorded_not_only_the_first(client, large_batch):
    batch, _ = large_batch
    _, dora, _ = approve_and_download_in_the_admin(client, batch)

    client.get(reverse("admin:payouts_payoutbatch_download", args=[batch.pk]))

    downloads = PayoutBatchEvent.objects.filter(batch=batch, kind="batch.downloaded").order_by("id")
    assert [(e.actor_id, e.data["first"]) for e in downloads] == [(dora.pk, True), (dora.pk, False)]


def test_a_refused_approval_records_nothing(large_batch):
    batch, olga = large_batch
    with pytest.raises(PermissionDenied):
        payout_batch_approve(batch=batch, approver=olga)  # no permission (and the creator)
    payout_batch_approve(batch=batch, approver=staff("piero", "approve_payoutbatch"))
    with pytest.raises(InvalidTransition):
        payout_batch_approve(batch=batch, approver=staff("ugo", "approve_payoutbatch"))  # approved already

    assert [e.actor.username for e in PayoutBatchEvent.objects.filter(kind="batch.approved")] == ["piero"]


def test_the_audit_admin_filters_and_exports_them(client, large_batch):
    batch, _ = large_batch
    approve_and_download_in_the_admin(client, batch)
    client.force_login(get_user_model().objects.create_superuser("auditor", password="x"))
    query = {"object_type": "batch", "kind": "batch.approved"}

    page = client.get("/admin/core/audittrail/", query)
    export = client.get("/admin/core/audittrail/export/", query)

    assert [(r.kind, r.object_id) for r in page.context["cl"].result_list] == [("batch.approved", batch.pk)]
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [(r["object_type"], r["object_id"], r["kind"], r["actor"]) for r in rows] == [
        ("batch", str(batch.pk), "batch.approved", "piero")
    ]
    page = client.get(reverse("admin:payouts_payoutbatch_change", args=[batch.pk])).content.decode()
    assert "batch.approved" in page and "batch.downloaded" in page  # on the batch's own page too


@pytest.mark.postgres
def test_batch_events_cannot_be_edited_and_a_tampered_one_is_reported(client, large_batch):
    batch, _ = large_batch
    approve_and_download_in_the_admin(client, batch)
    approved = PayoutBatchEvent.objects.get(batch=batch, kind="batch.approved")
    for statement in (
        "UPDATE payouts_payoutbatchevent SET actor_id = NULL WHERE id = %s",
        "UPDATE payouts_payoutbatchevent SET reason = 'waved through' WHERE id = %s",
        "DELETE FROM payouts_payoutbatchevent WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, [approved.pk])
    assert audit_verify().ok

    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("UPDATE payouts_payoutbatchevent SET actor_id = NULL WHERE id = %s", [approved.pk])
        cursor.execute("SET session_replication_role = DEFAULT")

    assert f"payouts_payoutbatchevent #{approved.pk}: row changed" in audit_verify().problems
