from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from core import checks, checks_production, metrics  # noqa: F401 - register the checks and the queue metrics
