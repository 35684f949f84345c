from reconciliation.admin import bank, ledger  # noqa: F401  (registers the ModelAdmins)
