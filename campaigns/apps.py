from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    name = "campaigns"

    def ready(self) -> None:
        from campaigns.api_keys import api_key_authenticate
        from campaigns.matchers import BrandTopupMatcher
        from core.api.auth import api_key_lookup_register
        from reconciliation.matching import register

        register(BrandTopupMatcher())
        api_key_lookup_register(api_key_authenticate)

        from campaigns import webhook_kick

        webhook_kick.connect()
