"""The demo's own admin page: import the demo statement (``core.demo_bank``). Off unless
``DEMO_BANK_ENABLED`` (the ``local`` settings of ``make run``)."""

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from core.demo_bank import demo_statement_import


@require_POST
def demo_statement_import_view(request: HttpRequest) -> HttpResponse:
    if not getattr(settings, "DEMO_BANK_ENABLED", False):
        raise Http404
    if not request.user.has_perm("reconciliation.reconcile_statement"):
        raise PermissionDenied
    statement_id, payouts, result = demo_statement_import(actor=request.user)
    messages.success(
        request,
        f"Imported {statement_id}: {payouts} payout(s) and two lines nobody explained. Matched "
        f"{result.matched_total}, waiting in suspense {result.unmatched + result.suggested}.",
    )
    return redirect("reconciliation_dashboard")


def demo_context(request: HttpRequest) -> dict:
    """Template context: whether the demo's bank is on (the dashboard then offers its statement)."""
    return {"demo_bank": getattr(settings, "DEMO_BANK_ENABLED", False)}
