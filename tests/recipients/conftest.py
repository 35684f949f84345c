from tests.payouts.conftest import fake_wise, psp, wise_signing_key  # noqa: F401 - fixtures
