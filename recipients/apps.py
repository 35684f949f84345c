from django.apps import AppConfig


class RecipientsConfig(AppConfig):
    name = "recipients"

    def ready(self) -> None:
        from core.audit_sql import audit_table_register
        from core.metrics import metrics_collector_register
        from core.personal_data import personal_data_register
        from core.roles import role_permissions_grant
        from recipients import checks  # noqa: F401  (registers the start-up check)
        from recipients.audit import CONSENT_EVENTS, PERSON_EVENTS
        from recipients.metrics import notice_metrics
        from recipients.privacy import PERSONAL_DATA
        from recipients.roles import GRANTS

        metrics_collector_register("notices", notice_metrics)
        audit_table_register(PERSON_EVENTS)
        audit_table_register(CONSENT_EVENTS)
        for entry in PERSONAL_DATA:
            personal_data_register(entry)
        role_permissions_grant(GRANTS)
