"""Query filters shared by the list endpoints."""

import datetime

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field

MAX_ID = 2**63 - 1  # a BIGINT primary key


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(django_filters.NumberFilter):
    """Rows pointing at the object with this id (``?person=12``). The id is only compared, never
    looked up: django-filter's default for a foreign key (ModelChoiceFilter) answered 400 for an id
    that does not exist and an empty 200 for another brand's, which told whether the other brand's
    id exists. Now both match nothing; a value that is not an id is 400."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class _UTCIsoDateTimeField(IsoDateTimeField):
    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return value
        # PostgreSQL refuses offsets past ±15:59 that ISO 8601 (and Python) allow, e.g. +21:38:
        # compare in UTC. A year-1 date with a positive offset falls before year 1 in UTC.
        try:
            return value.astimezone(datetime.UTC)
        except OverflowError:
            raise ValidationError("The date is out of range.", code="invalid")


class DateTimeFilter(django_filters.IsoDateTimeFilter):
    """An RFC 3339 datetime with any offset."""

    field_class = _UTCIsoDateTimeField


class FilterSet(django_filters.FilterSet):
    """django-filter takes ``?status=`` (empty) as no filter; the schema declares an enum, an
    integer or a date-time there, which an empty value is not: 400, like any other wrong value."""

    def is_valid(self):
        valid = super().is_valid()
        for name, declared in self.filters.items():
            if not isinstance(declared, django_filters.CharFilter) and self.data.get(name) == "":
                self.form.add_error(name, ValidationError("This filter may not be empty.", code="blank"))
                valid = False
        return valid
