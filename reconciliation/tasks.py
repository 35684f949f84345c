"""Scheduled work for the books (django-q2). Each task is idempotent and safe to run twice."""

import logging

from reconciliation.selectors import ledger_verify_report
from reconciliation.services import ledger_holds_expire

logger = logging.getLogger(__name__)


def holds_expire_task() -> int:
    return ledger_holds_expire()


def ledger_verify_task() -> bool:
    report = ledger_verify_report()
    if not report.ok:
        # An error-level log line is what paging hooks on; the task result keeps the details.
        logger.error("ledger_verify failed: %s", report)
    return report.ok
