"""What each ops role may do with the books (``core.roles``). Granted by
``ReconciliationConfig.ready``."""

_SEE_THE_BOOKS = [
    "reconciliation.view_account",
    "reconciliation.view_journalentry",
    "reconciliation.view_posting",
    "reconciliation.view_hold",
    "reconciliation.view_ledger_reports",
    "reconciliation.view_platformbankaccount",
    "reconciliation.view_statementimport",
    "reconciliation.view_bankstatement",
    "reconciliation.view_statementline",
    "reconciliation.view_match",
    "reconciliation.view_suggestion",
    "reconciliation.view_reconciliationaction",
]

GRANTS = {
    "Reconciler": [*_SEE_THE_BOOKS, "reconciliation.reconcile_statement"],
    "Finance admin": [*_SEE_THE_BOOKS, "reconciliation.approve_write_off"],
}
