"""The PayPal Payouts rail against the local fake that follows PayPal's documented contract:
sender_batch_id as the idempotency key, batch and item status, unclaimed items, the webhook
signature, and the errors that retry apart from those that refuse."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.exceptions import InvalidInput
from payouts.rails import get_rail
from payouts.rails.base import FinalRailError, RailStatus, RetryableRailError, SubmitStatus
from payouts.rails.paypal import PayPalPayoutsRail, production_checks
from recipients.normalise import PAYPAL, destination_kind, paypal_normalise
from tests.payouts.conftest import paypal_options
from tests.payouts.rail_builders import rail_payment


def paypal_payment(**overrides):
    values = {
        "creditor_iban": None,
        "creditor_email": "giulia@example.com",
        "creditor_country": "",
        "debtor_account_code": "platform:paypal:EUR",
    }
    return rail_payment(**{**values, **overrides})


def test_a_paypal_email_is_a_destination_of_its_own_kind():
    account = paypal_normalise("  Giulia.Rossi@EXAMPLE.com ")

    assert (account.kind, account.normalised, account.country, account.masked) == (
        PAYPAL,
        "paypal:giulia.rossi@example.com",
        "",
        "PayPal g***@example.com",
    )
    assert json.loads(account.secret) == {"email": "giulia.rossi@example.com"}
    assert destination_kind(account.kind) == "paypal" and destination_kind("sort_code") == "bank"


def test_a_bad_paypal_email_is_refused():
    with pytest.raises(InvalidInput) as error:
        paypal_normalise("giulia@")
    assert error.value.code == "invalid_email"


def test_the_rail_needs_its_credentials():
    with pytest.raises(ImproperlyConfigured):
        PayPalPayoutsRail(base_url="https://api-m.paypal.com", client_id="x")


def test_a_paypal_payout_is_one_batch_keyed_by_its_end_to_end_id(paypal_rail, fake_paypal):
    payment = paypal_payment()

    answer = paypal_rail.submit(payment)

    assert answer.status == SubmitStatus.ACCEPTED
    batch = fake_paypal.state.batches[answer.rail_reference]
    assert batch["sender_batch_header"]["sender_batch_id"] == payment.end_to_end_id
    item = fake_paypal.item_for(payment.end_to_end_id)
    assert item["payout_item"]["receiver"] == "giulia@example.com"
    assert item["payout_item"]["amount"] == {"value": "12.50", "currency": "EUR"}
    request = next(r for r in fake_paypal.requests if r.path == "/v1/payments/payouts")
    assert request.headers["paypal-request-id"] == payment.end_to_end_id


def test_a_second_submit_pays_nothing_more_and_answers_with_the_first_batch(paypal_rail, fake_paypal):
    payment = paypal_payment()
    first = paypal_rail.submit(payment)
    balance = fake_paypal.state.balance["EUR"]

    again = paypal_rail.submit(payment)

    assert again.rail_reference == first.rail_reference
    assert fake_paypal.batches_for(payment.end_to_end_id) == 1
    assert fake_paypal.state.balance["EUR"] == balance


def test_a_submit_whose_answer_was_lost_is_found_by_the_retry(paypal_rail, fake_paypal):
    payment = paypal_payment()
    fake_paypal.delay_next("POST", "/v1/payments/payouts", seconds=3.0)  # processed, then the client times out

    with pytest.raises(RetryableRailError):
        paypal_rail.submit(payment)
    answer = paypal_rail.submit(payment)

    assert fake_paypal.batches_for(payment.end_to_end_id) == 1
    assert answer.rail_reference == fake_paypal.state.by_sender_batch[payment.end_to_end_id]


def test_status_follows_the_item(paypal_rail, fake_paypal):
    payment = paypal_payment()
    reference = paypal_rail.submit(payment).rail_reference
    assert paypal_rail.status(payment.end_to_end_id, rail_reference=reference).status == RailStatus.SUBMITTED

    fake_paypal.complete(payment.end_to_end_id)

    assert paypal_rail.status(payment.end_to_end_id, rail_reference=reference).status == RailStatus.SETTLED


def test_without_its_batch_id_a_payout_is_unknown_and_a_foreign_batch_is_refused(paypal_rail, fake_paypal):
    mine, other = paypal_payment(), paypal_payment()
    paypal_rail.submit(mine)
    other_reference = paypal_rail.submit(other).rail_reference

    assert paypal_rail.status(mine.end_to_end_id).status == RailStatus.UNKNOWN
    assert paypal_rail.finds_by_reference_only
    with pytest.raises(FinalRailError) as error:
        paypal_rail.status(mine.end_to_end_id, rail_reference=other_reference)
    assert error.value.rail_code == "reference_mismatch"


def test_a_failed_item_names_an_account_reason(paypal_rail, fake_paypal):
    payment = paypal_payment(creditor_email="locked@example.com")
    fake_paypal.behave("locked@example.com", "FAILED", error="RECEIVER_ACCOUNT_LOCKED")
    reference = paypal_rail.submit(payment).rail_reference
    fake_paypal.complete(payment.end_to_end_id)

    known = paypal_rail.status(payment.end_to_end_id, rail_reference=reference)

    assert (known.status, known.reason_code) == (RailStatus.FAILED, "AC06")


def test_an_unclaimed_item_counts_as_paid_until_it_is_cancelled_and_returned(fake_paypal):
    rail = PayPalPayoutsRail(**paypal_options(fake_paypal), unclaimed_cancel_after_hours=1)
    payment = paypal_payment(creditor_email="nobody@example.com")
    fake_paypal.behave("nobody@example.com", "UNCLAIMED")
    reference = rail.submit(payment).rail_reference
    fake_paypal.complete(payment.end_to_end_id)
    balance = fake_paypal.state.balance["EUR"]

    assert rail.status(payment.end_to_end_id, rail_reference=reference).status == RailStatus.SETTLED
    assert fake_paypal.calls("POST", "/v1/payments/payouts-item/") == 0

    an_hour_ago = datetime.now(UTC) - timedelta(hours=1, seconds=1)
    fake_paypal.item_for(payment.end_to_end_id)["time_processed"] = an_hour_ago.strftime("%Y-%m-%dT%H:%M:%SZ")
    known = rail.status(payment.end_to_end_id, rail_reference=reference)

    assert (known.status, known.reason_code) == (RailStatus.RETURNED, "AC01")
    assert fake_paypal.item_for(payment.end_to_end_id)["transaction_status"] == "RETURNED"
    assert fake_paypal.state.balance["EUR"] == balance + Decimal("12.50")


def test_an_empty_balance_is_retried_not_refused(paypal_rail, fake_paypal):
    fake_paypal.state.balance["EUR"] = 0

    with pytest.raises(RetryableRailError) as error:
        paypal_rail.submit(paypal_payment())

    assert (error.value.rail_code, error.value.reason_code) == ("INSUFFICIENT_FUNDS", "AM04")
    assert not fake_paypal.state.batches


def test_wrong_credentials_and_outages_are_retryable(fake_paypal):
    wrong = PayPalPayoutsRail(**{**paypal_options(fake_paypal), "client_secret": "wrong"})
    with pytest.raises(RetryableRailError):
        wrong.submit(paypal_payment())
    fake_paypal.fail_next("POST", "/v1/payments/payouts", status=503, body={"name": "INTERNAL_SERVICE_ERROR"})
    with pytest.raises(RetryableRailError):
        PayPalPayoutsRail(**paypal_options(fake_paypal)).submit(paypal_payment())
    assert not fake_paypal.state.batches


def test_a_refused_request_is_final(paypal_rail, fake_paypal):
    fake_paypal.fail_next(
        "POST", "/v1/payments/payouts", status=422, body={"name": "RECEIVER_COUNTRY_NOT_ALLOWED", "message": "no"}
    )
    with pytest.raises(FinalRailError) as error:
        paypal_rail.submit(paypal_payment())
    assert error.value.reason_code == "AG01"


def test_the_token_is_reused(paypal_rail, fake_paypal):
    paypal_rail.submit(paypal_payment())
    paypal_rail.submit(paypal_payment())

    assert fake_paypal.calls("POST", "/v1/oauth2/token") == 1


def test_a_bank_payment_is_refused_by_the_paypal_rail(paypal_rail, fake_paypal):
    with pytest.raises(FinalRailError):
        paypal_rail.submit(rail_payment())
    assert not fake_paypal.state.batches


def headers_of(django_headers: dict[str, str]) -> dict[str, str]:
    return {k.removeprefix("HTTP_").replace("_", "-"): v for k, v in django_headers.items()}


def test_a_webhook_signed_by_paypal_verifies(paypal_rail, fake_paypal, settings):
    payment = paypal_payment()
    paypal_rail.submit(payment)
    body, headers = fake_paypal.event(payment.end_to_end_id)

    assert paypal_rail.webhook_verify(body=body, headers=headers_of(headers))


@pytest.mark.parametrize(
    "forgery",
    ["body", "webhook_id", "algorithm", "foreign_certificate", "malformed_certificate_url"],
)
def test_a_forged_webhook_does_not_verify(paypal_rail, fake_paypal, forgery):
    payment = paypal_payment()
    paypal_rail.submit(payment)
    body, headers = fake_paypal.event(payment.end_to_end_id)
    headers = headers_of(headers)
    if forgery == "body":
        body = body.replace(b"PENDING", b"SUCCESS")
    elif forgery == "webhook_id":
        headers = headers_of(fake_paypal.sign(body, webhook_id="WH0SOMEONEELSE"))
    elif forgery == "algorithm":
        headers["PAYPAL-AUTH-ALGO"] = "SHA1withRSA"
    elif forgery == "foreign_certificate":
        headers["PAYPAL-CERT-URL"] = "https://certs.example.com/paypal.pem"
    else:  # the sender's header, unparsable as a URL: refused, not a 500 (review)
        headers["PAYPAL-CERT-URL"] = "https://[x"

    assert not paypal_rail.webhook_verify(body=body, headers=headers)


def test_the_paypal_rail_is_built_from_settings(paypal):
    rail = get_rail("paypal")

    assert isinstance(rail, PayPalPayoutsRail)
    assert rail.destination_kinds == frozenset({PAYPAL})
    assert rail.capabilities().supports(currency="EUR", country="", amount_minor=100, account_type=PAYPAL)
    assert not rail.capabilities().supports(currency="EUR", country="IT", amount_minor=100, account_type="iban")


def test_production_refuses_a_paypal_rail_without_its_credentials(settings):
    settings.PRODUCTION_CHECKS = True
    settings.PAYOUT_RAILS = {
        **settings.PAYOUT_RAILS,
        "paypal": {"OPTIONS": {"base_url": "http://api-m.paypal.com", "client_id": "id", "client_secret": ""}},
    }

    (error,) = production_checks()

    assert error.id == "payouts.E140"
    assert "PAYPAL_CLIENT_SECRET" in error.hint and "PAYPAL_WEBHOOK_ID" in error.hint and "https" in error.hint


def test_production_accepts_a_complete_paypal_rail_and_ignores_an_absent_one(settings):
    settings.PRODUCTION_CHECKS = True
    assert production_checks() == []
    settings.PAYOUT_RAILS = {
        **settings.PAYOUT_RAILS,
        "paypal": {
            "OPTIONS": {
                "base_url": "https://api-m.paypal.com",
                "client_id": "id",
                "client_secret": "secret",
                "webhook_id": "WH1",
            }
        },
    }
    assert production_checks() == []
