from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from core import checks, checks_production, metrics  # noqa: F401 - register the checks and the queue metrics
        from core.personal_data import personal_data_register
        from core.privacy import PERSONAL_DATA

        for entry in PERSONAL_DATA:
            personal_data_register(entry)
