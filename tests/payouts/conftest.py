import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from payouts.rails.psp_api import WiseRail
from payouts.rails.sandbox import sandbox_store
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
