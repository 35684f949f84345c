"""Money reaches people without an IBAN: a UK person (sort code) and a US person (ABA routing
number, checking account, US address) give their account on the claim page — the fields the
PSP's account requirements ask for — and are paid through the PSP rail (the fake Wise), settled
by Wise's ``transfers#state-change`` webhook, with the books verifying. A payout the sandbox or
the SEPA file cannot carry never goes there."""

import base64
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from django.test import Client
from django.utils import timezone

from campaigns.services import rewards_mature
from payouts.links import PAYOUT_SALT, link_make
from payouts.models import Payout, PayoutStatus, RouteRule
from payouts.services import payout_execute, payouts_create_for_payable
from recipients.accounts import account_normalise
from recipients.models import BankAccount, Person
from recipients.selectors import person_current_bank_account
from recipients.services import IdentityInput, person_resolve
from reconciliation.selectors import ledger_verify_report
from reconciliation.services.statements import platform_bank_account_create
from tests.api.conftest import LOGIN_500, ingest
from tests.campaigns.factories import BrandFactory, funded_campaign
from tests.fakes.wise_server import uk_account_number
from tests.payouts.payout_fixtures import sandbox  # noqa: F401 - fixture

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=False), pytest.mark.usefixtures("sandbox")]

SORT_CODE = "040075"
US_ACCOUNT = {
    "account_type": "aba",
    "aba__abartn": "026009593",
    "aba__accountNumber": "987654321",
    "aba__accountType": "CHECKING",
    "aba__address.country": "US",
    "aba__address.state": "NY",
    "aba__address.city": "New York",
    "aba__address.firstLine": "1 Main Street",
    "aba__address.postCode": "10001",
}


@pytest.fixture
def atlantic(db):
    """The brand paying people in GBP and USD."""
    return BrandFactory(name="Atlantic", slug="atlantic")


@pytest.fixture
def books(db):
    """The platform's operating accounts the payouts are paid from, one per currency."""
    platform_bank_account_create(name="GBP operating", other_id="GB-OPERATING-1", other_scheme="BBAN", currency="GBP")
    platform_bank_account_create(name="USD operating", other_id="US-OPERATING-1", other_scheme="BBAN", currency="USD")


def reward_in(brand, currency: str, email: str):
    campaign = funded_campaign(
        brand=brand, amount_minor=10_000, rules=[LOGIN_500], slug=f"joy-{currency.lower()}", currency=currency
    )
    return ingest(campaign, email=email).reward


def claim(reward, fields: dict, name: str):
    return Client().post(
        link_make(PAYOUT_SALT, reward.pk).path, {"name": name, "consent": "on", **fields}, follow=False
    )


def pay(psp) -> list[Payout]:
    rewards_mature(now=timezone.now() + timedelta(seconds=1))
    created = payouts_create_for_payable(enqueue=False).created
    for payout_id in created:
        payout_execute(payout_id=payout_id)
    return list(Payout.objects.filter(pk__in=created).order_by("currency"))


def wise_says(psp, payout: Payout, state: str):
    body, _ = psp.signed_state_change(payout.rail_reference, state=state)
    signature = base64.b64encode(psp.private_key.sign(body, padding.PKCS1v15(), hashes.SHA256())).decode()
    return Client().post(
        "/api/webhooks/wise/",
        body,
        content_type="application/json",
        HTTP_X_SIGNATURE_SHA256=signature,
        HTTP_X_DELIVERY_ID=f"d-{payout.pk}-{state}",
    )


