from django.apps import AppConfig


class PayoutsConfig(AppConfig):
    name = "payouts"

    def ready(self) -> None:
        from django.core import checks

        from campaigns.webhooks import webhook_collector_register
        from core.audit_sql import audit_table_register
        from core.hooks import BANK_ACCOUNT_CHANGED, REWARD_CHANGED, hook_register
        from core.metrics import metrics_collector_register
        from core.personal_data import personal_data_register
        from core.roles import role_permissions_grant
        from core.webhooks_in import inbound_handler_register
        from payouts import audit, hooks, paypal_webhooks, wise_webhooks
        from payouts.matchers import MATCHERS
        from payouts.metrics import payout_metrics
        from payouts.notices import notice_render
        from payouts.privacy import PERSONAL_DATA
        from payouts.rails import paypal
        from payouts.rails.psp_api import requirements_source
        from payouts.roles import GRANTS
        from payouts.selectors import bank_accounts_paid, bank_postings_ahead, payout_exceptions
        from payouts.webhook_sources import PAYOUT_EVENTS
        from recipients.accounts import requirements_source_register
        from recipients.selectors import iban_proof_register
        from recipients.services.notices import notice_renderer_register
        from reconciliation.bank_selectors import register_bank_postings_ahead, register_exception_source
        from reconciliation.matching import register

        for matcher in MATCHERS:
            register(matcher)
        register_exception_source(payout_exceptions)
        register_bank_postings_ahead(bank_postings_ahead)
        webhook_collector_register(PAYOUT_EVENTS)
        hook_register(REWARD_CHANGED, hooks.rewards_changed, in_transaction=True)
        hook_register(BANK_ACCOUNT_CHANGED, hooks.bank_account_changed)
        requirements_source_register(requirements_source)
        notice_renderer_register(notice_render)
        iban_proof_register(bank_accounts_paid)
        metrics_collector_register("payouts", payout_metrics)
        for entry in PERSONAL_DATA:
            personal_data_register(entry)
        audit_table_register(audit.PAYOUT_EVENTS)
        audit_table_register(audit.PAYOUT_BATCH_EVENTS)
        inbound_handler_register("wise", wise_webhooks.handler)
        role_permissions_grant(GRANTS)
        inbound_handler_register("paypal", paypal_webhooks.handler)
        checks.register(paypal.production_checks, checks.Tags.security)
