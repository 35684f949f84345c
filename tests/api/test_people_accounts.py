"""The partner API takes a local bank account (``account``: type, currency, fields) wherever it
takes an IBAN, validated as the claim page validates it; a bad one is a 400 that writes nothing.
Who may change where a person is paid does not depend on the kind of account."""

import pytest
from django.utils import timezone

from core.models import InboundWebhook
from recipients.accounts import account_normalise
from recipients.models import BankAccount, Person, PersonEvent, PersonEventKind
from recipients.selectors import person_current_bank_account
from recipients.services import person_erase
from tests.api.conftest import assert_problem
from web.claim.services import PayoutDetails, claim_tiktok_login_submit

pytestmark = pytest.mark.django_db

UK = {"type": "sort_code", "currency": "GBP", "details": {"sortCode": "04-00-75", "accountNumber": "37778842"}}
US = {
    "type": "aba",
    "currency": "USD",
    "details": {
        "abartn": "026009593",
        "accountNumber": "987654321",
        "accountType": "SAVINGS",
        "address.country": "US",
        "address.state": "NY",
        "address.city": "New York",
        "address.firstLine": "1 Main Street",
        "address.postCode": "10001",
    },
}


@pytest.fixture
def oliver(api, campaign):
    created = api.post(
        "/api/v1/people/", {"name": "Oliver Smith", "email": "oliver@example.com", "account": UK}, format="json"
    )
    assert created.status_code == 201, created.content
    return created.json()


def test_a_person_is_registered_with_a_uk_account(oliver):
    assert (oliver["iban_masked"], oliver["iban_country"], oliver["account_type"]) == (
        "GB 04-00-75 ****8842",
        "GB",
        "sort_code",
    )
    account = BankAccount.objects.get(person_id=oliver["id"])
    assert (account.kind, account.currency, account.details()["accountNumber"]) == ("sort_code", "GBP", "37778842")


def test_the_brand_moves_its_own_person_to_a_us_account(api, oliver):
    changed = api.patch(f"/api/v1/people/{oliver['id']}/", {"account": US}, format="json")

    assert changed.status_code == 200, changed.content
    assert changed.json()["account_type"] == "aba"
    assert person_current_bank_account(person=Person.objects.get(pk=oliver["id"])).details()["accountType"] == "SAVINGS"
    assert PersonEvent.objects.filter(person_id=oliver["id"], kind=PersonEventKind.IBAN_SET).count() == 2


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"account": {**US, "details": {**US["details"], "abartn": "026009594"}}}, "invalid_account"),
        ({"account": {**UK, "details": {"sortCode": "04-00-75"}}}, "invalid_account"),
        ({"account": {**UK, "type": "bsb"}}, "invalid_account"),
        ({"account": {**UK, "details": {"sortCode": 40075}}}, "validation_error"),
        ({"account": UK, "iban": "GB29NWBK60161331926819"}, "validation_error"),
        ({"account": {**UK, "currency": "\x93\x16"}}, "unknown_currency"),
        ({"account": {**UK, "currency": "XYZ"}}, "unknown_currency"),
    ],
)
def test_a_bad_account_is_a_400_and_nothing_is_written(api, campaign, body, code):
    people, accounts = Person.objects.count(), BankAccount.objects.count()

    response = api.post("/api/v1/people/", {"name": "Ava", "email": "ava@example.com", **body}, format="json")

    assert_problem(response, 400, code)
    assert (Person.objects.count(), BankAccount.objects.count()) == (people, accounts)


def test_another_brand_cannot_move_her_money_to_its_local_account(oliver, rival_api, rival_campaign):
    assert_problem(rival_api.patch(f"/api/v1/people/{oliver['id']}/", {"account": US}, format="json"), 404, "not_found")
    theirs = rival_api.post("/api/v1/people/", {"email": "oliver@example.com", "account": US}, format="json")

    assert theirs.status_code == 201 and theirs.json()["id"] != oliver["id"]
    assert person_current_bank_account(person=Person.objects.get(pk=oliver["id"])).kind == "sort_code"


def test_a_stranger_typing_her_email_with_a_local_account_on_the_claim_page_reaches_nobody(oliver, campaign):
    stranger = account_normalise(kind="aba", currency="USD", details=US["details"])

    claim_tiktok_login_submit(
        campaign=campaign,
        social_uid="stranger-open-id",
        details=PayoutDetails(name="Mallory", email="oliver@example.com", whatsapp="", iban="", account=stranger),
        ip="",
    )

    assert person_current_bank_account(person=Person.objects.get(pk=oliver["id"])).kind == "sort_code"
    assert PersonEvent.objects.filter(kind=PersonEventKind.LINK_REFUSED).exists()


def test_erasing_a_us_person_leaves_strangers_rows_that_share_her_city_or_post_code(api, campaign):
    created = api.post("/api/v1/people/", {"name": "Ann Lee", "account": US}, format="json")
    assert created.status_code == 201, created.content
    stranger = InboundWebhook.objects.create(
        provider="wise",
        dedupe_key="stranger-1",
        body=b'{"data": {"resource": {"id": 10001}}, "note": "New York branch"}',
        received_at=timezone.now(),
    )
    hers = InboundWebhook.objects.create(
        provider="wise", dedupe_key="hers-1", body=b'{"account": "987654321"}', received_at=timezone.now()
    )

    person_erase(person=Person.objects.get(pk=created.json()["id"]))

    stranger.refresh_from_db()
    hers.refresh_from_db()
    assert b"New York" in bytes(stranger.body)  # a city and a post code are not hers alone
    assert bytes(hers.body) == b""  # her account number is
