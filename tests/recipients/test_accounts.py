"""Local bank accounts: the account requirements (the PSP's contract, else the built-in one) and
``account_normalise`` — each wrong field said plainly, what a maintained library knows checked,
the PSP's own checks (the UK modulus check) asked through the contract's ``validationAsync``."""

import json

import pytest
from django.core.cache import cache

from core.exceptions import InvalidInput
from payouts.rails.base import RetryableRailError
from payouts.rails.psp_api import WiseRail
from recipients import accounts, crypto
from recipients.accounts import AccountField, AccountType, account_normalise, account_types
from tests.fakes.wise_server import uk_account_number

SORT_CODE = "040075"
US_ADDRESS = {
    "address.country": "US",
    "address.state": "NY",
    "address.city": "New York",
    "address.firstLine": "1 Main Street",
    "address.postCode": "10001",
}


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()


def aba(**extra) -> dict:
    return {"abartn": "026009593", "accountNumber": "12345678", "accountType": "CHECKING", **US_ADDRESS, **extra}


def test_a_sort_code_account_is_normalised_masked_and_fingerprinted_without_its_holder():
    account = account_normalise(
        kind="sort_code", currency="gbp", details={"sortCode": "04-00-75", "accountNumber": "3777 8842"}
    )

    assert (account.kind, account.country, account.currency) == ("sort_code", "GB", "GBP")
    assert account.masked == "GB 04-00-75 ****8842"
    assert account.normalised == "GB:GBP:sort_code:accountNumber=37778842;sortCode=040075"
    assert json.loads(account.secret) == {"accountNumber": "37778842", "legalType": "PRIVATE", "sortCode": "040075"}


def test_the_same_us_account_with_another_address_is_the_same_account():
    home = account_normalise(kind="aba", currency="USD", details=aba())
    moved = account_normalise(kind="aba", currency="USD", details=aba(**{"address.city": "Boston"}))

    assert crypto.iban_fingerprint(home.normalised) == crypto.iban_fingerprint(moved.normalised)
    assert home.secret != moved.secret  # the newest address is what is stored and paid with
    assert home.masked == "US 026009593 ****5678"


def test_a_bad_aba_routing_checksum_is_refused_plainly():
    with pytest.raises(InvalidInput) as refused:
        account_normalise(kind="aba", currency="USD", details=aba(abartn="026009594"))

    assert refused.value.code == "invalid_account"
    assert refused.value.details["fields"] == {
        "abartn": "The ABA routing number is not valid: its check digit is wrong. Please check it for a typo."
    }


def test_missing_and_malformed_fields_are_each_named():
    with pytest.raises(InvalidInput) as refused:
        account_normalise(kind="aba", currency="USD", details=aba(accountType="", accountNumber="12ab"))

    assert set(refused.value.details["fields"]) == {"accountType", "accountNumber"}
    assert "Account type is required." in refused.value.message


def test_a_us_address_needs_its_state_once_the_country_is_known():
    details = aba()
    del details["address.state"]

    with pytest.raises(InvalidInput) as refused:
        account_normalise(kind="aba", currency="USD", details=details)

    assert refused.value.details["fields"] == {"address.state": "State is required."}


@pytest.mark.parametrize(
    ("kind", "currency", "details", "field"),
    [
        ("sort_code", "USD", {"sortCode": SORT_CODE, "accountNumber": "37778842"}, "type"),
        ("sort_code", "GBP", {"sortCode": SORT_CODE, "accountNumber": "37778842", "bic": "X"}, "bic"),
        ("sort_code", "GBP", {"sortCode": "04007", "accountNumber": "37778842"}, "sortCode"),
    ],
)
def test_an_account_of_the_wrong_kind_or_with_unknown_fields_is_refused(kind, currency, details, field):
    with pytest.raises(InvalidInput) as refused:
        account_normalise(kind=kind, currency=currency, details=details)

    assert field in refused.value.details["fields"]


def test_an_iban_goes_through_the_iban_check():
    account = account_normalise(kind="iban", currency="GBP", details={"iban": "GB29 NWBK 6016 1331 9268 19"})

    assert (account.kind, account.currency, account.secret) == ("iban", "", "GB29NWBK60161331926819")


