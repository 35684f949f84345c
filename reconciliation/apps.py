from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Books and reconciliation"

    def ready(self) -> None:
        from core.metrics import metrics_collector_register, verification_register
        from reconciliation.matchers import ReversalMatcher
        from reconciliation.matching import register
        from reconciliation.metrics import LEDGER_VERIFY_TASK, ledger_verified, statement_metrics

        register(ReversalMatcher())
        metrics_collector_register("statements", statement_metrics)
        verification_register("ledger", task=LEDGER_VERIFY_TASK, ok=ledger_verified)
