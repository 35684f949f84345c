from django.apps import AppConfig


class RecipientsConfig(AppConfig):
    name = "recipients"

    def ready(self) -> None:
        from core.metrics import metrics_collector_register
        from recipients import checks  # noqa: F401  (registers the start-up check)
        from recipients.metrics import notice_metrics

        metrics_collector_register("notices", notice_metrics)