def test_without_a_psp_the_built_in_requirements_answer():
    assert [t.type for t in account_types(currency="GBP")] == ["sort_code", "iban"]
    assert [t.type for t in account_types(currency="USD")] == ["aba"]
    assert [t.type for t in account_types(currency="EUR")] == ["iban"]


def test_the_psps_requirements_are_read_once_and_cached(psp):
    first = account_types(currency="GBP")
    asked = len(psp.state.requests)

    assert account_types(currency="GBP") == first
    assert len(psp.state.requests) == asked == 1
    sort_code = next(t for t in first if t.type == "sort_code")
    assert {f.key for f in sort_code.asked} == {"sortCode", "accountNumber"}
    assert sort_code.fields[-1].check_url.endswith("/v1/validators/sort-code-account-number")


def test_a_bad_sort_code_modulus_is_refused_by_the_psps_check(psp):
    with pytest.raises(InvalidInput) as refused:
        account_normalise(
            kind="sort_code", currency="GBP", details={"sortCode": SORT_CODE, "accountNumber": "37778842"}
        )

    assert refused.value.details["fields"] == {"accountNumber": "Please enter a valid account number."}
    good = account_normalise(
        kind="sort_code",
        currency="GBP",
        details={"sortCode": SORT_CODE, "accountNumber": uk_account_number(SORT_CODE, 1)},
    )
    assert good.kind == "sort_code"


def test_a_psp_that_cannot_check_does_not_block_the_person(psp):
    psp.fail_next("GET", "/v1/validators/", status=503)

    account = account_normalise(
        kind="sort_code", currency="GBP", details={"sortCode": SORT_CODE, "accountNumber": "37778842"}
    )

    assert account.masked == "GB 04-00-75 ****8842"  # the rail refuses it later if it is wrong


def test_an_unreachable_psp_falls_back_to_the_built_in_requirements(psp):
    psp.fail_next("GET", "/v1/account-requirements", status=503)

    assert [t.type for t in account_types(currency="USD")] == ["aba"]
    assert account_normalise(kind="aba", currency="USD", details=aba()).country == "US"


def test_the_psps_check_is_never_sent_to_another_host(psp):
    rail = WiseRail(base_url=psp.base_url, api_token=psp.token, profile_id=psp.profile_id)
    asked = len(psp.state.requests)

    with pytest.raises(RetryableRailError):
        rail.account_field_check(url="https://attacker.example/v1/validators/x", params={"accountNumber": "1"})

    assert len(psp.state.requests) == asked


def test_a_type_that_names_no_account_is_refused_rather_than_merging_its_holders(monkeypatch):
    # Wise documents recipient types identified by an e-mail address alone: every such account
    # would share one fingerprint, and people are found by their account's fingerprint.
    email_type = AccountType("email", "E-mail", (AccountField("email", "E-mail", required=True),))
    monkeypatch.setattr(accounts, "account_types", lambda **_: [email_type])

    with pytest.raises(InvalidInput) as refused:
        account_normalise(kind="email", currency="EUR", details={"email": "ann@bank.example"})

    assert refused.value.code == "invalid_account" and "type" in refused.value.details["fields"]


def test_one_account_typed_with_compatibility_digits_or_lower_case_has_one_fingerprint():
    plain = account_normalise(kind="aba", currency="USD", details=aba())
    wide = account_normalise(
        kind="aba", currency="USD", details=aba(abartn="０２６００９５９３", accountNumber="1234 5678")
    )

    assert wide.normalised == plain.normalised
    assert json.loads(wide.secret)["abartn"] == "026009593"  # stored and sent as ASCII digits


def test_a_short_account_number_is_never_shown_whole():
    short = account_normalise(kind="aba", currency="USD", details=aba(accountNumber="4321"))

    assert short.masked == "US 026009593 ****21"


def test_only_values_the_contract_offers_are_sent_to_the_psp_to_refresh_it(psp):
    base = account_types(currency="USD", kind="aba")
    asked = len(psp.state.requests)

    for made_up in ("ZZ", "A" * 500, "US' OR 1=1"):
        assert account_types(currency="USD", kind="aba", refresh={"address.country": made_up}) == base
    assert len(psp.state.requests) == asked  # no PSP request per invented value

    account_types(currency="USD", kind="aba", refresh={"address.country": "US"})
    assert len(psp.state.requests) == asked + 1  # a real choice is refreshed
