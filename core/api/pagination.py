from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination

from core.exceptions import InvalidInput


class IdCursorPagination(CursorPagination):
    """Opaque cursors over the primary key, newest first: stable while rows are being added."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200

    def decode_cursor(self, request):
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise InvalidInput("The cursor is not one this API gave out.", code="invalid_cursor")

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and (not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size):
            raise InvalidInput(f"limit is 1 to {self.max_page_size}.", code="invalid_limit")
        return super().get_page_size(request)
