"""Serializer fields that take exactly what the OpenAPI schema declares ("schema = server").

DRF coerces: its ``CharField`` turns the JSON number ``12`` into ``"12"``, its ``IntegerField`` the
string ``"12"`` into ``12``, its ``BooleanField`` ``"yes"`` into ``True``. The schema declares one
type, so a partner whose client sends another has a bug we should report, not paper over. Every
text field also refuses what PostgreSQL cannot store (NUL, lone surrogates: ``invalid_text``), and
datetimes are rendered in UTC: ``TIME_ZONE`` is Europe/Amsterdam, whose offset before 1937 was
+00:19:32 (local mean time), which RFC 3339 cannot express.

Serializers of the partner API use these fields, and ``ModelSerializer`` below maps model fields
to them. The body they read comes through ``DepthLimitedJSONParser``: Python's json module
recurses once per level, so a body of ~1,000 nested ``[`` raised RecursionError (a 500), and every
later walk over a deep value (validation, the jsonb adapter) would recurse as well. No API shape
nests deeper than a few levels; ``evidence`` is free-form, so the whole body may nest
``MAX_JSON_DEPTH`` levels (documented in the API description) and a deeper one answers 400
``json_too_deep``.
"""

import datetime
import re

from django.core.validators import ProhibitNullCharactersValidator
from django.utils import timezone
from rest_framework import exceptions as drf
from rest_framework import serializers
from rest_framework.parsers import JSONParser
from rest_framework.validators import ProhibitSurrogateCharactersValidator

# PostgreSQL text and jsonb refuse NUL, and UTF-8 cannot encode a lone surrogate (JSON's
# "\ud800" escape without its pair): either would fail at INSERT time as a 500.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

INVALID_TEXT = "invalid_text"
_INVALID_TEXT_MESSAGE = "Text may not contain NUL characters or unpaired surrogates."


def text_validate(value: str) -> None:
    if _UNSTORABLE.search(value):
        raise serializers.ValidationError(_INVALID_TEXT_MESSAGE, code=INVALID_TEXT)


class _Strict:
    """Refuses a JSON value of another type than ``json_types`` instead of coercing it."""

    json_types: tuple[type, ...] = (str,)

    def to_internal_value(self, data):
        if not isinstance(data, self.json_types) or (isinstance(data, bool) and bool not in self.json_types):
            self.fail("invalid")
        return super().to_internal_value(data)


class _Text(_Strict):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [
            v
            for v in self.validators
            if not isinstance(v, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator)
        ] + [text_validate]


class CharField(_Text, serializers.CharField):
    pass


class SlugField(_Text, serializers.SlugField):
    pass


class URLField(_Text, serializers.URLField):
    pass


class EmailField(_Text, serializers.EmailField):
    pass


class IPAddressField(_Text, serializers.IPAddressField):
    pass


class ChoiceField(serializers.ChoiceField):
    """A choice is given with its own JSON type: ``1`` is not the choice ``"1"``."""

    def to_internal_value(self, data):
        if _json_kind(data) not in {_json_kind(choice) for choice in self.choices}:
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


def _json_kind(value) -> type:
    for kind in (bool, str):  # before int: a bool is an int; str before type(): a TextChoices member is a str
        if isinstance(value, kind):
            return kind
    return float if isinstance(value, int | float) else type(value)


class IntegerField(_Strict, serializers.IntegerField):
    # A JSON number with no fraction (``5``, ``5.0``) is an integer to JSON Schema; a string is not.
    json_types = (int, float)


class BigIntegerField(_Strict, serializers.BigIntegerField):
    json_types = (int, float)


class BooleanField(_Strict, serializers.BooleanField):
    json_types = (bool,)


class DateTimeField(serializers.DateTimeField):
    """Parsed as DRF does; rendered in UTC with ``Z``."""

    def to_representation(self, value):
        if isinstance(value, datetime.datetime) and timezone.is_aware(value):
            return value.astimezone(datetime.UTC).isoformat().removesuffix("+00:00") + "Z"
        return super().to_representation(value)


MAX_JSON_DEPTH = 32


def json_validate(value) -> None:
    """Walks a parsed JSON value without recursion: every key and string must be storable text
    (``invalid_text``). Depth is bounded by the parser (``core.api.parsers``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            text_validate(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                text_validate(key)
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)


class JSONObjectField(serializers.DictField):
    """A free-form JSON object (``evidence``) that PostgreSQL's jsonb can store."""

    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        json_validate(data)
        return data


_STRICT = {
    serializers.CharField: CharField,
    serializers.SlugField: SlugField,
    serializers.URLField: URLField,
    serializers.EmailField: EmailField,
    serializers.IPAddressField: IPAddressField,
    serializers.IntegerField: IntegerField,
    serializers.BigIntegerField: BigIntegerField,
    serializers.BooleanField: BooleanField,
    serializers.DateTimeField: DateTimeField,
}


class ModelSerializer(serializers.ModelSerializer):
    """DRF's ModelSerializer building the fields above from model fields."""

    serializer_field_mapping = {
        model_field: _STRICT.get(field, field)
        for model_field, field in serializers.ModelSerializer.serializer_field_mapping.items()
    }
    serializer_choice_field = ChoiceField


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
