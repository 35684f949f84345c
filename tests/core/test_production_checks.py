"""Production refuses unsafe defaults (issue 18): one test per check, and ``check --deploy`` is
green only with a complete real configuration."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from core.checks import production_safety, refuse_unsafe_start

ROOT = Path(__file__).resolve().parents[2]
WISE = {
    "BACKEND": "payouts.rails.psp_api.WiseRail",
    "OPTIONS": {
        "base_url": "https://api.wise.com",
        "api_token": "tok",
        "profile_id": "42",
        "webhook_public_key_pem": "pem",
    },
}
SENDER = "recipients.whatsapp_cloud.CloudApiSender"
VOP = {
    "BACKEND": "payouts.rails.vop.EpcVopClient",
    "OPTIONS": {"base_url": "https://vop.bank.example", "requester_bic": "INGBNL2A", "api_token": "tok"},
}


def complete(**changes) -> dict:
    real = {
        "PRODUCTION_CHECKS": True,
        "SANDBOXED_DEPLOYMENT": "",
        "DEBUG": False,
        "SECRET_KEY": secrets.token_urlsafe(64),
        "FIELD_ENCRYPTION_KEY": secrets.token_urlsafe(48),
        "FIELD_FINGERPRINT_KEY": secrets.token_urlsafe(48),
        "PAYOUT_DEFAULT_RAIL": "psp_api",
        "PAYOUT_RAILS": {"psp_api": WISE},
        "PLATFORM_FUNDING_IBAN": "DE89370400440532013000",
        "PAYOUT_WHATSAPP_SENDER": SENDER,
        "WHATSAPP_API_BASE_URL": "https://graph.facebook.com",
        "WHATSAPP_PHONE_NUMBER_ID": "106540352242922",
        "WHATSAPP_ACCESS_TOKEN": secrets.token_urlsafe(32),
        "FAKE_WHATSAPP_ENABLED": False,
        "FAKE_TIKTOK_ENABLED": False,
        "TIKTOK_AUTH_BASE_URL": "https://www.tiktok.com",
        "TIKTOK_API_BASE_URL": "https://open.tiktokapis.com",
        "SOCIALACCOUNT_PROVIDERS": {"tiktok": {"APPS": [{"client_id": "aw8k2live", "secret": "s3cr3t-live"}]}},
        "WEBHOOK_ALLOW_HTTP": False,
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": False,
        "PAYOUT_VOP": VOP,
        "PAYOUT_VOP_ACCEPT_UNCHECKED_NAMES": False,
    }
    return {**real, **changes}


def errors(**changes) -> set[str]:
    with override_settings(**complete(**changes)):
        return {m.id for m in production_safety() if m.is_serious()}


def test_a_complete_real_configuration_passes():
    assert errors() == set()


def test_outside_production_nothing_is_checked():
    assert errors(PRODUCTION_CHECKS=False, PAYOUT_DEFAULT_RAIL="sandbox", DEBUG=True) == set()


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"DEBUG": True}, "core.E101"),
        ({"SECRET_KEY": "x" * 40}, "core.E102"),
        ({"SECRET_KEY": "django-insecure-" + secrets.token_urlsafe(60)}, "core.E102"),
        ({"SECRET_KEY": "ab" * 40}, "core.E102"),
        ({"FIELD_ENCRYPTION_KEY": "short-key"}, "core.E103"),
        ({"FIELD_FINGERPRINT_KEY": "change-me-change-me-change-me-change-me"}, "core.E103"),
        ({"PAYOUT_DEFAULT_RAIL": "sandbox"}, "core.E110"),
        ({"PAYOUT_DEFAULT_RAIL": "psp_api", "PAYOUT_RAILS": {}}, "core.E111"),
        ({"PAYOUT_RAILS": {"psp_api": {**WISE, "OPTIONS": {**WISE["OPTIONS"], "api_token": ""}}}}, "core.E112"),
        (
            {
                "PAYOUT_RAILS": {
                    "psp_api": WISE,
                    "psp_instant": {"OPTIONS": {"base_url": "http://adyen.test/btl/v4", "api_key": "k"}},
                }
            },
            "core.E112",
        ),
        (
            {
                "PAYOUT_DEFAULT_RAIL": "sepa_file",
                "PAYOUT_RAILS": {"sepa_file": {"OPTIONS": {"debtor_iban": "NL91ABNA0417164300"}}},
            },
            "core.E112",
        ),
        ({"PLATFORM_FUNDING_IBAN": "NL91ABNA0417164300"}, "core.E113"),
        ({"PAYOUT_WHATSAPP_SENDER": "recipients.whatsapp_cloud.FakeWhatsAppSender"}, "core.E120"),
        ({"PAYOUT_WHATSAPP_SENDER": "payouts.notifications.FakeWhatsAppSender"}, "core.E120"),  # gone
        ({"PAYOUT_WHATSAPP_SENDER": "nowhere.Sender"}, "core.E120"),
        ({"WHATSAPP_ACCESS_TOKEN": ""}, "core.E123"),
        ({"WHATSAPP_PHONE_NUMBER_ID": ""}, "core.E123"),
        ({"WHATSAPP_API_BASE_URL": "http://127.0.0.1:9000"}, "core.E123"),
        ({"FAKE_WHATSAPP_ENABLED": True}, "core.E121"),
        ({"FAKE_TIKTOK_ENABLED": True}, "core.E122"),
        ({"TIKTOK_API_BASE_URL": "http://127.0.0.1:8000/fake/tiktok"}, "core.E122"),
        ({"SOCIALACCOUNT_PROVIDERS": {"tiktok": {"APPS": [{"client_id": "demo-client-key"}]}}}, "core.E122"),
        ({"WEBHOOK_ALLOW_HTTP": True}, "core.E130"),
        ({"WEBHOOK_ALLOW_PRIVATE_TARGETS": True}, "core.E131"),
        ({"PAYOUT_VOP": {}}, "core.E114"),
    ],
)
def test_each_unsafe_setting_is_an_error_that_says_what_to_set(changes, code):
    with override_settings(**complete(**changes)):
        found = [m for m in production_safety() if m.id == code]
    assert found and all(m.is_serious() and m.hint.startswith(("Set", "Unset", "Give")) for m in found)
    assert errors(**changes) == {code}


def test_paying_names_unchecked_is_accepted_only_by_name_and_then_warned_about():
    # given a production deployment without a Verification of Payee provider
    assert errors(PAYOUT_VOP={}) == {"core.E114"}
    # when it says, by the setting's name, that names are paid unchecked
    with override_settings(**complete(PAYOUT_VOP={}, PAYOUT_VOP_ACCEPT_UNCHECKED_NAMES=True)):
        messages = production_safety()
    # then it may start, and every check says so
    assert [(m.id, m.is_serious()) for m in messages] == [("core.W114", False)]
    # the acceptance is moot once a provider is configured
    with override_settings(**complete(PAYOUT_VOP_ACCEPT_UNCHECKED_NAMES=True)):
        assert production_safety() == []


def test_field_keys_equal_to_each_other_are_an_error():
    key = secrets.token_urlsafe(48)
    assert errors(FIELD_ENCRYPTION_KEY=key, FIELD_FINGERPRINT_KEY=key) == {"core.E104"}


def test_a_sandboxed_deployment_is_allowed_its_fakes_but_says_so_loudly():
    fakes = {"PAYOUT_DEFAULT_RAIL": "sandbox", "FAKE_WHATSAPP_ENABLED": True, "PAYOUT_WHATSAPP_SENDER": ""}
    assert errors(SANDBOXED_DEPLOYMENT="true", **fakes) == {"core.E110", "core.E120", "core.E121"}

    with override_settings(**complete(SANDBOXED_DEPLOYMENT="nobody-is-paid", **fakes)):
        messages = production_safety()
    assert [(m.id, m.is_serious()) for m in messages] == [("core.W100", False)]
    # DEBUG, keys and the webhook guards are never sandboxed.
    assert errors(SANDBOXED_DEPLOYMENT="nobody-is-paid", DEBUG=True, WEBHOOK_ALLOW_HTTP=True) == {
        "core.E101",
        "core.E130",
    }


def test_the_wsgi_start_refuses_an_unsafe_configuration():
    with override_settings(**complete(PAYOUT_DEFAULT_RAIL="sandbox")), pytest.raises(ImproperlyConfigured) as exc:
        refuse_unsafe_start()
    assert "core.E110" in str(exc.value)


def _check_deploy(extra: dict) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(
            (
                "WISE_",
                "PAYOUT_",
                "TIKTOK_",
                "PLATFORM_",
                "SEPA_",
                "WEBHOOK_",
                "FAKE_",
                "WHATSAPP_",
                "VOP_",
                "CACHE_",
                "METRICS_",
            )
        )
        # the browser tests set it for Playwright's event loop; no deployment has it
        and key != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DATABASE_URL="sqlite:///:memory:",
        SECRET_KEY=secrets.token_urlsafe(64),
        FIELD_ENCRYPTION_KEY=secrets.token_urlsafe(48),
        FIELD_FINGERPRINT_KEY=secrets.token_urlsafe(48),
        **extra,
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_green_only_with_a_complete_real_configuration():
    keys_only = _check_deploy({})
    assert keys_only.returncode == 1
    for code in ("core.E110", "core.E113", "core.E120", "core.E122", "core.E114"):
        assert code in keys_only.stderr

    real = _check_deploy(
        {
            "PAYOUT_DEFAULT_RAIL": "psp_api",
            "WISE_BASE_URL": "https://api.wise.com",
            "WISE_API_TOKEN": secrets.token_hex(16),
            "WISE_PROFILE_ID": "4242",
            "WISE_WEBHOOK_PUBLIC_KEY": "-----BEGIN PUBLIC KEY-----",
            "PLATFORM_FUNDING_IBAN": "DE89370400440532013000",
            # the Cloud API sender is chosen once its phone number id is set
            "WHATSAPP_PHONE_NUMBER_ID": "106540352242922",
            "WHATSAPP_ACCESS_TOKEN": secrets.token_urlsafe(32),
            "TIKTOK_CLIENT_KEY": "aw8k2live",
            "TIKTOK_CLIENT_SECRET": secrets.token_hex(16),
            "VOP_BASE_URL": "https://vop.bank.example",
            "VOP_REQUESTER_BIC": "INGBNL2A",
            "CACHE_URL": "redis://127.0.0.1:6379/0",
            "METRICS_TOKEN": secrets.token_urlsafe(32),
        }
    )
    assert real.returncode == 0, real.stderr
    assert "no issues" in real.stdout
