"""PayPal as a payout destination, end to end through the fake PayPal: the person chooses PayPal on
the claim page of a campaign that allows it (no Verification of Payee), the payout goes out as a
PayPal batch keyed by its end-to-end id, PayPal's signed item webhook settles it against the
platform's PayPal balance and the books verify; an unclaimed or returned item reopens the payable
as a bank return does; erasure forgets the address; caps count the address as they count an IBAN;
replayed webhooks and submits change nothing."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from campaigns.models import Reward
from campaigns.services import rewards_mature
from core.exceptions import InvalidTransition
from core.models import InboundWebhook
from payouts.links import PAYOUT_SALT, link_make
from payouts.models import Payout, PayoutStatus, RouteRule
from payouts.rails import get_rail
from payouts.selectors import payout_exceptions, rewards_awaiting_payout
from payouts.services import payout_execute, payouts_create_for_payable, payouts_poll
from payouts.services.actions import cancel_locked
from payouts.services.execute import rail_payment_for
from recipients import crypto
from recipients.models import BankAccount
from recipients.normalise import paypal_normalise
from recipients.selectors import person_current_bank_account
from recipients.services import person_erase
from reconciliation.models import Account
from reconciliation.selectors import ledger_verify_report
from tests.api.conftest import LOGIN_500, ingest
from tests.campaigns.factories import BrandFactory, funded_campaign
from tests.payouts.payout_fixtures import debtor, iban, sandbox  # noqa: F401 - fixtures
from web.claim.services import PayoutDetails, claim_tiktok_login_submit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=False), pytest.mark.usefixtures("sandbox")]

EMAIL = "giulia.paypal@example.com"


@pytest.fixture
def campaign(db):
    brand = BrandFactory(name="Sole", slug="sole")
    campaign = funded_campaign(brand=brand, amount_minor=10_000, rules=[LOGIN_500], slug="joy")
    campaign.allow_paypal = True
    campaign.save(update_fields=["allow_paypal"])
    return campaign


def claim_paypal(reward, email: str = EMAIL):
    return Client().post(
        link_make(PAYOUT_SALT, reward.pk).path,
        {"name": "Giulia Rossi", "consent": "on", "destination": "paypal", "paypal_email": email},
    )


def pay() -> Payout:
    rewards_mature(now=timezone.now() + timedelta(seconds=1))
    (payout_id,) = payouts_create_for_payable(enqueue=False).created
    payout_execute(payout_id=payout_id)
    return Payout.objects.get(pk=payout_id)


@pytest.fixture
def paypal_says(paypal, django_capture_on_commit_callbacks):
    """Deliver PayPal's signed event about ``payout`` (or ``delivery`` again), processed on commit."""

    def deliver(payout: Payout, event_type: str | None = None, *, delivery=None):
        body, headers = delivery or paypal.event(payout.end_to_end_id, event_type)
        with django_capture_on_commit_callbacks(execute=True):
            response = Client().post("/api/webhooks/paypal/", body, content_type="application/json", **headers)
        payout.refresh_from_db()
        return response, (body, headers)

    return deliver


def paypal_balance() -> int:
    return Account.objects.get(code="platform:paypal:EUR").posted_minor


def test_a_person_paid_to_paypal_end_to_end(campaign, paypal, paypal_says, django_capture_on_commit_callbacks):
    reward = ingest(campaign, email="giulia@example.com").reward
    page = Client().get(link_make(PAYOUT_SALT, reward.pk).path)
    assert b'name="paypal_email"' in page.content and b'data-testid="paypal-no-vop"' in page.content

    assert claim_paypal(reward).status_code == 302
    account = person_current_bank_account(person=reward.person)
    assert (account.kind, account.country, account.masked) == ("paypal", "", "PayPal g***@example.com")
    assert EMAIL not in account.ciphertext and account.details() == {"email": EMAIL}
    assert account.iban_fingerprint == crypto.iban_fingerprint(f"paypal:{EMAIL}")

    with django_capture_on_commit_callbacks(execute=True):
        payout = pay()

    assert (payout.rail, payout.status, payout.debtor_account_code) == (
        "paypal",
        PayoutStatus.SUBMITTED,
        "platform:paypal:EUR",
    )
    assert payout.vop_checked_at is None and payout.vop_result == ""  # no Verification of Payee for PayPal
    assert paypal.item_for(payout.end_to_end_id)["payout_item"]["receiver"] == EMAIL

    paypal.complete(payout.end_to_end_id)
    response, delivery = paypal_says(payout)

    assert response.status_code == 200
    assert (payout.status, payout.settled_via) == (PayoutStatus.SETTLED, "rail")
    assert paypal_balance() == -payout.amount_minor  # paid out of the PayPal balance, not the bank
    assert Reward.objects.get(pk=reward.pk).status == "paid"
    assert not [e for e in payout_exceptions() if e.count]  # never expected on a bank statement
    assert ledger_verify_report().ok

    # the same delivery again, and a new delivery of the same news: nothing moves twice
    entries = payout.settled_entry_id
    again, _ = paypal_says(payout, delivery=delivery)
    paypal_says(payout)
    assert again.json()["duplicate"] is True
    assert (payout.status, payout.settled_entry_id, paypal_balance()) == (
        PayoutStatus.SETTLED,
        entries,
        -payout.amount_minor,
    )

    # the submit replayed (a worker that never saw PayPal's answer): the first batch, no second payment
    answer = get_rail("paypal").submit(rail_payment_for(payout))
    assert answer.rail_reference == payout.rail_reference
    assert paypal.batches_for(payout.end_to_end_id) == 1
    assert ledger_verify_report().ok


