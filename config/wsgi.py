import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

application = get_wsgi_application()

# gunicorn runs no system checks: without this a production server with the sandbox rail would start.
from core.checks import refuse_unsafe_start  # noqa: E402

refuse_unsafe_start()
