from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    name = "campaigns"

    def ready(self) -> None:
        from campaigns.matchers import BrandTopupMatcher
        from reconciliation.matching import register

        register(BrandTopupMatcher())

        from campaigns import webhook_kick

        webhook_kick.connect()
