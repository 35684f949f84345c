from django.apps import AppConfig


class WebConfig(AppConfig):
    """The front door: every page (brand portal, claim pages, the demo) and every inbound webhook.
    Views parse input and call the domain apps' services; no models live here."""

    name = "web"
