from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    name = "campaigns"

    def ready(self) -> None:
        from campaigns.api_keys import api_key_authenticate
        from campaigns.audit import CAMPAIGN_EVENTS, REWARD_EVENTS
        from campaigns.matchers import BrandTopupMatcher
        from campaigns.metrics import webhook_metrics
        from campaigns.platforms import PlatformWebhooks, platform_names, platforms_production_checks
        from campaigns.privacy import PERSONAL_DATA
        from campaigns.roles import GRANTS
        from campaigns.webhook_kick import audit_rows_written
        from campaigns.webhooks import COLLECTORS, webhook_collector_register
        from core.api.auth import api_key_lookup_register
        from core.audit_sql import audit_table_register
        from core.checks import integration_checks_register
        from core.hooks import AUDIT_ROWS_WRITTEN, hook_register
        from core.metrics import metrics_collector_register
        from core.personal_data import personal_data_register
        from core.roles import role_permissions_grant
        from core.webhooks_in import inbound_handler_register
        from reconciliation.matching import register

        register(BrandTopupMatcher())
        for collector in COLLECTORS:
            webhook_collector_register(collector)
        api_key_lookup_register(api_key_authenticate)
        hook_register(AUDIT_ROWS_WRITTEN, audit_rows_written)
        metrics_collector_register("webhooks", webhook_metrics)
        for entry in PERSONAL_DATA:
            personal_data_register(entry)
        audit_table_register(REWARD_EVENTS)
        audit_table_register(CAMPAIGN_EVENTS)
        for name in platform_names():
            inbound_handler_register(name, PlatformWebhooks(name))
        integration_checks_register(platforms_production_checks)
        role_permissions_grant(GRANTS)
