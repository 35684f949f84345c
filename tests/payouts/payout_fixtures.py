"""Personas and builders for the payout engine's tests: a funded JoyBack campaign paying 5.00 per
TikTok login with no hold period, the platform's operating bank account, and an in-memory
sandbox rail. Import the fixtures a module uses by name."""

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from campaigns.models import Reward
from campaigns.services import event_ingest, rewards_mature
from payouts.rails.sandbox import sandbox_store
from payouts.services.states import in_transit_account
from recipients.whatsapp_cloud import FakeWhatsAppSender
from reconciliation.selectors import account_balance, account_balance_by_code, ledger_verify_report
from reconciliation.services.statements import platform_bank_account_create
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign, make_iban

# Star-imported by the test modules (the fixtures); the helpers are imported by name.
__all__ = ["brand", "campaign", "debtor", "sandbox"]

DEBTOR_IBAN = "NL91ABNA0417164300"
LOGIN_500 = {"trigger": "tiktok_login", "fixed_minor": 500}
_n = itertools.count(1)


def iban(n: int | None = None) -> str:
    """A fresh valid Italian IBAN."""
    return make_iban("IT", f"X0542811101{(n or next(_n)) + 100000:012d}")


@pytest.fixture
def sandbox(settings):
    """The in-process sandbox bank, empty, failing only where a test says so, and without its
    own de-duplication: a second submit would be a second transfer, so the counts prove that the
    engine never submits twice."""
    settings.SANDBOX_STORE_PATH = None
    settings.SANDBOX_FAILING_IBANS = {}
    settings.PAYOUT_DEFAULT_RAIL = "sandbox_nodedupe"
    settings.PAYOUT_RAILS = {
        **settings.PAYOUT_RAILS,
        "sandbox_nodedupe": {"BACKEND": "payouts.rails.sandbox.SandboxRail", "OPTIONS": {"deduplicate": False}},
    }
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = False
    settings.PAYOUT_APPROVAL_THRESHOLD_MINOR = 100_000
    store = sandbox_store()
    store.reset()
    FakeWhatsAppSender.reset()
    return store


@pytest.fixture
def debtor(db):
    return platform_bank_account_create(name="Operating", iban=DEBTOR_IBAN, currency="EUR")


@pytest.fixture
def brand(db):
    return BrandFactory(name="Joy Shoes", slug="joy-shoes")


@pytest.fixture
def campaign(brand):
    return funded_campaign(brand=brand, amount_minor=1_000_000, rules=[LOGIN_500])


def staff(username: str, *perms: str):
    user = get_user_model().objects.create_user(username, password="x", is_staff=True)
    for perm in perms:
        user.user_permissions.add(Permission.objects.get(codename=perm, content_type__app_label="payouts"))
    return get_user_model().objects.get(pk=user.pk)


def payable_reward(
    brand, *, account_iban: str | None = None, email: str | None = None, name: str = "Giulia Rossi", **fields
) -> Reward:
    """A 5.00 reward made payable (ingested, then matured: no hold period)."""
    fields.setdefault("email", email or f"p{next(_n)}@example.com")
    result = event_ingest(brand=brand, payload=event(iban=account_iban or "", name=name, **fields))
    assert result.reward is not None, result.reason
    rewards_mature()
    return Reward.objects.get(pk=result.reward.pk)


def payable_minor(person_id: int) -> int:
    return account_balance_by_code(code=f"recipient:{person_id}:payable:EUR").posted_minor


def in_transit_minor() -> int:
    return account_balance(account_id=in_transit_account("EUR").pk).posted_minor


def bank_minor(debtor) -> int:
    return account_balance(account_id=debtor.ledger_account_id).posted_minor


def assert_books_ok() -> None:
    report = ledger_verify_report()
    assert report.ok, report
