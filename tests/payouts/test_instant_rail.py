"""Payouts on the instant rail (the Adyen fake): settled in seconds where the person's bank takes
SCT Inst, a standard SCT where it does not — recorded on the payout, so the status page tells the
truth — and, for an instant-only rail, the route's fallback rail; never a second transfer."""

import pytest

from payouts.models import AttemptOutcome, Payout, PayoutStatus, RouteRule
from payouts.services import payout_batch_create, payout_execute, payouts_create_for_payable, payouts_poll
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import (
    assert_books_ok,
    bank_minor,
    iban,
    in_transit_minor,
    payable_minor,
    payable_reward,
    staff,
)

pytestmark = pytest.mark.django_db


def one_payout(brand, *, account: str | None = None) -> Payout:
    payable_reward(brand, account_iban=account or iban())
    (payout_id,) = payouts_create_for_payable().created
    return Payout.objects.get(pk=payout_id)


@pytest.fixture
def instant_only(settings, instant):
    """A second Adyen rail that sends instant transfers only, routed first, with the pain.001 file
    rail as the route's fallback."""
    options = {**settings.PAYOUT_RAILS["psp_instant"]["OPTIONS"], "fallback": False}
    settings.PAYOUT_RAILS = {
        **settings.PAYOUT_RAILS,
        "instant_only": {"BACKEND": "payouts.rails.adyen.AdyenTransfersRail", "OPTIONS": options},
    }
    RouteRule.objects.create(priority=1, currency="EUR", rail="instant_only", fallback_rail="sepa_file")
    return instant


def test_an_instant_payout_is_settled_and_says_so(sandbox, instant, debtor, brand, campaign):
    payout = one_payout(brand)

    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.SETTLED

    payout.refresh_from_db()
    assert (payout.status, payout.service_level, payout.rail) == (PayoutStatus.SETTLED, "instant", "psp_instant")
    assert len(instant.transfers_for(payout.end_to_end_id)) == 1
    assert payable_minor(payout.person_id) == 0 and in_transit_minor() == 0 and bank_minor(debtor) == -500
    assert_books_ok()


def test_a_bank_without_instant_gets_a_standard_transfer_recorded_as_such(sandbox, instant, debtor, brand, campaign):
    account = iban()
    instant.behave(account, "instant_unreachable")
    payout = one_payout(brand, account=account)

    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.ACCEPTED

    payout.refresh_from_db()
    assert (payout.status, payout.service_level) == (PayoutStatus.SUBMITTED, "standard")
    (transfer,) = instant.transfers_for(payout.end_to_end_id)
    assert transfer["categoryData"]["priority"] == "regular"
    # the next business day Adyen books it; the poller records it
    instant.book(transfer["id"])
    assert payouts_poll() == 1
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and len(instant.transfers_for(payout.end_to_end_id)) == 1
    assert_books_ok()


def test_a_lost_answer_is_recovered_from_the_rail_with_its_service_level(
    sandbox, instant, debtor, brand, campaign, settings
):
    settings.PAYOUT_RAILS["psp_instant"]["OPTIONS"]["timeout_seconds"] = 0.5
    payout = one_payout(brand)
    instant.delay_next("POST", "/btl/v4/transfers", seconds=1.5)

    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.RETRY
    payout.refresh_from_db()
    payout.next_attempt_at = None
    payout.save(update_fields=["next_attempt_at"])
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.SETTLED

    payout.refresh_from_db()
    assert payout.service_level == "instant" and len(instant.transfers_for(payout.end_to_end_id)) == 1
    assert_books_ok()


def test_an_instant_only_rail_hands_an_unreachable_bank_to_the_routes_fallback(
    sandbox, instant_only, debtor, brand, campaign, django_capture_on_commit_callbacks
):
    account = iban()
    instant_only.behave(account, "instant_unreachable")
    payout = one_payout(brand, account=account)
    assert (payout.rail, payout.fallback_rail) == ("instant_only", "sepa_file")

    with django_capture_on_commit_callbacks(execute=True):
        assert payout_execute(payout_id=payout.pk) == AttemptOutcome.FALLBACK

    payout.refresh_from_db()
    assert (payout.rail, payout.fallback_rail, payout.status) == ("sepa_file", "", PayoutStatus.CREATED)
    assert instant_only.transfers_for(payout.end_to_end_id) == []
    assert payout.events.filter(kind="payout.rail_fallback", data__to="sepa_file").exists()
    # the file carries it, as a standard transfer
    batch = payout_batch_create(actor=staff("olga"))
    payout.refresh_from_db()
    assert batch.count == 1 and payout.status == PayoutStatus.SUBMITTED and payout.service_level == "standard"
    assert_books_ok()


def test_a_reachable_bank_stays_on_the_instant_only_rail(sandbox, instant_only, debtor, brand, campaign):
    payout = one_payout(brand)

    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.SETTLED

    payout.refresh_from_db()
    assert (payout.rail, payout.service_level) == ("instant_only", "instant")


def test_an_instant_only_rail_without_a_fallback_fails_and_keeps_the_money(
    sandbox, instant, debtor, brand, campaign, settings
):
    settings.PAYOUT_RAILS["psp_instant"]["OPTIONS"]["fallback"] = False
    account = iban()
    instant.behave(account, "instant_unreachable")
    payout = one_payout(brand, account=account)

    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.FAILED

    payout.refresh_from_db()
    assert payout.status == PayoutStatus.FAILED and payout.reason_code == "CNOR"
    assert instant.transfers_for(payout.end_to_end_id) == [] and payable_minor(payout.person_id) == 500
    assert_books_ok()


def test_an_error_reading_the_transfer_after_adyen_took_it_never_fails_the_payout(
    sandbox, instant, debtor, brand, campaign
):
    payout = one_payout(brand)
    instant.fail_next("GET", "/btl/v4/transfers/", status=404)  # the follow-up read, once

    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.ACCEPTED

    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SUBMITTED
    assert payouts_create_for_payable().created == []  # the rewards are not free to be paid again
    (transfer,) = instant.transfers_for(payout.end_to_end_id)
    instant.book(transfer["id"])  # Adyen books it; the poller reads what the submit could not
    assert payouts_poll() == 1
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and transfer["reference"] == payout.end_to_end_id
    assert_books_ok()


def test_a_refusal_after_an_unknown_outcome_goes_to_review_not_to_a_new_payout(
    sandbox, instant, debtor, brand, campaign, settings
):
    settings.PAYOUT_RAILS["psp_instant"]["OPTIONS"]["timeout_seconds"] = 0.5
    payout = one_payout(brand)
    instant.delay_next("POST", "/btl/v4/transfers", seconds=1.5)  # Adyen made it; the answer is lost
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.RETRY
    payout.refresh_from_db()
    payout.next_attempt_at = None
    payout.save(update_fields=["next_attempt_at"])
    # Adyen's list does not show the transfer yet, and the retry's key is still being processed:
    # it refuses the second POST rather than answering with the first transfer.
    instant.fail_next("GET", "/btl/v4/transfers", status=200, body={"data": []})
    instant.fail_next(
        "POST", "/btl/v4/transfers", status=422, body={"status": 422, "errorCode": "704", "message": "In progress"}
    )

    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.REVIEW

    payout.refresh_from_db()
    assert payout.status == PayoutStatus.CREATED and payout.needs_review
    assert payouts_create_for_payable().created == []
    assert len(instant.transfers_for(payout.end_to_end_id)) == 1
    assert_books_ok()
