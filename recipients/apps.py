from django.apps import AppConfig


class RecipientsConfig(AppConfig):
    name = "recipients"

    def ready(self) -> None:
        from core.audit_sql import audit_table_register
        from core.metrics import metrics_collector_register
        from core.roles import role_permissions_grant
        from recipients import checks  # noqa: F401  (registers the start-up check)
        from recipients.audit import PERSON_EVENTS
        from recipients.metrics import notice_metrics
        from recipients.roles import GRANTS

        metrics_collector_register("notices", notice_metrics)
        audit_table_register(PERSON_EVENTS)
        role_permissions_grant(GRANTS)
