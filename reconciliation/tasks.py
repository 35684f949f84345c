"""Scheduled work for the books (django-q2). Each task is idempotent and safe to run twice."""

import logging

from core.queue import enqueue, tick
from reconciliation.bank_selectors import bank_verify_report
from reconciliation.selectors import ledger_verify_report
from reconciliation.services import ledger_holds_expire
from reconciliation.services.bank_reports import IMPORT_MATCH_TASK
from reconciliation.services.matching import statement_lines_rematch

logger = logging.getLogger(__name__)


@tick
def holds_expire_task() -> int:
    return ledger_holds_expire()


def ledger_verify_task() -> bool:
    report, bank = ledger_verify_report(), bank_verify_report()
    if not (report.ok and bank.ok):
        # An error-level log line is what paging hooks on; the task result keeps the details.
        logger.error("ledger_verify failed: %s %s", report, bank)
    return report.ok and bank.ok


def statement_import_match_task(import_id: int) -> int:
    """Match the new lines of one import (enqueued when the import commits), within
    ``MATCH_BUDGET_SECONDS``; a run whose time was up enqueues the next for the lines left. A run
    that raised (a line whose parking failed too) enqueues none: the minute's sweep goes on."""
    from reconciliation.models import StatementLine, StatementLineStatus
    from reconciliation.services.matching import MATCH_BUDGET_SECONDS, statement_lines_match

    ids = StatementLine.objects.filter(
        statement__statement_import_id=import_id, status=StatementLineStatus.NEW
    ).values_list("pk", flat=True)
    run = statement_lines_match(line_ids=list(ids), budget_seconds=MATCH_BUDGET_SECONDS)
    if run.left:
        enqueue(IMPORT_MATCH_TASK, import_id)
    return run.matched_total


def statement_lines_rematch_task(line_ids: list[int]) -> int:
    """Try parked lines again after an event outside the statement (``statement_lines_rematch``)."""
    return statement_lines_rematch(line_ids=line_ids)


@tick
def statement_lines_match_sweep_task() -> int:
    """Catch lines whose import committed but whose match task was lost (a crash in between),
    within ``MATCH_BUDGET_SECONDS``: the next run goes on."""
    from reconciliation.services.matching import MATCH_BUDGET_SECONDS, statement_lines_match

    return statement_lines_match(budget_seconds=MATCH_BUDGET_SECONDS).matched_total
