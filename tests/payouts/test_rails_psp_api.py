import socket
from decimal import Decimal

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.exceptions import InvalidInput
from payouts.rails import get_rail
from payouts.rails.base import FinalRailError, PayeeMatch, RailStatus, RetryableRailError, SubmitStatus
from payouts.rails.psp_api import WiseRail, customer_transaction_id, verify_webhook_signature
from tests.payouts.rail_builders import gbp_payment, rail_payment, usd_payment


def _only_transfer(fake_wise, payment) -> dict:
    transfers = fake_wise.transfers_for(customer_transaction_id(payment.end_to_end_id))
    assert len(transfers) == 1
    return transfers[0]


@pytest.mark.parametrize(
    ("build", "recipient_type", "value"),
    [
        (lambda: rail_payment(amount_minor=1250), "iban", Decimal("12.50")),
        (lambda: gbp_payment(amount_minor=999), "sort_code", Decimal("9.99")),
        (lambda: usd_payment(amount_minor=100_001), "aba", Decimal("1000.01")),
    ],
)
def test_happy_path_creates_funds_and_accepts_one_transfer(fake_wise, wise_rail, build, recipient_type, value):
    payment = build()

    result = wise_rail.submit(payment)

    transfer = _only_transfer(fake_wise, payment)
    assert result.status is SubmitStatus.ACCEPTED
    assert result.rail_reference == str(transfer["id"])
    assert transfer["status"] == "processing"  # funded from the balance
    assert transfer["targetCurrency"] == payment.currency
    assert Decimal(str(transfer["targetValue"])) == value
    assert fake_wise.state.accounts[transfer["targetAccount"]]["type"] == recipient_type
    assert fake_wise.state.balances[payment.currency] == Decimal("1000000") - value


def test_instant_settlement_is_reported_as_settled(fake_wise, wise_rail):
    fake_wise.auto_settle = True

    assert wise_rail.submit(rail_payment()).status is SubmitStatus.SETTLED


def test_customer_transaction_id_is_stable_per_end_to_end_id():
    assert customer_transaction_id("PO-1") == customer_transaction_id("PO-1")
    assert customer_transaction_id("PO-1") != customer_transaction_id("PO-2")


def test_duplicate_submit_is_one_transfer_funded_once(fake_wise, wise_rail):
    payment = rail_payment()

    first = wise_rail.submit(payment)
    second = wise_rail.submit(payment)

    assert first.rail_reference == second.rail_reference
    transfer = _only_transfer(fake_wise, payment)
    assert fake_wise.state.balances["EUR"] == Decimal("1000000") - Decimal("12.50")
    assert transfer["status"] == "processing"


def test_crash_between_create_and_fund_recovers_without_a_second_transfer(fake_wise, wise_rail):
    payment = rail_payment()
    fake_wise.fail_next("POST", "/v3/profiles/4242/transfers/", status=503)

    with pytest.raises(RetryableRailError):
        wise_rail.submit(payment)
    assert _only_transfer(fake_wise, payment)["status"] == "incoming_payment_waiting"

    result = wise_rail.submit(payment)

    assert result.status is SubmitStatus.ACCEPTED
    assert _only_transfer(fake_wise, payment)["status"] == "processing"


def test_server_error_is_retryable(fake_wise, wise_rail):
    payment = rail_payment()
    fake_wise.fail_next("POST", "/v1/transfers", status=500)

    with pytest.raises(RetryableRailError) as raised:
        wise_rail.submit(payment)

    assert raised.value.details["http_status"] == 500
    assert fake_wise.transfers_for(customer_transaction_id(payment.end_to_end_id)) == []


def test_timeout_after_wise_created_the_transfer_then_retry_is_one_transfer(fake_wise, wise_rail):
    payment = rail_payment()
    # Wise carries the request out, but the answer comes after our client has given up.
    fake_wise.delay_next("POST", "/v1/transfers", seconds=30)

    with pytest.raises(RetryableRailError) as raised:
        wise_rail.submit(payment)
    assert raised.value.rail_code == "timeout"

    assert wise_rail.submit(payment).status is SubmitStatus.ACCEPTED
    assert _only_transfer(fake_wise, payment)["status"] == "processing"


