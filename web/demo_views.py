"""The demo's own pages: import the demo statement (``web.demo_bank``) and a webhook receiver
to try the portal's webhooks with. Off unless ``DEMO_BANK_ENABLED`` (the ``local`` settings of
``make run``)."""

from django.conf import settings
from django.contrib import messages
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from web.demo_bank import demo_statement_import


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


_RECEIVED_KEY = "demo:webhooks:received"


@csrf_exempt
@require_http_methods(["GET", "POST"])
def demo_webhook_receiver(request: HttpRequest) -> HttpResponse:
    """A webhook endpoint to try the portal's webhooks with (demo only): register
    ``http://<host>:<port>/fake/webhooks/`` and watch what arrives here (GET), newest first."""
    if not getattr(settings, "DEMO_BANK_ENABLED", False):
        raise Http404
    received = cache.get(_RECEIVED_KEY, [])
    if request.method == "POST":
        entry = {
            "at": timezone.now().isoformat(timespec="seconds"),
            "signature": request.headers.get("JoyBack-Signature", ""),
            "body": request.body[:4000].decode("utf-8", "replace"),
        }
        cache.set(_RECEIVED_KEY, [entry, *received][:50], timeout=None)
        return JsonResponse({"received": True})
    return JsonResponse({"received": received}, json_dumps_params={"indent": 2})
