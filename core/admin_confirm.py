"""A confirmation page between choosing an admin action that moves money or cannot be undone
(a large approval, an erasure) and running it, in the pattern of Django's delete confirmation:
the action's first POST renders what will happen; only the page's own POST, carrying
``confirm=yes`` with the same selection and the CSRF token, runs it. Admin actions run only on
POST, so a GET never reaches them."""

from dataclasses import dataclass

from django.contrib.admin import helpers
from django.http import HttpRequest
from django.template.response import TemplateResponse

CONFIRM_FIELD = "confirm"


@dataclass(frozen=True)
class Confirmation:
    title: str
    summary: str
    lines: list[str]
    button: str
    warning: str = ""


def action_confirmed(request: HttpRequest) -> bool:
    return request.method == "POST" and request.POST.get(CONFIRM_FIELD) == "yes"


def action_confirmation_page(
    modeladmin, request: HttpRequest, *, action: str, selected: list[int], confirmation: Confirmation
) -> TemplateResponse:
    """The page asking to confirm ``action`` on the ``selected`` primary keys."""
    request.current_app = modeladmin.admin_site.name
    context = {
        **modeladmin.admin_site.each_context(request),
        "opts": modeladmin.model._meta,
        "title": confirmation.title,
        "summary": confirmation.summary,
        "lines": confirmation.lines,
        "warning": confirmation.warning,
        "button": confirmation.button,
        "action": action,
        "selected": selected,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "confirm_field": CONFIRM_FIELD,
    }
    return TemplateResponse(request, "admin/action_confirmation.html", context)