def test_timeout_of_the_funding_call_does_not_fund_twice(fake_wise, wise_rail):
    payment = rail_payment()
    fake_wise.delay_next("POST", "/v3/profiles/4242/transfers/", seconds=30)

    with pytest.raises(RetryableRailError):
        wise_rail.submit(payment)

    # The retry's funding call meets transfer.invalid-state: read as "funded before".
    assert wise_rail.submit(payment).status is SubmitStatus.ACCEPTED
    assert fake_wise.state.balances["EUR"] == Decimal("1000000") - Decimal("12.50")


def test_unreachable_wise_is_retryable():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rail = WiseRail(base_url=f"http://127.0.0.1:{port}", api_token="t", profile_id=1, timeout_seconds=0.5)

    with pytest.raises(RetryableRailError) as raised:
        rail.submit(rail_payment())

    assert raised.value.rail_code == "connection"


def test_bad_credentials_are_retryable_not_a_rejection(fake_wise):
    rail = WiseRail(base_url=fake_wise.base_url, api_token="wrong", profile_id=fake_wise.profile_id)

    with pytest.raises(RetryableRailError) as raised:
        rail.submit(rail_payment())

    assert raised.value.rail_code == "unauthorized"


@pytest.mark.parametrize(
    ("payment", "reason_code", "message"),
    [
        (rail_payment(creditor_iban="DE89370400440532013001"), "AC01", "valid IBAN"),
        (
            gbp_payment(creditor_account={"type": "sort_code", "sortCode": "04007", "accountNumber": "37778842"}),
            "AC01",
            "sort code",
        ),
        (rail_payment(creditor_name="Madonna"), "RR03", "first and last name"),
        (
            usd_payment(
                creditor_account={
                    "type": "aba",
                    "abartn": "026009593",
                    "accountNumber": "12345678",
                    "accountType": "CHECKING",
                }
            ),
            "BE04",
            "address",
        ),
    ],
)
def test_validation_errors_are_final_with_wise_message(fake_wise, wise_rail, payment, reason_code, message):
    with pytest.raises(FinalRailError) as raised:
        wise_rail.submit(payment)

    assert raised.value.reason_code == reason_code
    assert message in raised.value.reason_text
    assert raised.value.rail_code == "NOT_VALID"
    assert fake_wise.transfers_for(customer_transaction_id(payment.end_to_end_id)) == []


def test_injected_422_body_is_passed_through(fake_wise, wise_rail):
    body = {"errors": [{"code": "error.route.not.supported", "message": "Route not supported", "path": "amount"}]}
    fake_wise.fail_next("POST", "/v3/profiles/4242/quotes", status=422, body=body)

    with pytest.raises(FinalRailError) as raised:
        wise_rail.submit(rail_payment())

    assert (raised.value.rail_code, raised.value.reason_code) == ("error.route.not.supported", "AM02")
    assert raised.value.reason_text == "Wise: Route not supported (amount)"


def test_empty_balance_is_retryable_and_the_retry_funds_the_same_transfer(fake_wise, wise_rail):
    payment = rail_payment()
    fake_wise.state.balances["EUR"] = Decimal("1.00")

    with pytest.raises(RetryableRailError) as raised:
        wise_rail.submit(payment)
    assert raised.value.reason_code == "AM04"

    fake_wise.state.balances["EUR"] = Decimal("100.00")
    wise_rail.submit(payment)

    assert _only_transfer(fake_wise, payment)["status"] == "processing"
    assert fake_wise.state.balances["EUR"] == Decimal("87.50")


def test_unsupported_currency_is_refused_before_any_call(fake_wise, wise_rail):
    with pytest.raises(FinalRailError) as raised:
        wise_rail.submit(rail_payment(currency="CHF", creditor_country="CH"))

    assert raised.value.reason_code == "AG01"
    assert fake_wise.state.requests == []


