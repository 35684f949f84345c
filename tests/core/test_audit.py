"""The audit trail is append-only and hash-chained in PostgreSQL itself (issue 18): raw SQL cannot
edit or delete a row, every writer (ORM, COPY) is chained, and ``audit_verify`` reports a broken
chain, a changed row and a stream that lost its last rows after a seal."""

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from django_q.models import Schedule

from campaigns.models import CampaignEvent, RewardEvent
from campaigns.services import event_ingest_bulk, reward_void
from core.audit import audit_seal, audit_verify
from core.audit_models import AuditSeal
from core.audit_sql import audited_tables
from core.exceptions import InvalidTransition
from core.tasks import audit_verify_task
from payouts.models import PayoutBatch, PayoutBatchEvent
from payouts.services import payout_execute, payouts_create_for_payable
from recipients.models import PersonEvent, PersonEventKind
from recipients.models_consent import ConsentEvent
from reconciliation.models import ReconciliationAction
from tests.campaigns.conftest import event
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import iban, payable_reward
from tests.recipients.factories import PersonFactory
from tests.recipients.factories import people_brand as batch_brand

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def trail(sandbox, debtor, brand, campaign):
    """A campaign (launched, funded: campaign events), 12 rewards ingested in one bulk call (COPY:
    reward events), one of them voided with a reason, and a payout paid by the sandbox."""
    results = event_ingest_bulk(brand=brand, payloads=[event() for _ in range(12)])
    reward = results[0].reward
    reward_void(reward=reward, reason="refund, ticket 81")
    payable_reward(brand, account_iban=iban())
    for payout_id in payouts_create_for_payable(enqueue=False).created:
        payout_execute(payout_id=payout_id)
    return campaign, reward


def sql(statement: str, params=()):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, params)


def tamper(statement: str, params=()):
    """What a superuser could do: switch triggers off for one statement."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        cursor.execute(statement, params)
        cursor.execute("SET session_replication_role = DEFAULT")


def test_every_writer_is_chained_and_the_trail_verifies(trail):
    _, reward = trail

    report = audit_verify()

    assert report.ok, report.problems
    assert report.rows["campaigns_rewardevent"] == RewardEvent.objects.count() > 13
    assert report.rows["payouts_payoutevent"] >= 2
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT kind, prev_hash IS NULL, length(row_hash) FROM campaigns_rewardevent WHERE reward_id = %s "
            "ORDER BY id",
            [reward.pk],
        )
        assert cursor.fetchall() == [("reward.held", True, 32), ("reward.voided", False, 32)]


@pytest.mark.parametrize("spec", audited_tables(), ids=lambda s: s.table)
def test_update_and_delete_are_refused_on_every_audit_table(trail, spec):
    PersonEvent.objects.create(person=PersonFactory(), kind=PersonEventKind.MERGED, detail={"into": 1})
    ReconciliationAction.objects.create(kind=ReconciliationAction.Kind.IMPORT, detail={"import_id": 1})
    batch = PayoutBatch.objects.create(
        batch_id="JBB260115A1", payment_information_id="JBB260115A1-20260115", debtor_account_code="bank",
        debtor_iban="NL91ABNA0417164300", execution_date="2026-01-15", count=1, control_sum_minor=500, file="<x/>",
    )  # fmt: skip
    PayoutBatchEvent.objects.create(batch=batch, kind="batch.built", created_at=timezone.now())
    ConsentEvent.objects.create(brand=batch_brand(), kind="contacts.exported", channel="api", created_at=timezone.now())
    for statement in (
        f"UPDATE {spec.table} SET kind = kind || 'x'",
        f"UPDATE {spec.table} SET created_at = created_at - interval '1 day'",
        f"DELETE FROM {spec.table}",
    ):
        with pytest.raises(DatabaseError, match="append-only"):
            sql(statement)
    assert audit_verify().ok


def test_the_one_erase_update_keeps_the_chain_verifiable(trail):
    _, reward = trail
    row = RewardEvent.objects.get(reward=reward, kind="reward.voided")

    sql(
        "UPDATE campaigns_rewardevent SET reason = '', data = '{}', personal_salt = NULL, erased_at = now() "
        "WHERE id = %s",
        [row.pk],
    )

    row.refresh_from_db()
    assert (row.reason, row.data) == ("", {})
    assert audit_verify().ok


@pytest.mark.parametrize(
    "assignments",
    [
        "reason = 'rewritten', personal_salt = NULL, erased_at = now()",  # changes, not blanks
        "data = '{\"added\": 1}', personal_salt = NULL, erased_at = now()",  # adds a key
        "reason = '', erased_at = now()",  # keeps the salt: the digest would still confirm a guess
        "reason = '', personal_salt = NULL, erased_at = now(), to_status = 'payable'",  # a fixed column
        "reason = '', personal_salt = NULL, erased_at = now(), row_hash = sha256('x')",
    ],
)
def test_anything_beyond_the_erase_is_refused(trail, assignments):
    _, reward = trail
    row = RewardEvent.objects.get(reward=reward, kind="reward.voided")
    with pytest.raises(DatabaseError, match="append-only"):
        sql(f"UPDATE campaigns_rewardevent SET {assignments} WHERE id = %s", [row.pk])


def test_a_changed_row_and_a_removed_row_are_reported(trail):
    _, reward = trail
    voided = RewardEvent.objects.get(reward=reward, kind="reward.voided")
    launched = CampaignEvent.objects.order_by("id").first()

    tamper("UPDATE campaigns_rewardevent SET reason = 'no refund' WHERE id = %s", [voided.pk])
    tamper("DELETE FROM campaigns_campaignevent WHERE id = %s", [launched.pk])

    report = audit_verify()
    assert f"campaigns_rewardevent #{voided.pk}: free-form columns changed" in report.problems
    assert any(p.startswith("campaigns_campaignevent #") and "previous row" in p for p in report.problems)
    with pytest.raises(CommandError, match="audit trail broken"):
        call_command("audit_verify")
    with pytest.raises(InvalidTransition):
        audit_seal()


def test_a_stream_that_lost_its_last_row_after_a_seal_is_reported(trail):
    _, reward = trail
    seal = audit_seal()
    last = RewardEvent.objects.get(reward=reward, kind="reward.voided")

    tamper("DELETE FROM campaigns_rewardevent WHERE id = %s", [last.pk])

    problems = audit_verify().problems
    sealed = seal.tables["campaigns_rewardevent"]
    assert problems == [
        f"campaigns_rewardevent: rows up to #{sealed['max_id']} differ from seal #{seal.pk} "
        f"({sealed['count'] - 1} rows, sealed {sealed['count']})"
    ]


def test_seals_are_chained_and_append_only(trail):
    first = audit_seal()
    second = audit_seal()

    assert second.prev_hash == first.seal_hash
    with pytest.raises(DatabaseError, match="append-only"):
        sql("UPDATE core_auditseal SET tables = '{}'")
    call_command("audit_verify", "--seal")


def test_the_daily_job_seals_a_trail_that_verifies_and_reports_one_that_does_not(trail):
    _, reward = trail
    assert audit_verify_task().startswith("audit trail verified and sealed")
    voided = RewardEvent.objects.get(reward=reward, kind="reward.voided")
    tamper("UPDATE campaigns_rewardevent SET reason = 'no refund' WHERE id = %s", [voided.pk])
    seals = AuditSeal.objects.count()
    assert audit_verify_task().startswith("audit trail BROKEN")
    assert AuditSeal.objects.count() == seals  # nothing sealed over a broken chain
    assert Schedule.objects.filter(func="core.tasks.audit_verify_task", schedule_type="D").exists()
