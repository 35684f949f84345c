"""Withdrawing from the portal: owners only, a verified account only, the page's key makes a
replayed POST withdraw once, another brand gets 404, bad input a 4xx with nothing written."""

import pytest
from django.test import Client
from django.utils import timezone

from campaigns.services import brand_funds_account, brand_topup_record
from payouts.models import BrandBankAccount, BrandBankAccountStatus, Payout, Withdrawal
from payouts.services.withdrawals import brand_bank_account_decide
from reconciliation.models import JournalEntry
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import DEBTOR_IBAN, iban, staff
from tests.portal.conftest import member

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

KEY = "0123456789abcdef0123456789abcdef"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def funded_a(brand_a):
    brand_topup_record(
        brand=brand_a,
        amount_minor=50_000,
        currency="EUR",
        bank_account_code=DEBTOR_IBAN,
        idempotency_key="topup-a",
        reference=brand_a.funding_reference,
    )
    return brand_a


def _register(client, slug="alpha", **data):
    return client.post(f"/portal/{slug}/withdraw/bank-accounts/", {"iban": iban(), "holder_name": "Alpha", **data})


def _verified_account(client) -> BrandBankAccount:
    assert _register(client).status_code == 302
    account = BrandBankAccount.objects.get()
    return brand_bank_account_decide(account=account, approver=staff("ops", "verify_brandbankaccount"), verified=True)


def test_an_owner_registers_ops_verify_and_a_replayed_withdrawal_sends_once(sandbox, debtor, funded_a, owner_a):
    client = _client(owner_a)
    account = _verified_account(client)
    assert account.status == BrandBankAccountStatus.VERIFIED
    page = client.get("/portal/alpha/withdraw/")
    assert page.status_code == 200
    key = page.context["form"].initial["idempotency_key"]
    data = {"bank_account": account.pk, "amount": "100.00", "idempotency_key": key}

    assert client.post("/portal/alpha/withdraw/", data).status_code == 302
    assert client.post("/portal/alpha/withdraw/", data).status_code == 302

    assert Withdrawal.objects.count() == 1 and Payout.objects.count() == 1
    assert brand_funds_account(brand=funded_a, currency="EUR").available_minor == 40_000


@pytest.mark.parametrize(
    ("data", "status"),
    [
        ({"amount": "", "idempotency_key": KEY}, 400),
        ({"amount": "-1", "idempotency_key": KEY}, 400),
        ({"amount": "10.001", "idempotency_key": KEY}, 400),
        ({"amount": "10"}, 400),
        ({"amount": "500.01", "idempotency_key": KEY}, 422),  # more than the funds
    ],
)
def test_bad_withdrawals_are_4xx_with_nothing_written(sandbox, debtor, funded_a, owner_a, data, status):
    client = _client(owner_a)
    account = _verified_account(client)
    entries = JournalEntry.objects.count()
    response = client.post("/portal/alpha/withdraw/", {"bank_account": account.pk, **data})
    assert response.status_code == status
    assert JournalEntry.objects.count() == entries
    assert not Withdrawal.objects.exists() and not Payout.objects.exists()


def test_an_unverified_account_is_not_offered(sandbox, debtor, funded_a, owner_a):
    client = _client(owner_a)
    assert _register(client).status_code == 302
    pending = BrandBankAccount.objects.get()
    response = client.post(
        "/portal/alpha/withdraw/", {"bank_account": pending.pk, "amount": "10", "idempotency_key": KEY}
    )
    assert response.status_code == 400
    assert not Withdrawal.objects.exists()


def test_a_bad_iban_is_a_4xx_and_saves_nothing(funded_a, owner_a):
    client = _client(owner_a)
    assert _register(client, iban="IT60X0542811101000000123457").status_code == 400
    assert _register(client, holder_name="").status_code == 400
    assert not BrandBankAccount.objects.exists()


def test_another_brand_and_a_non_owner_cannot_withdraw(sandbox, debtor, funded_a, owner_a, owner_b, brand_b):
    account = _verified_account(_client(owner_a))
    data = {"bank_account": account.pk, "amount": "10", "idempotency_key": KEY}
    other = _client(owner_b)
    assert other.get("/portal/alpha/withdraw/").status_code == 404
    assert other.post("/portal/alpha/withdraw/", data).status_code == 404
    assert _register(other, slug="alpha").status_code == 404
    # B's own page does not offer or accept A's account
    assert other.post("/portal/beta/withdraw/", data).status_code == 400
    admin = _client(member(funded_a, "admin"))
    assert admin.get("/portal/alpha/withdraw/").status_code == 404
    assert admin.post("/portal/alpha/withdraw/", data).status_code == 404
    assert not Withdrawal.objects.exists()
    assert BrandBankAccount.objects.count() == 1


def test_the_page_lists_the_newest_withdrawals_first(sandbox, debtor, funded_a, owner_a):
    client = _client(owner_a)
    account = _verified_account(client)
    for amount, key in (("10.00", "a" * 32), ("20.00", "b" * 32)):
        data = {"bank_account": account.pk, "amount": amount, "idempotency_key": key}
        assert client.post("/portal/alpha/withdraw/", data).status_code == 302
    listed = [w.amount_minor for w in client.get("/portal/alpha/withdraw/").context["withdrawals"]]
    assert listed == [2_000, 1_000]


def test_a_withdrawal_waiting_for_ops_says_so_then_shows_its_way(sandbox, debtor, funded_a, owner_a, settings):
    settings.WITHDRAWAL_APPROVAL_THRESHOLD_MINOR = 5_000
    client = _client(owner_a)
    account = _verified_account(client)
    for amount, key in (("10.00", "a" * 32), ("60.00", "b" * 32)):
        data = {"bank_account": account.pk, "amount": amount, "idempotency_key": key}
        assert client.post("/portal/alpha/withdraw/", data).status_code == 302

    page = client.get("/portal/alpha/withdraw/").content.decode()
    rows = page.split("<h2>")[-1]
    assert rows.count("Waiting for our check") == 1  # the 60.00 above the threshold, not the 10.00
    assert Payout.objects.filter(requires_approval=True).count() == 1


def test_a_withdrawal_approved_but_not_yet_sent_no_longer_waits_for_ops(sandbox, debtor, funded_a, owner_a, settings):
    settings.WITHDRAWAL_APPROVAL_THRESHOLD_MINOR = 5_000
    client = _client(owner_a)
    account = _verified_account(client)
    data = {"bank_account": account.pk, "amount": "60.00", "idempotency_key": "c" * 32}
    assert client.post("/portal/alpha/withdraw/", data).status_code == 302
    # ops gave the second approval; the execution is still queued behind others
    Payout.objects.update(approved_at=timezone.now())

    rows = client.get("/portal/alpha/withdraw/").content.decode().split("<h2>")[-1]
    assert "Waiting for our check" not in rows
