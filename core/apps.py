from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from core import checks  # noqa: F401 - registers the production safety checks
        from core.personal_data import personal_data_register
        from core.privacy import PERSONAL_DATA

        for entry in PERSONAL_DATA:
            personal_data_register(entry)
