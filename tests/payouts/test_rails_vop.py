"""Verification of Payee through the EPC VOP API (payouts.rails.vop) against its local fake: the
four answers, the request the scheme asks for, and errors that are retried vs checks that are
simply not possible."""

import uuid

import pytest

from payouts.rails import get_rail
from payouts.rails.base import PayeeMatch, RetryableRailError
from payouts.rails.vop import EpcVopClient, payee_verify, vop_provider
from tests.campaigns.factories import make_iban

IBAN = "IT60X0542811101000000123456"


def client(fake_vop, **options) -> EpcVopClient:
    return EpcVopClient(
        base_url=fake_vop.base_url, requester_bic="ABNANL2A", api_token=fake_vop.token, timeout_seconds=1.0, **options
    )


@pytest.mark.parametrize(
    ("asked", "outcome", "suggested"),
    [
        ("Giulia Rossi", PayeeMatch.MATCH, None),
        ("ROSSI, giulia", PayeeMatch.MATCH, None),  # case, punctuation and word order do not matter
        ("G. Rossi", PayeeMatch.CLOSE_MATCH, "Giulia Rossi"),
        ("Giulia Rosi", PayeeMatch.CLOSE_MATCH, "Giulia Rossi"),
        ("Mario Bianchi", PayeeMatch.NO_MATCH, None),
    ],
)
def test_the_banks_answer_is_read(fake_vop, asked, outcome, suggested):
    fake_vop.holder(IBAN, "Giulia Rossi")

    result = client(fake_vop).verify(name=asked, iban=IBAN)

    assert (result.outcome, result.suggested_name) == (outcome, suggested)


def test_a_bank_outside_the_scheme_cannot_check(fake_vop):
    assert client(fake_vop).verify(name="Giulia Rossi", iban=IBAN).outcome is PayeeMatch.NOT_POSSIBLE


def test_the_request_has_the_scheme_shape(fake_vop):
    fake_vop.holder(IBAN, "Giulia Rossi")

    client(fake_vop).verify(name="Giulia Rossi", iban=IBAN)

    sent = fake_vop.requests[-1]
    assert uuid.UUID(sent.headers["x-request-id"]) and sent.headers["x-request-timestamp"].endswith("Z")
    assert sent.json() == {
        "party": {"name": "Giulia Rossi"},
        "partyAccount": {"iban": IBAN},
        "partyAgent": {"financialInstitutionId": {"bicFi": "BLOPIT22"}},  # the payee's bank, from the IBAN
        "requestingAgent": {"financialInstitutionId": {"bicFi": "ABNANL2A"}},
    }


def test_no_bic_for_the_iban_means_not_possible_without_asking(fake_vop):
    unknown_bank = make_iban("IT", "X9999911101000000123456")

    assert client(fake_vop).verify(name="Giulia Rossi", iban=unknown_bank).outcome is PayeeMatch.NOT_POSSIBLE
    assert fake_vop.calls("POST") == 0


@pytest.mark.parametrize("status", [500, 503, 429, 401])
def test_service_errors_are_retried(fake_vop, status):
    fake_vop.fail_next("POST", "/vop/", status=status)

    with pytest.raises(RetryableRailError):
        client(fake_vop).verify(name="Giulia Rossi", iban=IBAN)


def test_an_answer_for_another_request_is_not_trusted(fake_vop):
    fake_vop.fail_next("POST", "/vop/", status=200, body={"partyNameMatch": "MTCH"})  # no X-Request-ID echoed

    with pytest.raises(RetryableRailError):
        client(fake_vop).verify(name="Giulia Rossi", iban=IBAN)


def test_a_request_the_service_refuses_is_not_possible(fake_vop):
    fake_vop.fail_next("POST", "/vop/", status=400)

    assert client(fake_vop).verify(name="Giulia Rossi", iban=IBAN).outcome is PayeeMatch.NOT_POSSIBLE


def test_a_slow_service_is_retried(fake_vop):
    fake_vop.delay_next("POST", "/vop/", seconds=2.0, after_processing=False)

    with pytest.raises(RetryableRailError):
        client(fake_vop).verify(name="Giulia Rossi", iban=IBAN)


def test_unconfigured_means_not_possible(settings):
    settings.PAYOUT_VOP = {}

    assert not vop_provider().configured
    assert payee_verify(name="Giulia Rossi", iban=IBAN).outcome is PayeeMatch.NOT_POSSIBLE
    assert get_rail("sepa_file").capabilities().verify_payee is False


def test_the_file_rail_checks_through_the_configured_service(fake_vop):
    fake_vop.holder(IBAN, "Giulia Rossi")
    rail = get_rail("sepa_file")

    assert rail.capabilities().verify_payee is True
    assert rail.verify_payee(name="G. Rossi", iban=IBAN).outcome is PayeeMatch.CLOSE_MATCH
