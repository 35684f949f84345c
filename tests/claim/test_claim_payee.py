"""The person's side of payouts on the status page: how fast the money travels, said only once the
rail carrying it has said so ("instant" or "1 business day"), and Verification of Payee — "did
you mean …?" with the bank's name to confirm, or a link to correct the details — each step safe
to repeat, and only through the person's own link."""

import re

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from campaigns.models import Campaign, Reward, VopAction
from campaigns.services import event_ingest
from payouts.links import PAYOUT_SALT, STATUS_SALT, link_make, token_make
from payouts.models import Payout, PayoutStatus, RouteRule
from payouts.services import payout_batch_create
from recipients.models import BankAccount
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.claim.test_claim_flow import GOOD_IBAN, pay_everything
from tests.payouts.payout_fixtures import iban, staff

pytestmark = pytest.mark.django_db

BANK_NAME = "Giulia Rossi"


@pytest.fixture
def shop(brand_a):
    return funded_campaign(
        brand=brand_a,
        amount_minor=10_000,
        slug="shop",
        mode="cashback",
        rules=[{"trigger": "purchase", "fixed_minor": 1000, "verification": "partner_attested"}],
    )


def claimed(brand, client: Client, *, name: str, account: str = GOOD_IBAN) -> tuple[Reward, str]:
    """A purchase reward claimed on its link with ``name`` and ``account``; the status page URL."""
    result = event_ingest(
        brand=brand,
        payload=event(
            campaign="shop", type="purchase", source="api", email="buyer@example.com", purchase_amount_minor=1
        ),
    )
    link = link_make(PAYOUT_SALT, result.reward.pk).path
    done = client.post(link, {"name": name, "iban": account, "consent": "on"})
    assert done.status_code == 302, done.content[:300]
    return Reward.objects.get(pk=result.reward.pk), done["Location"]


def test_a_sandbox_payout_is_paid_instantly_and_the_page_says_so(brand_a, shop, sandbox, debtor):
    client = Client()
    _, status_url = claimed(brand_a, client, name=BANK_NAME)

    before = client.get(status_url)
    assert before.context["status"].speed == "" and b"claim-speed" not in before.content  # nothing promised yet
    pay_everything()

    page = client.get(status_url)
    assert page.context["status"].state == "paid" and page.context["status"].speed == "instant"
    assert b'data-speed="instant"' in page.content
    assert client.get(status_url + "?format=json").json() == {"state": "paid", "speed": "instant"}


def test_a_file_payout_says_one_business_day_once_in_a_file(brand_a, shop, sandbox, debtor):
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    client = Client()
    _, status_url = claimed(brand_a, client, name=BANK_NAME)
    pay_everything()
    assert client.get(status_url).context["status"].speed == ""  # waiting for the file: no promise

    payout_batch_create(actor=staff("olga"))

    page = client.get(status_url)
    assert page.context["status"].state == "payable" and page.context["status"].speed == "standard"
    assert "1 business day" in page.content.decode() and page.context["status"].expected_at is not None


def test_did_you_mean_shows_the_banks_name_and_confirming_pays_it_once(
    brand_a, shop, sandbox, debtor, settings, django_capture_on_commit_callbacks
):
    settings.SANDBOX_FAILING_IBANS = {GOOD_IBAN.replace(" ", ""): f"vop_close_match:{BANK_NAME}"}
    client = Client()
    reward, status_url = claimed(brand_a, client, name="G. Rossi")
    pay_everything()

    page = client.get(status_url)
    assert page.context["status"].state == "check_details" and page.context["status"].can_confirm
    assert f"Did you mean {BANK_NAME}?" in page.content.decode()
    assert b'data-testid="payee-correct"' in page.content
    confirm_url = page.context["confirm_url"]
    with django_capture_on_commit_callbacks(execute=True):  # the worker runs what is enqueued
        client.post(confirm_url, {"name": BANK_NAME})
    with django_capture_on_commit_callbacks(execute=True):
        client.post(confirm_url, {"name": BANK_NAME})  # a double click

    payout = Payout.objects.get(items__reward=reward)
    assert payout.status == PayoutStatus.SETTLED and payout.creditor_name == BANK_NAME
    assert sandbox.transfer_count(payout.end_to_end_id) == 1
    assert client.get(status_url).context["status"].state == "paid"


def test_the_question_is_asked_in_italian(brand_a, shop, sandbox, debtor, settings):
    settings.SANDBOX_FAILING_IBANS = {GOOD_IBAN.replace(" ", ""): f"vop_close_match:{BANK_NAME}"}
    client = Client(HTTP_ACCEPT_LANGUAGE="it")
    _, status_url = claimed(brand_a, client, name="G. Rossi")
    pay_everything()

    text = client.get(status_url).content.decode()

    assert f"Intendevi {BANK_NAME}?" in text and "No, correggo i miei dati" in text


