"""The instant rail (Adyen Transfers API) against its local fake: instant when the receiving bank
takes SCT Inst, Adyen's own fallback to a standard transfer when it does not (reported, never a
second transfer), an instant-only rail that refuses instead, and the rail contract: idempotent
on end_to_end_id, status by reference, retryable vs final errors."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from payouts.rails import get_rail
from payouts.rails.adyen import AdyenTransfersRail, idempotency_key
from payouts.rails.base import (
    FinalRailError,
    InstantUnreachableError,
    RailStatus,
    RetryableRailError,
    ServiceLevel,
    SubmitStatus,
)
from tests.payouts.rail_builders import rail_payment

IBAN = "IT60X0542811101000000123456"


def _only_transfer(fake_adyen, payment) -> dict:
    transfers = fake_adyen.transfers_for(payment.end_to_end_id)
    assert len(transfers) == 1
    return transfers[0]


def test_instant_transfer_is_settled_within_the_submit(fake_adyen, adyen_rail):
    payment = rail_payment(amount_minor=1250)

    result = adyen_rail.submit(payment)

    transfer = _only_transfer(fake_adyen, payment)
    assert result.status is SubmitStatus.SETTLED and result.service_level is ServiceLevel.INSTANT
    assert result.rail_reference == transfer["id"]
    assert transfer["amount"] == {"value": 1250, "currency": "EUR"}  # minor units, never a float
    assert transfer["categoryData"] == {"type": "bank", "priority": "instant"}
    assert transfer["status"] == "booked" and transfer["tracking"]["status"] == "credited"
    sent = next(r for r in fake_adyen.requests if r.method == "POST")
    assert sent.headers["idempotency-key"] == idempotency_key(payment.end_to_end_id)
    assert sent.json()["priorities"] == ["instant", "regular"]
    assert sent.json()["counterparty"]["bankAccount"]["accountIdentification"] == {"type": "iban", "iban": IBAN}


def test_submitting_twice_is_one_transfer(fake_adyen, adyen_rail):
    payment = rail_payment()

    first = adyen_rail.submit(payment)
    second = adyen_rail.submit(payment)

    assert first.rail_reference == second.rail_reference
    _only_transfer(fake_adyen, payment)
    assert fake_adyen.state.balance_minor == 10**12 - payment.amount_minor


def test_answer_lost_after_the_transfer_was_made_retries_into_the_same_transfer(fake_adyen, adyen_rail):
    payment = rail_payment()
    fake_adyen.delay_next("POST", "/btl/v4/transfers", seconds=3.0)

    with pytest.raises(RetryableRailError):
        adyen_rail.submit(payment)
    _only_transfer(fake_adyen, payment)

    assert adyen_rail.submit(payment).status is SubmitStatus.SETTLED
    _only_transfer(fake_adyen, payment)


def test_bank_without_instant_falls_back_to_a_standard_transfer_and_says_so(fake_adyen, adyen_rail):
    payment = rail_payment()
    fake_adyen.behave(IBAN, "instant_unreachable")

    result = adyen_rail.submit(payment)

    transfer = _only_transfer(fake_adyen, payment)
    assert result.status is SubmitStatus.ACCEPTED and result.service_level is ServiceLevel.STANDARD
    assert transfer["categoryData"]["priority"] == "regular" and transfer["status"] == "authorised"
    assert adyen_rail.status(payment.end_to_end_id).status is RailStatus.SUBMITTED
    fake_adyen.book(transfer["id"])
    known = adyen_rail.status(payment.end_to_end_id, rail_reference=transfer["id"])
    assert known.status is RailStatus.SETTLED and known.service_level is ServiceLevel.STANDARD


def test_instant_only_rail_refuses_a_bank_without_instant_and_holds_no_transfer(fake_adyen):
    rail = AdyenTransfersRail(
        base_url=fake_adyen.api_url,
        api_key=fake_adyen.api_key,
        balance_account_id=fake_adyen.balance_account_id,
        fallback=False,
    )
    payment = rail_payment()
    fake_adyen.behave(IBAN, "instant_unreachable")

    with pytest.raises(InstantUnreachableError) as refused:
        rail.submit(payment)

    assert refused.value.reason_code == "CNOR" and "instant" in refused.value.reason_text
    assert fake_adyen.transfers_for(payment.end_to_end_id) == []
    assert rail.status(payment.end_to_end_id).status is RailStatus.UNKNOWN


def test_closed_account_is_a_final_refusal(fake_adyen, adyen_rail):
    fake_adyen.behave(IBAN, "closed")

    with pytest.raises(FinalRailError) as refused:
        adyen_rail.submit(rail_payment())

    assert refused.value.reason_code == "AC04" and refused.value.rail_code == "counterpartyAccountClosed"


def test_instant_transfer_still_in_flight_is_accepted_and_found_later(fake_adyen):
    rail = AdyenTransfersRail(
        base_url=fake_adyen.api_url,
        api_key=fake_adyen.api_key,
        balance_account_id=fake_adyen.balance_account_id,
        instant_wait_seconds=0.2,
        poll_interval_seconds=0.02,
    )
    payment = rail_payment()
    fake_adyen.behave(IBAN, "slow")

    result = rail.submit(payment)

    assert result.status is SubmitStatus.ACCEPTED and result.service_level is ServiceLevel.INSTANT
    fake_adyen.book(result.rail_reference)
    assert rail.status(payment.end_to_end_id).status is RailStatus.SETTLED


def test_not_enough_balance_is_final(fake_adyen, adyen_rail):
    fake_adyen.state.balance_minor = 100

    with pytest.raises(FinalRailError) as refused:
        adyen_rail.submit(rail_payment(amount_minor=101))

    assert refused.value.reason_code == "AM04"


def test_invalid_iban_is_a_final_account_error(fake_adyen, adyen_rail):
    with pytest.raises(FinalRailError) as refused:
        adyen_rail.submit(rail_payment(creditor_iban="IT61X0542811101000000123456"))  # bad check digits

    assert refused.value.reason_code == "AC01"


@pytest.mark.parametrize("status", [500, 503, 429, 401])
def test_server_errors_rate_limits_and_credentials_are_retryable(fake_adyen, adyen_rail, status):
    payment = rail_payment()
    fake_adyen.fail_next("POST", "/btl/v4/transfers", status=status)

    with pytest.raises(RetryableRailError):
        adyen_rail.submit(payment)

    assert fake_adyen.transfers_for(payment.end_to_end_id) == []


def test_wrong_api_key_is_retryable_not_a_refusal(fake_adyen):
    rail = AdyenTransfersRail(base_url=fake_adyen.api_url, api_key="wrong", balance_account_id="BA1")

    with pytest.raises(RetryableRailError):
        rail.submit(rail_payment())


def test_unreachable_adyen_is_retryable():
    rail = AdyenTransfersRail(base_url="http://127.0.0.1:9/btl/v4", api_key="k", balance_account_id="BA1")

    with pytest.raises(RetryableRailError):
        rail.submit(rail_payment())


def test_status_of_a_payment_adyen_never_saw_is_unknown(adyen_rail):
    assert adyen_rail.status("PO-NEVER-SENT").status is RailStatus.UNKNOWN


def test_status_refuses_a_reference_of_another_payout(fake_adyen, adyen_rail):
    first = adyen_rail.submit(rail_payment())

    with pytest.raises(FinalRailError):
        adyen_rail.status("PO-SOMETHING-ELSE", rail_reference=first.rail_reference)


def test_returned_transfer_is_reported_returned_with_a_reason(fake_adyen, adyen_rail):
    payment = rail_payment()
    result = adyen_rail.submit(payment)

    fake_adyen.return_transfer(result.rail_reference, "counterpartyAccountClosed")

    known = adyen_rail.status(payment.end_to_end_id, rail_reference=result.rail_reference)
    assert known.status is RailStatus.RETURNED and known.reason_code == "AC04"


def test_other_currencies_are_refused_before_any_call(fake_adyen, adyen_rail):
    with pytest.raises(FinalRailError):
        adyen_rail.submit(rail_payment(currency="GBP"))

    assert fake_adyen.calls("POST") == 0


def test_unconfigured_rail_cannot_be_built():
    with pytest.raises(ImproperlyConfigured):
        get_rail("psp_instant")