def test_a_forged_paypal_webhook_is_refused_and_stores_nothing(
    campaign, paypal, paypal_says, django_capture_on_commit_callbacks
):
    reward = ingest(campaign, email="giulia@example.com").reward
    claim_paypal(reward)
    with django_capture_on_commit_callbacks(execute=True):
        payout = pay()
    paypal.complete(payout.end_to_end_id)
    body, headers = paypal.event(payout.end_to_end_id)

    response, _ = paypal_says(payout, delivery=(body.replace(b"SUCCESS", b"PENDING"), headers))

    assert response.status_code == 401
    assert not InboundWebhook.objects.exists()
    assert payout.status == PayoutStatus.SUBMITTED


def test_an_unclaimed_payment_comes_back_and_the_money_is_owed_again(
    campaign, paypal, settings, paypal_says, django_capture_on_commit_callbacks
):
    settings.PAYOUT_RAILS["paypal"]["OPTIONS"]["unclaimed_cancel_after_hours"] = 0
    paypal.behave("nobody@example.com", "UNCLAIMED")
    reward = ingest(campaign, email="giulia@example.com").reward
    claim_paypal(reward, "nobody@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        payout = pay()
    paypal.complete(payout.end_to_end_id)

    # the webhook says unclaimed: PayPal is asked again, and past the grace cancels the item
    paypal_says(payout, "PAYMENT.PAYOUTS-ITEM.UNCLAIMED")

    assert (payout.status, payout.reason_code) == (PayoutStatus.RETURNED, "AC01")
    assert paypal.item_for(payout.end_to_end_id)["transaction_status"] == "RETURNED"
    assert paypal_balance() == 0  # out and back in
    assert list(rewards_awaiting_payout().values_list("pk", flat=True)) == [reward.pk]
    # the returned address is not paid again: the person is asked for another destination
    result = payouts_create_for_payable(enqueue=False)
    assert result.created == [] and result.waiting_for_iban == [reward.person_id]
    assert ledger_verify_report().ok


def test_a_returned_item_seen_by_the_poller_reopens_the_payable(
    campaign, paypal, paypal_says, django_capture_on_commit_callbacks
):
    reward = ingest(campaign, email="giulia@example.com").reward
    claim_paypal(reward)
    with django_capture_on_commit_callbacks(execute=True):
        payout = pay()
    paypal.complete(payout.end_to_end_id)
    with django_capture_on_commit_callbacks(execute=True):
        assert payouts_poll() == 1
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED

    paypal.set_status(payout.end_to_end_id, "REFUNDED")
    paypal_says(payout, "PAYMENT.PAYOUTS-ITEM.REFUNDED")

    assert (payout.status, payout.returned_via) == (PayoutStatus.RETURNED, "rail")
    assert paypal_balance() == 0
    assert list(rewards_awaiting_payout().values_list("pk", flat=True)) == [reward.pk]
    assert ledger_verify_report().ok


def test_erasure_forgets_the_paypal_address(campaign, paypal, paypal_says, django_capture_on_commit_callbacks):
    reward = ingest(campaign, email="giulia@example.com").reward
    claim_paypal(reward)
    with django_capture_on_commit_callbacks(execute=True):
        payout = pay()
    paypal.complete(payout.end_to_end_id)
    paypal_says(payout)
    assert InboundWebhook.objects.filter(provider="paypal").exists()
    fingerprint = person_current_bank_account(person=reward.person).iban_fingerprint

    person_erase(person=reward.person)

    account = BankAccount.objects.get(person=reward.person)
    assert (account.ciphertext, account.details()) == ("", {})
    assert account.iban_fingerprint == fingerprint  # caps and fraud signals still count it
    assert not [w for w in InboundWebhook.objects.filter(provider="paypal") if EMAIL.encode() in bytes(w.body)]
    assert ledger_verify_report().ok


def test_without_the_campaign_allowing_it_paypal_is_not_offered(campaign, paypal):
    campaign.allow_paypal = False
    campaign.save(update_fields=["allow_paypal"])
    reward = ingest(campaign, email="giulia@example.com").reward

    assert b'name="paypal_email"' not in Client().get(link_make(PAYOUT_SALT, reward.pk).path).content
    page = claim_paypal(reward)

    assert page.status_code == 200  # the IBAN is still required
    assert not BankAccount.objects.exists()


def test_a_bad_paypal_address_stores_nothing(campaign, paypal):
    reward = ingest(campaign, email="giulia@example.com").reward

    page = claim_paypal(reward, "giulia@")

    assert page.status_code == 200
    assert page.context["form"].errors["paypal_email"]
    assert not BankAccount.objects.exists()


def test_the_paypal_choice_speaks_italian(campaign, paypal):
    reward = ingest(campaign, email="giulia@example.com").reward

    page = Client().get(link_make(PAYOUT_SALT, reward.pk).path, HTTP_ACCEPT_LANGUAGE="it")

    text = page.content.decode()
    assert "Il mio conto PayPal" in text and "Indirizzo e-mail PayPal" in text
    assert "non vale per PayPal" in text


def test_caps_count_a_paypal_address_as_they_count_an_iban(paypal, db):
    brand = BrandFactory(name="Capped", slug="capped")
    capped = funded_campaign(
        brand=brand, amount_minor=10_000, rules=[{**LOGIN_500, "iban_count_per_campaign": 1}], slug="capped"
    )

    def claim_as(uid: str, email: str):
        details = PayoutDetails(
            name=f"Person {uid}", email=f"{uid}@example.com", whatsapp="", iban="", account=paypal_normalise(email)
        )
        return claim_tiktok_login_submit(campaign=capped, social_uid=uid, details=details, ip="203.0.113.9")

    first = claim_as("tt-one", "shared@example.com")
    rewards = Reward.objects.count()
    second = claim_as("tt-two", " Shared@Example.com")  # the same account, typed otherwise

    assert first.reward is not None
    assert second.reward is None and "iban" in second.reason, second.reason
    assert Reward.objects.count() == rewards
    assert claim_as("tt-three", "own@example.com").reward is not None


@pytest.mark.usefixtures("debtor")
def test_routing_picks_the_rail_by_the_destination_kind(campaign, paypal):
    RouteRule.objects.create(priority=1, rail="sepa_file")  # routing written for bank accounts only
    to_paypal = ingest(campaign, email="giulia@example.com").reward
    to_bank = ingest(campaign, email="marco@example.com", iban=iban(7)).reward
    claim_paypal(to_paypal)
    rewards_mature(now=timezone.now() + timedelta(seconds=1))

    created = payouts_create_for_payable(enqueue=False).created

    rails = dict(Payout.objects.filter(pk__in=created).values_list("person_id", "rail"))
    assert rails == {to_paypal.person_id: "paypal", to_bank.person_id: "sepa_file"}


def test_a_lost_answer_is_recovered_by_submitting_again_never_paying_twice(campaign, paypal, settings):
    settings.PAYOUT_BACKOFF_BASE_SECONDS = 0
    settings.PAYOUT_BACKOFF_MAX_SECONDS = 0
    settings.PAYOUT_RAILS["paypal"]["OPTIONS"]["timeout_seconds"] = 1.0
    reward = ingest(campaign, email="giulia@example.com").reward
    claim_paypal(reward)
    paypal.delay_next("POST", "/v1/payments/payouts", seconds=2.0)  # PayPal pays, the answer is lost

    payout = pay()
    assert (payout.status, payout.rail_reference) == (PayoutStatus.CREATED, "")

    assert payout_execute(payout_id=payout.pk, now=timezone.now() + timedelta(seconds=1)) == "accepted"

    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SUBMITTED
    assert payout.rail_reference == paypal.state.by_sender_batch[payout.end_to_end_id]
    assert paypal.batches_for(payout.end_to_end_id) == 1


def test_out_of_attempts_without_a_batch_id_goes_to_staff_not_to_failure(campaign, paypal, settings):
    settings.PAYOUT_MAX_ATTEMPTS = 1
    reward = ingest(campaign, email="giulia@example.com").reward
    claim_paypal(reward)
    paypal.fail_next("POST", "/v1/payments/payouts", status=503, body={"name": "INTERNAL_SERVICE_ERROR"})

    payout = pay()

    assert (payout.status, payout.needs_review) == (PayoutStatus.CREATED, True)
    assert not paypal.state.batches
    assert not rewards_awaiting_payout().exists()  # the money stays with this payout


def test_a_payout_whose_paypal_answer_was_lost_cannot_be_cancelled_and_paid_again(campaign, paypal, settings):
    # given a PayPal payout out of attempts with no batch id: PayPal may have paid it (review finding)
    settings.PAYOUT_MAX_ATTEMPTS = 1
    reward = ingest(campaign, email="giulia@example.com").reward
    claim_paypal(reward)
    paypal.fail_next("POST", "/v1/payments/payouts", status=503, body={"name": "INTERNAL_SERVICE_ERROR"})
    payout = pay()
    assert (payout.status, payout.needs_review, payout.rail_reference) == (PayoutStatus.CREATED, True, "")

    # when staff try to cancel it, then it is refused and its rewards stay with it
    with pytest.raises(InvalidTransition) as refused, transaction.atomic():
        cancel_locked(
            Payout.objects.select_for_update().get(pk=payout.pk), actor=None, reason="stuck", now=timezone.now()
        )
    assert refused.value.code == "outcome_unknown"
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.CREATED and not rewards_awaiting_payout().exists()
