"""The API's JSON parser: DRF's, with a nesting limit.

Python's json module recurses once per level, so a body of ~1,000 nested ``[`` raised
RecursionError (a 500), and every later walk over a deep value (validation, the jsonb adapter)
would recurse as well. No API shape nests deeper than a few levels; ``evidence`` is free-form, so
the whole body may nest ``MAX_JSON_DEPTH`` levels (documented in the API description) and a
deeper one answers 400 ``json_too_deep``.
"""

from rest_framework import exceptions as drf
from rest_framework.parsers import JSONParser

from core.api.fields import MAX_JSON_DEPTH


class JSONTooDeep(drf.APIException):
    status_code = 400
    default_detail = f"The JSON body nests objects and arrays more than {MAX_JSON_DEPTH} levels deep."
    default_code = "json_too_deep"


def json_depth_check(value) -> None:
    """Raises JSONTooDeep when ``value`` nests deeper than MAX_JSON_DEPTH; walks without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_JSON_DEPTH:
                    raise JSONTooDeep()
                stack.append((child, depth + 1))


class DepthLimitedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise JSONTooDeep() from None
        if isinstance(data, dict | list):
            json_depth_check(data)
        return data
