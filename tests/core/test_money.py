from decimal import Decimal

import pytest
from django.utils import translation
from hypothesis import given
from hypothesis import strategies as st
from moneyed import Money

from core.exceptions import InvalidInput
from core.money import (
    format_minor,
    from_minor,
    minor_to_decimal,
    round_to_minor,
    split_largest_remainder,
    to_minor,
    validate_currency,
)


@pytest.mark.parametrize(
    ("amount", "currency", "expected"),
    [
        (Decimal("12.34"), "EUR", 1234),
        ("0.01", "EUR", 1),
        (7, "EUR", 700),
        ("-5.50", "GBP", -550),
        ("1500", "JPY", 1500),
        ("1.234", "BHD", 1234),
        (Decimal("10.10"), "EUR", 1010),
    ],
)
def test_to_minor_is_exact(amount, currency, expected):
    assert to_minor(amount, currency) == expected


def test_to_minor_takes_the_currency_from_money():
    assert to_minor(Money("3.21", "EUR")) == 321


def test_to_minor_refuses_a_float():
    # 0.1 + 0.2 style errors would move money nobody asked for.
    with pytest.raises(TypeError):
        to_minor(12.34, "EUR")


@pytest.mark.parametrize(("amount", "currency"), [("12.345", "EUR"), ("0.001", "EUR"), ("1.5", "JPY")])
def test_to_minor_refuses_more_decimals_than_the_currency_has(amount, currency):
    with pytest.raises(InvalidInput) as exc:
        to_minor(amount, currency)
    assert exc.value.code == "invalid_amount"


@pytest.mark.parametrize("amount", ["abc", "NaN", "Infinity", ""])
def test_to_minor_refuses_what_is_not_an_amount(amount):
    with pytest.raises(InvalidInput) as exc:
        to_minor(amount, "EUR")
    assert exc.value.code == "invalid_amount"


def test_to_minor_needs_a_currency():
    with pytest.raises(InvalidInput) as exc:
        to_minor("1.00")
    assert exc.value.code == "unknown_currency"


@pytest.mark.parametrize(
    "fn", [lambda: to_minor("1.00", "XYZ"), lambda: from_minor(100, "XYZ"), lambda: round_to_minor(Decimal("1"), "XYZ")]
)
def test_unknown_currency_is_refused(fn):
    with pytest.raises(InvalidInput) as exc:
        fn()
    assert exc.value.code == "unknown_currency"


def test_validate_currency_normalises_and_refuses_unsupported():
    assert validate_currency(" eur ") == "EUR"
    with pytest.raises(InvalidInput) as exc:
        validate_currency("JPY")  # a real currency the platform does not pay out in
    assert exc.value.code == "unknown_currency"


def test_from_minor_gives_money():
    assert from_minor(1234, "EUR") == Money("12.34", "EUR")
    assert from_minor(-1, "EUR") == Money("-0.01", "EUR")
    assert from_minor(1500, "JPY") == Money("1500", "JPY")


def test_minor_to_decimal_and_format_keep_the_currency_places():
    assert minor_to_decimal(100, "EUR") == Decimal("1.00")
    assert str(minor_to_decimal(100, "EUR")) == "1.00"
    assert format_minor(123456, "EUR") == "€1,234.56"
    with translation.override("it"):
        assert format_minor(123456, "EUR") == "1.234,56\xa0€"
        assert format_minor(-350, "GBP") == "-3,50\xa0£"
        assert format_minor(123456, "EUR", with_currency=False) == "1.234,56"
    assert format_minor(100, "JPY") == "¥100"


@given(amount_minor=st.integers(min_value=-(10**15), max_value=10**15))
def test_from_minor_and_to_minor_round_trip(amount_minor):
    assert to_minor(from_minor(amount_minor, "EUR")) == amount_minor


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.005", 1),  # half up, not banker's rounding (which would give 0)
        ("0.015", 2),
        ("0.025", 3),
        ("0.0049", 0),
        ("-0.005", -1),  # half away from zero
        ("12.344999", 1234),
    ],
)
def test_round_to_minor_rounds_half_up(value, expected):
    assert round_to_minor(Decimal(value), "EUR") == expected


def test_split_largest_remainder_gives_the_leftover_cents_to_the_largest_remainders():
    assert split_largest_remainder(100, [1, 1, 1]) == [34, 33, 33]
    assert split_largest_remainder(10, [1, 2]) == [3, 7]
    assert split_largest_remainder(-100, [1, 1, 1]) == [-34, -33, -33]
    assert split_largest_remainder(5, [0, 1]) == [0, 5]
    assert split_largest_remainder(100, [Decimal("0.5"), Decimal("0.25"), Decimal("0.25")]) == [50, 25, 25]


@pytest.mark.parametrize("weights", [[], [0, 0], [1, -1]])
def test_split_largest_remainder_refuses_bad_weights(weights):
    with pytest.raises(ValueError):
        split_largest_remainder(100, weights)


@given(
    total=st.integers(min_value=-(10**12), max_value=10**12),
    weights=st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=20).filter(any),
)
def test_split_largest_remainder_parts_add_up_and_stay_within_one_of_the_exact_share(total, weights):
    parts = split_largest_remainder(total, weights)

    assert len(parts) == len(weights)
    assert sum(parts) == total
    weight_sum = sum(weights)
    for part, weight in zip(parts, weights, strict=True):
        exact = Decimal(total) * weight / weight_sum
        assert abs(part - exact) < 1
        if weight == 0:
            assert part == 0
