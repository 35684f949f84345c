from django.contrib import messages

from core.exceptions import ApplicationError


def report(request, exc: ApplicationError) -> None:
    """The one place the portal turns a service error into words for the brand."""
    messages.error(request, exc.message)
