"""The base class of every partner API endpoint: key authentication, scopes, the rate limit,
the error format, body size limit and Idempotency-Key handling. Querysets are always the
authenticated brand's own (``self.brand``); anything else answers 404."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.filters import OrderingFilter
from rest_framework.generics import GenericAPIView
from rest_framework.renderers import JSONRenderer

from core.api.auth import ApiKeyAuthentication, ApiKeyRateThrottle, HasScope
from core.api.errors import PayloadTooLarge, api_exception_handler
from core.api.idempotency import idempotency_claim, idempotency_complete, idempotency_release
from core.api.pagination import IdCursorPagination
from core.api.schema import ProblemAutoSchema
from core.exceptions import NotFound

IDEMPOTENT_METHODS = ("POST", "PATCH")


class _Replay(Exception):
    def __init__(self, record):
        self.record = record


class BrandAPIView(GenericAPIView):
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasScope]
    throttle_classes = [ApiKeyRateThrottle]
    schema = ProblemAutoSchema()
    required_scopes: dict[str, str] = {}
    # Top-level fields of a response set to null in its stored Idempotency-Key replay.
    replay_redacted_fields: tuple[str, ...] = ()
    filter_backends: list = []
    pagination_class = None

    @property
    def brand(self):
        """The key's brand; None only while drf-spectacular inspects the view without a request
        user (querysets filtered by None are empty)."""
        return getattr(self.request.user, "brand", None)

    def brand_object(self, queryset, pk):
        """``queryset`` (already the brand's) row ``pk``, or NotFound."""
        obj = queryset.filter(pk=pk).first()
        if obj is None:
            raise NotFound("Not found.")
        return obj

    def get_exception_handler(self):
        return api_exception_handler

    def initial(self, request, *args, **kwargs):
        self._idempotency = None
        length = request.META.get("CONTENT_LENGTH") or "0"
        if length.isdigit() and int(length) > settings.API_MAX_BODY_BYTES:
            raise PayloadTooLarge(f"The body is larger than {settings.API_MAX_BODY_BYTES} bytes.")
        super().initial(request, *args, **kwargs)
        key = request.headers.get("Idempotency-Key")
        # A method the view does not have answers 405 after initial(); claiming the key first
        # would store that 405 and use the key up.
        if request.method in IDEMPOTENT_METHODS and key is not None and hasattr(self, request.method.lower()):
            try:
                body = request._request.body
            except RequestDataTooBig:
                raise PayloadTooLarge("The request body is too large.")
            claim = idempotency_claim(brand=self.brand, key=key, method=request.method, path=request.path, body=body)
            if claim.replay:
                raise _Replay(claim.record)
            self._idempotency = claim.record

    def handle_exception(self, exc):
        if isinstance(exc, _Replay):
            record = exc.record
            response = HttpResponse(
                bytes(record.response_body or b""),
                status=record.response_status,
                content_type=record.response_content_type or "application/json",
            )
            response["Idempotent-Replayed"] = "true"
            return response
        if isinstance(exc, RequestDataTooBig):
            exc = PayloadTooLarge("The request body is too large.")
        return super().handle_exception(exc)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        record, self._idempotency = getattr(self, "_idempotency", None), None
        if record is not None:
            if response.status_code >= 500:
                idempotency_release(record=record)
            else:
                if hasattr(response, "render"):
                    response.render()
                idempotency_complete(
                    record=record,
                    status=response.status_code,
                    body=self._replay_body(response),
                    content_type=response.get("Content-Type", "application/json"),
                )
        return response

    def _replay_body(self, response) -> bytes:
        """The body a replay of this response sends: without ``replay_redacted_fields``, which
        the first answer shows once (a signing secret) and the stored record must not keep."""
        data = getattr(response, "data", None)
        if not self.replay_redacted_fields or not isinstance(data, dict):
            return response.content
        redacted = {**data, **{name: None for name in self.replay_redacted_fields if name in data}}
        return JSONRenderer().render(redacted)

    def dispatch(self, request, *args, **kwargs):
        try:
            return super().dispatch(request, *args, **kwargs)
        except Exception:
            record, self._idempotency = getattr(self, "_idempotency", None), None
            if record is not None:
                idempotency_release(record=record)
            raise


class BrandListAPIView(BrandAPIView):
    """A list endpoint: cursor pagination (``cursor``, ``limit``), django-filter
    ``filterset_class``, ``ordering`` over ``ordering_fields``."""

    pagination_class = IdCursorPagination
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    ordering_fields = ["id"]
    ordering = "-id"

    def list_response(self):
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