def test_a_uk_and_a_us_person_are_paid_end_to_end_through_the_psp(
    atlantic, books, psp, django_capture_on_commit_callbacks
):
    psp.modulus_check = True
    uk_number = uk_account_number(SORT_CODE, 3)
    oliver = reward_in(atlantic, "GBP", "oliver@example.co.uk")
    ava = reward_in(atlantic, "USD", "ava@example.com")
    # the claim page asks each for the fields of their currency's accounts
    page = Client().get(link_make(PAYOUT_SALT, oliver.pk).path)
    assert b'name="sort_code__sortCode"' in page.content and b'name="iban"' in page.content
    assert b'name="aba__abartn"' in Client().get(link_make(PAYOUT_SALT, ava.pk).path).content

    uk = {"account_type": "sort_code", "sort_code__sortCode": "04-00-75", "sort_code__accountNumber": uk_number}
    assert claim(oliver, uk, "Oliver Smith").status_code == 302
    assert claim(ava, US_ACCOUNT, "Ava Johnson").status_code == 302

    gbp_account = person_current_bank_account(person=oliver.person)
    assert (gbp_account.kind, gbp_account.currency, gbp_account.masked) == (
        "sort_code",
        "GBP",
        f"GB 04-00-75 ****{uk_number[-4:]}",
    )
    assert uk_number not in gbp_account.ciphertext  # encrypted at rest
    assert gbp_account.details()["accountNumber"] == uk_number

    with django_capture_on_commit_callbacks(execute=True):
        gbp, usd = pay(psp)

    assert (gbp.currency, gbp.rail, gbp.status, gbp.creditor_iban_masked) == (
        "GBP",
        "psp_api",
        PayoutStatus.SUBMITTED,
        gbp_account.masked,
    )
    assert (usd.currency, usd.rail, usd.status) == ("USD", "psp_api", PayoutStatus.SUBMITTED)
    recipients = {a["type"]: a for a in psp.state.accounts.values()}
    assert recipients["sort_code"]["details"] == {
        "legalType": "PRIVATE",
        "sortCode": SORT_CODE,
        "accountNumber": uk_number,
    }
    assert recipients["aba"]["details"]["address"] == {
        "country": "US",
        "state": "NY",
        "city": "New York",
        "firstLine": "1 Main Street",
        "postCode": "10001",
    }
    assert recipients["aba"]["details"]["accountType"] == "CHECKING"

    # the rail's status settles them
    for payout in (gbp, usd):
        with django_capture_on_commit_callbacks(execute=True):
            assert wise_says(psp, payout, "outgoing_payment_sent").status_code == 200
        payout.refresh_from_db()
        assert payout.status == PayoutStatus.SETTLED
    assert ledger_verify_report().ok


def test_a_bad_sort_code_modulus_on_the_claim_page_stores_nothing(atlantic, psp):
    oliver = reward_in(atlantic, "GBP", "oliver@example.co.uk")
    people, accounts = Person.objects.count(), BankAccount.objects.count()

    page = claim(
        oliver,
        {"account_type": "sort_code", "sort_code__sortCode": SORT_CODE, "sort_code__accountNumber": "37778842"},
        "Oliver Smith",
    )

    assert page.status_code == 200
    assert page.context["form"].errors["sort_code__accountNumber"] == ["Please enter a valid account number."]
    assert (Person.objects.count(), BankAccount.objects.count()) == (people, accounts)


def test_a_missing_required_field_is_said_and_nothing_is_stored(atlantic, db):
    ava = reward_in(atlantic, "USD", "ava@example.com")
    fields = {k: v for k, v in US_ACCOUNT.items() if k != "aba__address.city"}

    page = claim(ava, fields, "Ava Johnson")

    assert page.status_code == 200
    assert page.context["form"].errors["aba__address.city"] == ["City is required."]
    assert not BankAccount.objects.exists()


def test_without_the_psp_a_local_account_waits_rather_than_go_to_the_sandbox_or_a_sepa_file(atlantic, books, db):
    RouteRule.objects.create(priority=1, rail="sepa_file")  # a catch-all to the file: it takes only IBANs in EUR
    oliver = reward_in(atlantic, "GBP", "oliver@example.co.uk")
    uk = {"account_type": "sort_code", "sort_code__sortCode": SORT_CODE, "sort_code__accountNumber": "37778842"}
    assert claim(oliver, uk, "Oliver Smith").status_code == 302

    rewards_mature(now=timezone.now() + timedelta(seconds=1))

    assert payouts_create_for_payable(enqueue=False).created == []
    assert not Payout.objects.exists()


def test_a_local_account_in_another_currency_is_asked_for_again(atlantic, books, psp, db):
    """A person paid in USD whose current account is a UK one: the money waits, they are asked."""
    ava = reward_in(atlantic, "USD", "ava@example.com")
    gb = account_normalise(
        kind="sort_code",
        currency="GBP",
        details={"sortCode": SORT_CODE, "accountNumber": uk_account_number(SORT_CODE, 1)},
    )
    person_resolve(brand_id=atlantic.pk, identity=IdentityInput(email="ava@example.com", account=gb), source="api")
    rewards_mature(now=timezone.now() + timedelta(seconds=1))

    result = payouts_create_for_payable(enqueue=False)

    assert result.created == [] and result.waiting_for_iban == [ava.person_id]
