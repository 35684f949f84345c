from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Books and reconciliation"

    def ready(self) -> None:
        from core.metrics import metrics_collector_register
        from reconciliation.matchers import ReversalMatcher
        from reconciliation.matching import register
        from reconciliation.metrics import statement_metrics

        register(ReversalMatcher())
        metrics_collector_register("statements", statement_metrics)
