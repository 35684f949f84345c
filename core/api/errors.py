"""One error format for the whole API: RFC 9457 problem details (``application/problem+json``).

Every error body has ``type`` (``urn:joyback:problem:<code>``), ``title``, ``status``, ``detail``
and a stable ``code`` (the table below, also in the OpenAPI description); field errors are listed
under ``errors`` as ``{field, code, message}`` with dotted paths (``events.3.email``); a service's
structured details are under ``details``. ``core.exceptions.ApplicationError`` subclasses map by
their own ``code`` and ``http_status``.
"""

import math

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework import serializers
from rest_framework.response import Response

from core.api.fields import MAX_JSON_DEPTH
from core.exceptions import ApplicationError

PROBLEM_CONTENT_TYPE = "application/problem+json"

# The codes a partner can rely on (services add their own ApplicationError codes; those are
# listed in the API description too).
ERROR_CODES: dict[str, str] = {
    "validation_error": "A field is missing or invalid; see `errors`.",
    "malformed_json": "The body is not valid JSON.",
    "json_too_deep": f"The body nests objects and arrays more than {MAX_JSON_DEPTH} levels deep.",
    "unsupported_media_type": "Send `Content-Type: application/json`.",
    "payload_too_large": "The body is larger than the API accepts.",
    "not_authenticated": "No API key was sent.",
    "invalid_api_key": "The API key is malformed, unknown or revoked.",
    "insufficient_scope": "The API key lacks the scope this call needs.",
    "brand_suspended": "The brand is suspended.",
    "plan_refuses": "403: the brand's plan does not include this trigger or channel; `detail` names both.",
    "not_found": "No such object for this brand (objects of other brands are never visible).",
    "method_not_allowed": "The method is not allowed on this path.",
    "rate_limited": "Too many requests for this key; retry after `Retry-After` seconds.",
    "idempotency_key_reused": "This Idempotency-Key was used with a different request.",
    "idempotency_in_flight": "A request with this Idempotency-Key is still being processed.",
    "invalid_idempotency_key": "Idempotency-Key must be 1 to 255 visible ASCII characters (no spaces).",
    "idempotency_conflict": "The event's external_id was sent before with different content.",
    "order_not_found": "No purchase event of this brand carries this `order_id`.",
    "idempotency_key_required": "This call needs an `Idempotency-Key` header.",
    "invalid_transition": "The object is not in a state that allows this change.",
    "invalid_cursor": "The pagination cursor is not valid.",
    "invalid_limit": "`limit` is out of range.",
    "insufficient_funds": "Not enough money on the account.",
    "ingest_failed": "503: the event could not be stored this time (nothing was); send it again.",
    "event_contended": "503 (bulk item): another request is storing this event; send it again.",
}

_DRF_CODES = {
    drf.ParseError: "malformed_json",
    drf.UnsupportedMediaType: "unsupported_media_type",
    drf.NotAuthenticated: "not_authenticated",
    drf.AuthenticationFailed: "invalid_api_key",
    drf.PermissionDenied: "insufficient_scope",
    drf.NotFound: "not_found",
    drf.MethodNotAllowed: "method_not_allowed",
    drf.Throttled: "rate_limited",
    drf.NotAcceptable: "not_acceptable",
}


class PayloadTooLarge(drf.APIException):
    status_code = 413
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


class FieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField(
        help_text="Dotted path of the field, e.g. `events.3.email`; `non_field_errors` for the whole object."
    )
    code = serializers.CharField()
    message = serializers.CharField()


class ProblemSerializer(serializers.Serializer):
    """RFC 9457 problem details."""

    type = serializers.CharField(help_text="`urn:joyback:problem:<code>`")
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    code = serializers.CharField(help_text="Stable machine-readable error code.")
    errors = FieldErrorSerializer(many=True, required=False)
    details = serializers.DictField(required=False, help_text="Structured context from the service.")


def _title(code: str) -> str:
    return code.replace("_", " ").capitalize()


def problem(
    *, status: int, code: str, detail: str, errors: list | None = None, details: dict | None = None, headers=None
) -> Response:
    body = {
        "type": f"urn:joyback:problem:{code}",
        "title": _title(code),
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors:
        body["errors"] = errors
    if details:
        body["details"] = details
    return Response(body, status=status, headers=headers, content_type=PROBLEM_CONTENT_TYPE)


def _flatten(detail, path: str = "") -> list[dict]:
    """DRF's nested error detail → ``[{field, code, message}]`` with dotted paths."""
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            out += _flatten(value, f"{path}.{key}" if path else str(key))
        return out
    if isinstance(detail, list):
        if all(isinstance(item, str) for item in detail):
            return [
                {
                    "field": path or "non_field_errors",
                    "code": getattr(item, "code", "invalid") or "invalid",
                    "message": str(item),
                }
                for item in detail
            ]
        out = []
        for index, value in enumerate(detail):
            if value:  # a list serializer reports {} for the items that are fine
                out += _flatten(value, f"{path}.{index}" if path else str(index))
        return out
    return [
        {
            "field": path or "non_field_errors",
            "code": getattr(detail, "code", "invalid") or "invalid",
            "message": str(detail),
        }
    ]


def _message_dict_errors(details: dict) -> list[dict] | None:
    """A Django ``message_dict`` ({field: [messages]}) from a service's validation → field errors."""
    if details and all(isinstance(v, list) and all(isinstance(m, str) for m in v) for v in details.values()):
        return [
            {"field": field, "code": "invalid", "message": m} for field, messages in details.items() for m in messages
        ]
    return None


def api_exception_handler(exc, context):
    """Every error the API answers, as problem details. Returns None only for unexpected
    exceptions (bugs), which Django turns into a 500."""
    if isinstance(exc, ApplicationError):
        errors = _message_dict_errors(exc.details)
        return problem(
            status=exc.http_status,
            code=exc.code,
            detail=exc.message,
            errors=errors,
            details=None if errors else exc.details,
        )
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    if isinstance(exc, drf.ValidationError):
        errors = _flatten(exc.detail)
        return problem(status=400, code="validation_error", detail="The request has invalid fields.", errors=errors)
    if not isinstance(exc, drf.APIException):
        return None
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if isinstance(exc, drf.Throttled) and exc.wait is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.wait)))
    code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), None)
    if isinstance(exc, drf.AuthenticationFailed | drf.PermissionDenied):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else code
        code = {"authentication_failed": "invalid_api_key", "permission_denied": "insufficient_scope"}.get(code, code)
    if code is None:
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if isinstance(exc, drf.NotFound):
        detail = "Not found."
    return problem(status=exc.status_code, code=code, detail=str(detail), headers=headers)
