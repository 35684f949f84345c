import pytest

from payouts.rails.routing import NoRoute, Route, RouteRule, route

RULES = [
    RouteRule(priority=10, currency="EUR", max_amount_minor=10_000_00, rail="sandbox", fallback_rail="sepa_file"),
    RouteRule(priority=20, currency="EUR", min_amount_minor=10_000_01, rail="sepa_file"),
    RouteRule(priority=30, currency="GBP", country="GB", rail="psp_api"),
    RouteRule(priority=30, currency="USD", country="US", rail="psp_api", fallback_rail="sandbox"),
    RouteRule(priority=99, rail="psp_api", fallback_rail="sepa_file"),  # catch-all
]
ALL_UP = {"sandbox": True, "sepa_file": True, "psp_api": True}


@pytest.mark.parametrize(
    ("currency", "country", "amount", "availability", "expected"),
    [
        ("EUR", "IT", 1_00, ALL_UP, ("sandbox", "sepa_file")),
        ("EUR", "IT", 10_000_00, ALL_UP, ("sandbox", "sepa_file")),  # range end is inclusive
        ("EUR", "IT", 10_000_01, ALL_UP, ("sepa_file", None)),
        ("EUR", "IT", 1_00, {**ALL_UP, "sandbox": False}, ("sepa_file", None)),  # primary down: fallback
        ("EUR", "IT", 1_00, {**ALL_UP, "sepa_file": False}, ("sandbox", None)),  # fallback down: none offered
        ("GBP", "GB", 5_00, ALL_UP, ("psp_api", None)),
        ("GBP", "IE", 5_00, ALL_UP, ("psp_api", "sepa_file")),  # country mismatch: the catch-all
        ("USD", "US", 5_00, {"sandbox": True}, ("sandbox", None)),
        # first matching rule has no rail up: a later, broader rule still routes it
        ("EUR", "IT", 10_000_01, {"psp_api": True}, ("psp_api", None)),
    ],
)
def test_routing_table(currency, country, amount, availability, expected):
    assert route(
        currency=currency, country=country, amount_minor=amount, rules=RULES, availability=availability
    ) == Route(*expected)


def test_priority_not_list_order_decides():
    rules = [RouteRule(priority=50, rail="psp_api"), RouteRule(priority=5, rail="sandbox")]

    assert route(currency="EUR", country="IT", amount_minor=1, rules=rules, availability=ALL_UP).primary_rail == (
        "sandbox"
    )


def test_equal_priorities_keep_list_order():
    rules = [RouteRule(priority=5, rail="psp_api"), RouteRule(priority=5, rail="sandbox")]

    assert route(currency="EUR", country="IT", amount_minor=1, rules=rules, availability=ALL_UP).primary_rail == (
        "psp_api"
    )


def test_disabled_rules_are_ignored():
    rules = [RouteRule(priority=1, rail="psp_api", enabled=False), RouteRule(priority=2, rail="sandbox")]

    assert route(currency="EUR", country="IT", amount_minor=1, rules=rules, availability=ALL_UP).primary_rail == (
        "sandbox"
    )


def test_availability_can_be_a_callable():
    chosen = route(currency="EUR", country="IT", amount_minor=1, rules=RULES, availability=lambda n: n == "sepa_file")

    assert chosen == ("sepa_file", None)


@pytest.mark.parametrize(
    ("currency", "availability"),
    [("CHF", {}), ("EUR", {"sandbox": False, "sepa_file": False, "psp_api": False})],
)
def test_no_route_is_an_error_not_a_guess(currency, availability):
    rules = RULES[:4]

    with pytest.raises(NoRoute) as raised:
        route(currency=currency, country="CH", amount_minor=1_00, rules=rules, availability=availability)

    assert raised.value.code == "payout_no_route"
