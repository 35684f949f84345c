"""ledger_verify checks the bank side too: lines stuck in ``new``, statements missing lines, and
match tasks stuck in the queue each make it fail (exit non-zero)."""

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from reconciliation.bank_selectors import STUCK_AFTER, bank_verify_report
from reconciliation.models import BankStatement, StatementLine
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import platform_bank_account_create, statement_import
from tests.reconciliation.crafted import Booking, camt053, statement

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported():
    platform_bank_account_create(name="Operating", iban="NL91ABNA0417164300", currency="EUR")
    data = camt053(statement([Booking("5.00", reference="A"), Booking("7.00", reference="B")]))
    return statement_import(source=data, filename="f.xml", origin="command", match=False)


def _verify(capsys) -> str:
    with pytest.raises(CommandError):
        call_command("ledger_verify")
    return capsys.readouterr().out


def test_a_matched_import_verifies(imported, capsys):
    statement_lines_match()
    call_command("ledger_verify")
    out = capsys.readouterr().out
    assert "[ok] no bank line stays new past the match sweeps" in out and "The books verify." in out


def test_a_line_left_new_past_the_sweeps_fails(imported, capsys):
    # Fresh new lines are fine: the match task or the sweep is about to take them.
    assert bank_verify_report().ok
    StatementLine.objects.update(created_at=timezone.now() - STUCK_AFTER - timedelta(minutes=1))
    out = _verify(capsys)
    assert "[FAIL] no bank line stays new past the match sweeps" in out and "2 line(s) still new" in out


def test_a_statement_missing_a_line_fails(imported, capsys):
    statement_lines_match()
    BankStatement.objects.update(entry_count=3)
    out = _verify(capsys)
    assert "[FAIL] every statement stored a line" in out and "3 entries, 0 known from earlier files, but 2" in out


def test_a_match_task_stuck_in_the_queue_fails(imported, capsys):
    statement_lines_match()
    package = {"id": "t1", "name": "match-import-1-0", "func": "reconciliation.tasks.statement_import_match_task"}
    OrmQ.objects.create(
        key="default", payload=SignedPackage.dumps(package), lock=timezone.now() - STUCK_AFTER - timedelta(seconds=1)
    )
    out = _verify(capsys)
    assert "[FAIL] no match task is stuck in the queue" in out and "match-import-1-0 queued since" in out
