"""Start-up check: production must not derive the field keys from SECRET_KEY (see crypto.py)."""

import os

from django.conf import settings
from django.core.checks import Error, register

from recipients.crypto import PRODUCTION_SETTINGS


@register()
def field_keys_configured(app_configs=None, **kwargs):
    if getattr(settings, "SETTINGS_MODULE", "") != PRODUCTION_SETTINGS:
        return []
    return [
        Error(
            f"{name} is not set.",
            hint="Set it in the environment; crypto.py derives it from SECRET_KEY only outside production.",
            id="recipients.E001",
        )
        for name in ("FIELD_ENCRYPTION_KEY", "FIELD_FINGERPRINT_KEY")
        if not (getattr(settings, name, "") or os.environ.get(name, ""))
    ]