def test_a_name_the_page_did_not_show_is_refused_and_nothing_moves(brand_a, shop, sandbox, debtor, settings):
    settings.SANDBOX_FAILING_IBANS = {GOOD_IBAN.replace(" ", ""): f"vop_close_match:{BANK_NAME}"}
    client = Client()
    reward, status_url = claimed(brand_a, client, name="G. Rossi")
    pay_everything()

    refused = client.post(client.get(status_url).context["confirm_url"], {"name": "Mallory Thief"}, follow=True)

    assert "changed" in refused.content.decode()
    payout = Payout.objects.get(items__reward=reward)
    assert (
        payout.needs_review and payout.creditor_name == "G. Rossi" and sandbox.transfer_count(payout.end_to_end_id) == 0
    )


def test_correcting_the_details_replaces_the_blocked_payout(
    brand_a, shop, sandbox, debtor, settings, django_capture_on_commit_callbacks
):
    Campaign.objects.filter(slug="shop").update(vop_no_match=VopAction.BLOCK)
    settings.SANDBOX_FAILING_IBANS = {GOOD_IBAN.replace(" ", ""): "vop_no_match"}
    client = Client()
    reward, status_url = claimed(brand_a, client, name="Giulia Rossi")
    pay_everything()
    page = client.get(status_url)
    assert page.context["status"].state == "check_details" and not page.context["status"].can_confirm
    assert b"Correct my details" in page.content and b"payee-confirm" not in page.content
    fix_url = page.context["fix_url"]

    own = iban()
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        form_url = client.get(fix_url)["Location"]
        pending = client.post(form_url, {"name": "Giulia Rossi", "iban": own, "consent": "on"})["Location"]
    # She has an account already: the new one waits for the code sent to her first contact.
    assert pending.startswith("/c/r/change/")
    assert [p.status for p in Payout.objects.filter(items__reward=reward)] == [PayoutStatus.CREATED]
    (message,) = [m for m in mail.outbox if m.to == ["buyer@example.com"]]
    code = re.search(r"\b(\d{6})\b", message.body).group(1)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(pending, {"code": code})
    assert [p.status for p in Payout.objects.filter(items__reward=reward)] == [PayoutStatus.CANCELLED]
    BankAccount.objects.filter(person=reward.person, is_current=True).update(usable_from=timezone.now())  # cooled off
    pay_everything()

    payouts = Payout.objects.filter(items__reward=reward).order_by("id")
    assert [p.status for p in payouts] == [PayoutStatus.CANCELLED, PayoutStatus.SETTLED]
    assert payouts[1].bank_account.iban() == own and sandbox.transfer_count(payouts[0].end_to_end_id) == 0
    assert client.get(status_url).context["status"].state == "paid"


def test_another_rewards_link_cannot_confirm_for_this_one(brand_a, shop, sandbox, debtor, settings):
    settings.SANDBOX_FAILING_IBANS = {GOOD_IBAN.replace(" ", ""): f"vop_close_match:{BANK_NAME}"}
    client = Client()
    waiting, _ = claimed(brand_a, client, name="G. Rossi")
    pay_everything()
    other = funded_campaign(brand=brand_a, amount_minor=1_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 100}])
    stranger = event_ingest(brand=brand_a, payload=event(campaign=other.slug, email="stranger@example.com")).reward

    response = Client().post(f"/c/s/{token_make(STATUS_SALT, stranger.pk)}/confirm-name/", {"name": BANK_NAME})

    assert response.status_code == 302
    payout = Payout.objects.get(items__reward=waiting)
    assert payout.needs_review and payout.creditor_name == "G. Rossi"


def test_a_forged_link_is_not_found(sandbox):
    assert Client().post("/c/s/not-a-token/confirm-name/", {"name": BANK_NAME}).status_code == 404


def test_the_person_is_told_to_check_their_details(
    brand_a, shop, sandbox, debtor, settings, django_capture_on_commit_callbacks
):
    settings.SANDBOX_FAILING_IBANS = {GOOD_IBAN.replace(" ", ""): f"vop_close_match:{BANK_NAME}"}
    client = Client()
    claimed(brand_a, client, name="G. Rossi")
    mail.outbox.clear()

    with django_capture_on_commit_callbacks(execute=True):
        pay_everything()

    assert any(re.search("confirm or correct", m.body) for m in mail.outbox)
