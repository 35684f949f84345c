from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Books and reconciliation"

    def ready(self) -> None:
        from core.audit_sql import audit_table_register
        from core.metrics import metrics_collector_register, verification_register
        from core.roles import role_permissions_grant
        from reconciliation.audit import RECONCILIATION_ACTIONS
        from reconciliation.matchers import ReversalMatcher
        from reconciliation.matching import register
        from reconciliation.metrics import LEDGER_VERIFY_TASK, ledger_verified, statement_metrics
        from reconciliation.roles import GRANTS

        register(ReversalMatcher())
        metrics_collector_register("statements", statement_metrics)
        verification_register("ledger", task=LEDGER_VERIFY_TASK, ok=ledger_verified)
        audit_table_register(RECONCILIATION_ACTIONS)
        role_permissions_grant(GRANTS)