@pytest.mark.parametrize(
    ("wise_state", "status", "reason_code"),
    [
        ("incoming_payment_waiting", RailStatus.PENDING, None),
        ("processing", RailStatus.SUBMITTED, None),
        ("funds_converted", RailStatus.SUBMITTED, None),
        ("outgoing_payment_sent", RailStatus.SETTLED, None),
        ("bounced_back", RailStatus.RETURNED, "MS03"),
        ("funds_refunded", RailStatus.FAILED, "MS03"),
        ("cancelled", RailStatus.FAILED, "MS03"),
        ("some_new_state", RailStatus.UNKNOWN, None),
    ],
)
def test_status_mapping(fake_wise, wise_rail, wise_state, status, reason_code):
    payment = rail_payment()
    reference = wise_rail.submit(payment).rail_reference
    fake_wise.set_transfer_status(reference, wise_state)

    by_reference = wise_rail.status(payment.end_to_end_id, rail_reference=reference)
    by_scan = wise_rail.status(payment.end_to_end_id)

    assert by_reference == by_scan
    assert (by_reference.status, by_reference.reason_code, by_reference.rail_reference) == (
        status,
        reason_code,
        reference,
    )


def test_status_of_a_payout_wise_never_saw_is_unknown(wise_rail):
    wise_rail.submit(rail_payment())

    assert wise_rail.status("PO-NEVER").status is RailStatus.UNKNOWN
    assert wise_rail.status("PO-NEVER", rail_reference="999999").status is RailStatus.UNKNOWN


def test_status_refuses_a_reference_of_another_payout(wise_rail):
    reference = wise_rail.submit(rail_payment()).rail_reference

    with pytest.raises(FinalRailError, match="another payout"):
        wise_rail.status("PO-SOMEONE-ELSE", rail_reference=reference)


def test_resubmitting_a_cancelled_transfer_is_final(fake_wise, wise_rail):
    payment = rail_payment()
    reference = wise_rail.submit(payment).rail_reference
    fake_wise.set_transfer_status(reference, "cancelled")

    with pytest.raises(FinalRailError) as raised:
        wise_rail.submit(payment)

    assert raised.value.rail_code == "cancelled"
    assert len(fake_wise.transfers_for(customer_transaction_id(payment.end_to_end_id))) == 1


def test_signed_webhook_is_read(fake_wise, wise_rail):
    reference = wise_rail.submit(rail_payment()).rail_reference
    body, signature = fake_wise.signed_state_change(reference, state="outgoing_payment_sent")

    event = wise_rail.parse_webhook(body=body, signature=signature)

    assert (event.transfer_id, event.wise_state, event.status) == (
        reference,
        "outgoing_payment_sent",
        RailStatus.SETTLED,
    )
    assert event.occurred_at == "2025-01-02T10:00:00Z"


def test_forged_or_tampered_webhooks_are_refused(fake_wise, wise_rail, wise_signing_key):
    from cryptography.hazmat.primitives.asymmetric import rsa

    reference = wise_rail.submit(rail_payment()).rail_reference
    body, signature = fake_wise.signed_state_change(reference, state="outgoing_payment_sent")
    tampered = body.replace(b"outgoing_payment_sent", b"bounced_back")
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    from tests.fakes.wise_server import FakeWise

    forger = FakeWise(private_key=other_key)
    forger.state.transfers = fake_wise.state.transfers
    forged_body, forged_signature = forger.signed_state_change(reference)

    for candidate_body, candidate_signature in [
        (tampered, signature),
        (forged_body, forged_signature),
        (body, ""),
        (body, "not base64!"),
    ]:
        with pytest.raises(InvalidInput) as raised:
            wise_rail.parse_webhook(body=candidate_body, signature=candidate_signature)
        assert raised.value.code == "webhook_signature_invalid"
    assert verify_webhook_signature(body=body, signature=signature, public_key_pem=fake_wise.public_key_pem)


def test_wise_offers_no_verification_of_payee(wise_rail):
    assert wise_rail.verify_payee(name="Giulia Rossi", iban="IT60X0542811101000000123456").outcome is (
        PayeeMatch.NOT_POSSIBLE
    )
    assert not wise_rail.capabilities().verify_payee


def test_registry_builds_the_wise_rail_from_settings(settings, fake_wise):
    settings.PAYOUT_RAILS = {
        "psp_api": {"OPTIONS": {"base_url": fake_wise.base_url, "api_token": fake_wise.token, "profile_id": 4242}}
    }

    rail = get_rail("psp_api")

    assert isinstance(rail, WiseRail)
    assert rail.submit(rail_payment()).status is SubmitStatus.ACCEPTED


def test_registry_refuses_an_unconfigured_wise_rail(settings):
    settings.PAYOUT_RAILS = {}

    with pytest.raises(ImproperlyConfigured):
        get_rail("psp_api")
