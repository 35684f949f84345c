import pytest

from core.exceptions import InvalidInput
from payouts.iso import REASON_CODES, needs_new_account_details, reason_text
from payouts.rails import get_rail, rail_names
from payouts.rails.base import Capabilities, FinalRailError, validate_end_to_end_id
from payouts.rails.sandbox import SandboxRail
from tests.payouts.rail_builders import rail_payment


@pytest.mark.parametrize("value", ["PO-1", "A" * 35, "abc/def:(1)?+.,' x"])
def test_valid_end_to_end_ids(value):
    assert validate_end_to_end_id(value) == value


@pytest.mark.parametrize("value", ["", "A" * 36, "/PO-1", "PO-1/", "PO//1", "PO_1", "PO-ü", " PO-1", "PO&1"])
def test_invalid_end_to_end_ids(value):
    with pytest.raises(InvalidInput):
        validate_end_to_end_id(value)


def test_payment_normalises_iban_and_bic():
    payment = rail_payment(creditor_iban="it60 x054 2811 1010 0000 0123 456", creditor_bic="bpmoit22xxx")

    assert payment.creditor_iban == "IT60X0542811101000000123456"
    assert payment.creditor_bic == "BPMOIT22XXX"


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"amount_minor": 0}, "invalid_amount"),
        ({"amount_minor": 12.5}, "invalid_amount"),
        ({"amount_minor": True}, "invalid_amount"),
        ({"currency": "eur"}, "unknown_currency"),
        ({"creditor_country": "Italy"}, "invalid_country"),
        ({"creditor_name": " "}, "invalid_creditor"),
        ({"creditor_iban": None}, "invalid_creditor"),
        ({"creditor_iban": "NOT AN IBAN"}, "invalid_iban"),
        ({"creditor_bic": "XX"}, "invalid_bic"),
        ({"end_to_end_id": "NOT PROVIDED//"}, "invalid_end_to_end_id"),
    ],
)
def test_payment_refuses_bad_values(overrides, code):
    with pytest.raises(InvalidInput) as raised:
        rail_payment(**overrides)

    assert raised.value.code == code


def test_capabilities_support_check():
    caps = Capabilities(
        currencies=frozenset({"EUR"}),
        countries=frozenset({"IT"}),
        instant=True,
        max_amount_minor=100,
        verify_payee=True,
        file_based=False,
    )

    assert caps.supports(currency="EUR", country="IT", amount_minor=100)
    assert not caps.supports(currency="EUR", country="IT", amount_minor=101)
    assert not caps.supports(currency="GBP", country="IT", amount_minor=1)
    assert not caps.supports(currency="EUR", country="FR", amount_minor=1)


def test_final_error_carries_iso_text():
    error = FinalRailError("refused", reason_code="AC04")

    assert (error.code, error.reason_code, error.reason_text) == (
        "rail_rejected",
        "AC04",
        "The bank account is closed.",
    )


def test_registry_knows_the_five_rails_and_refuses_others(settings):
    settings.PAYOUT_RAILS = {}

    assert rail_names() == ["paypal", "psp_api", "psp_instant", "sandbox", "sepa_file"]
    with pytest.raises(InvalidInput) as raised:
        get_rail("carrier_pigeon")
    assert raised.value.code == "unknown_rail"


def test_default_rail_is_configurable(settings, sandbox_memory):
    settings.PAYOUT_DEFAULT_RAIL = "sandbox_usd"
    settings.PAYOUT_RAILS = {
        "sandbox_usd": {"BACKEND": "payouts.rails.sandbox.SandboxRail", "OPTIONS": {"currencies": ("USD",)}},
    }

    rail = get_rail()

    assert isinstance(rail, SandboxRail)
    assert rail.name == "sandbox_usd"
    assert rail.capabilities().currencies == {"USD"}


def test_reason_texts():
    required = {
        "AC01",
        "AC04",
        "AC06",
        "AG01",
        "AM04",
        "AM05",
        "BE04",
        "MD07",
        "MS02",
        "MS03",
        "RC01",
        "RR01",
        "RR02",
        "RR03",
        "RR04",
        "FF01",
        "TM01",
        "DUPL",
    }
    assert required <= set(REASON_CODES)
    assert reason_text(" ac04 ") == "The bank account is closed."
    assert reason_text("ZZ99") == "Reason code ZZ99 (not in our table)."
    assert reason_text(None) == "No reason was given."
    assert needs_new_account_details("AC01") and not needs_new_account_details("AM04")
