from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Books and reconciliation"

    def ready(self) -> None:
        from reconciliation.matchers import ReversalMatcher
        from reconciliation.matching import register

        register(ReversalMatcher())
