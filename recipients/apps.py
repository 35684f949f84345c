from django.apps import AppConfig


class RecipientsConfig(AppConfig):
    name = "recipients"

    def ready(self) -> None:
        from recipients import checks  # noqa: F401  (registers the start-up check)
