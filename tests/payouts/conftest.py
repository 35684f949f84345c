import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from payouts.rails.adyen import AdyenTransfersRail
from payouts.rails.paypal import PayPalPayoutsRail
from payouts.rails.psp_api import WiseRail
from payouts.rails.sandbox import sandbox_store
from tests.fakes.adyen_server import FakeAdyen
from tests.fakes.paypal_server import FakePayPal
from tests.fakes.vop_server import FakeVop
from tests.fakes.wise_server import FakeWise


@pytest.fixture(scope="session")
def wise_signing_key():
    """The fake Wise's webhook key pair, made once: RSA key generation is the slow part."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def fake_wise(wise_signing_key):
    fake = FakeWise(private_key=wise_signing_key).start()
    yield fake
    fake.stop()


@pytest.fixture
def wise_rail(fake_wise):
    # Short enough that the timeout tests do not wait long, long enough for a busy 2-core machine.
    return WiseRail(
        base_url=fake_wise.base_url,
        api_token=fake_wise.token,
        profile_id=fake_wise.profile_id,
        timeout_seconds=2.0,
        webhook_public_key_pem=fake_wise.public_key_pem,
    )


@pytest.fixture
def sandbox_memory(settings):
    """The in-process sandbox store, emptied before the test."""
    settings.SANDBOX_STORE_PATH = None
    store = sandbox_store()
    store.reset()
    return store


@pytest.fixture
def psp(settings, fake_wise):
    """The fake Wise configured as the ``psp_api`` rail, and so as the source of the account
    requirements (``recipients.accounts``); the requirements cache starts empty."""
    from django.core.cache import cache

    settings.PAYOUT_RAILS = {
        **settings.PAYOUT_RAILS,
        "psp_api": {
            "BACKEND": "payouts.rails.psp_api.WiseRail",
            "OPTIONS": {
                "base_url": fake_wise.base_url,
                "api_token": fake_wise.token,
                "profile_id": fake_wise.profile_id,
                "timeout_seconds": 5.0,
                "webhook_public_key_pem": fake_wise.public_key_pem,
            },
        },
    }
    cache.clear()
    return fake_wise


@pytest.fixture
def fake_adyen():
    fake = FakeAdyen().start()
    yield fake
    fake.stop()


@pytest.fixture
def adyen_rail(fake_adyen):
    return AdyenTransfersRail(
        base_url=fake_adyen.api_url,
        api_key=fake_adyen.api_key,
        balance_account_id=fake_adyen.balance_account_id,
        timeout_seconds=2.0,
        instant_wait_seconds=2.0,
        poll_interval_seconds=0.02,
    )


@pytest.fixture
def fake_vop(settings):
    """The EPC VoP fake, configured as the VoP provider of the rails without their own check."""
    fake = FakeVop().start()
    settings.PAYOUT_VOP = {
        "BACKEND": "payouts.rails.vop.EpcVopClient",
        "OPTIONS": {
            "base_url": fake.base_url,
            "requester_bic": "ABNANL2A",
            "api_token": fake.token,
            "timeout_seconds": 2.0,
        },
    }
    yield fake
    fake.stop()


@pytest.fixture
def instant(settings, sandbox, fake_adyen, fake_vop):
    """Payouts go on the instant rail (the Adyen fake), payees checked by the EPC VoP fake."""
    settings.PAYOUT_RAILS = {
        **settings.PAYOUT_RAILS,
        "psp_instant": {
            "BACKEND": "payouts.rails.adyen.AdyenTransfersRail",
            "OPTIONS": {
                "base_url": fake_adyen.api_url,
                "api_key": fake_adyen.api_key,
                "balance_account_id": fake_adyen.balance_account_id,
                "timeout_seconds": 2.0,
                "instant_wait_seconds": 2.0,
                "poll_interval_seconds": 0.02,
            },
        },
    }
    settings.PAYOUT_DEFAULT_RAIL = "psp_instant"
    return fake_adyen


@pytest.fixture(scope="session")
def paypal_signing_key():
    """The fake PayPal's webhook key pair, made once."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def fake_paypal(paypal_signing_key):
    fake = FakePayPal(private_key=paypal_signing_key).start()
    yield fake
    fake.stop()


def paypal_options(fake: FakePayPal) -> dict:
    return {
        "base_url": fake.base_url,
        "client_id": fake.client_id,
        "client_secret": fake.client_secret,
        "webhook_id": fake.webhook_id,
        "timeout_seconds": 2.0,
    }


@pytest.fixture
def paypal_rail(fake_paypal):
    return PayPalPayoutsRail(**paypal_options(fake_paypal))


@pytest.fixture
def paypal(settings, fake_paypal):
    """The fake PayPal configured as the ``paypal`` rail (its certificate cache empty)."""
    from django.core.cache import cache

    settings.PAYOUT_RAILS = {
        **settings.PAYOUT_RAILS,
        "paypal": {"BACKEND": "payouts.rails.paypal.PayPalPayoutsRail", "OPTIONS": paypal_options(fake_paypal)},
    }
    cache.clear()
    return fake_paypal
