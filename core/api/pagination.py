import re
from base64 import b64decode
from urllib import parse

from rest_framework.pagination import Cursor, CursorPagination

from core.api.filters import MAX_ID
from core.exceptions import InvalidInput

_DIGITS = re.compile(r"[0-9]{1,19}")
_CURSOR_DEFAULTS = (("o", "0"), ("r", "0"), ("p", None))


class IdCursorPagination(CursorPagination):
    """Opaque cursors over the primary key, newest first: stable while rows are being added."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200

    def decode_cursor(self, request):
        """DRF's decoding, refusing what DRF lets through: a position that is not an id (it was
        compared with the id column: ``p=abc`` was a 500), characters outside base64 (DRF drops
        them and decodes the rest) and keys DRF never writes."""
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is None:
            return None
        try:
            tokens = parse.parse_qs(b64decode(encoded, validate=True).decode("ascii"), keep_blank_values=True)
        except (ValueError, UnicodeError):
            tokens = None
        if tokens is not None and set(tokens) <= {"o", "r", "p"} and all(len(v) == 1 for v in tokens.values()):
            offset, reverse, position = (tokens.get(key, [default])[0] for key, default in _CURSOR_DEFAULTS)
            if (
                _DIGITS.fullmatch(offset)
                and reverse in ("0", "1")
                and (position is None or (_DIGITS.fullmatch(position) and int(position) <= MAX_ID))
            ):
                return Cursor(
                    offset=min(int(offset), self.offset_cutoff),
                    reverse=reverse == "1",
                    position=None if position is None else int(position),
                )
        raise InvalidInput("The cursor is not one this API gave out.", code="invalid_cursor")

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and (not _DIGITS.fullmatch(raw) or not 1 <= int(raw) <= self.max_page_size):
            raise InvalidInput(f"limit is 1 to {self.max_page_size}.", code="invalid_limit")
        return super().get_page_size(request)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": self.max_page_size,
                    "default": self.page_size,
                }
        return parameters
