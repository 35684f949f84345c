"""Production refuses unsafe defaults: system checks that are errors, not warnings.

They run only where ``PRODUCTION_CHECKS`` is on (``config.settings.production`` sets it), on
every ``manage.py`` command that checks (``check --deploy``, ``migrate``) and at WSGI start-up
(``refuse_unsafe_start``), because gunicorn runs no checks of its own. The defaults that make the
demo work — the sandbox rail that settles at once, the in-memory WhatsApp sender, the local TikTok
fake, the demo bank accounts — would, in production, tell people "paid" while nobody is paid, so
each is an error that says what to set. A deliberately sandboxed deployment (a staging copy, a
public demo) says so with ``SANDBOXED_DEPLOYMENT=nobody-is-paid``: the fakes are then allowed and
a warning says so on every check; DEBUG, weak keys and the webhook guards stay errors. Paying
without Verification of Payee is accepted only by name (``PAYOUT_VOP_ACCEPT_UNCHECKED_NAMES``),
and then warned about the same way.
"""

import logging
from collections.abc import Callable

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger("security")

SANDBOX_OPT_IN = "nobody-is-paid"
# The demo values of config/settings/base.py: a textbook IBAN that belongs to nobody we know.
DEMO_IBAN = "NL91ABNA0417164300"
WEAK_MARKERS = ("insecure", "not-secret", "local-dev", "changeme", "change-me", "demo", "example")
MIN_SECRET_LENGTH = 50
MIN_FIELD_KEY_LENGTH = 32


# The production checks of integrations that live in higher apps (the social platforms' settings),
# registered from their AppConfig.ready: core names none of them.
_INTEGRATION_CHECKS: list[Callable[[], list[checks.CheckMessage]]] = []


def integration_checks_register(check: Callable[[], list[checks.CheckMessage]]) -> None:
    """Run ``check`` with the production checks a sandboxed deployment may skip (the fakes)."""
    if check not in _INTEGRATION_CHECKS:
        _INTEGRATION_CHECKS.append(check)


def production_checks_on() -> bool:
    return bool(getattr(settings, "PRODUCTION_CHECKS", False))


def sandboxed() -> bool:
    return getattr(settings, "SANDBOXED_DEPLOYMENT", "") == SANDBOX_OPT_IN


def _weak(value: str, minimum: int) -> bool:
    lowered = value.lower()
    return len(value) < minimum or len(set(value)) < 10 or any(marker in lowered for marker in WEAK_MARKERS)


@checks.register(checks.Tags.security, deploy=False)
def production_safety(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if not production_checks_on():
        return []
    problems = [*_always(), *_fakes()]
    if sandboxed():
        problems.append(
            checks.Warning(
                "SANDBOXED DEPLOYMENT: payouts go to the sandbox rail and messages to fakes; nobody is paid.",
                hint="Unset SANDBOXED_DEPLOYMENT once this deployment pays real people.",
                id="core.W100",
            )
        )
    return problems


def _always() -> list[checks.CheckMessage]:
    problems = []
    if settings.DEBUG:
        problems.append(checks.Error("DEBUG is on.", hint="Set DEBUG=false (or leave it unset).", id="core.E101"))
    secret = settings.SECRET_KEY or ""
    if _weak(secret, MIN_SECRET_LENGTH):
        problems.append(
            checks.Error(
                f"SECRET_KEY is weak: under {MIN_SECRET_LENGTH} characters, too few distinct ones, or a demo value.",
                hint="Set SECRET_KEY to python -c 'import secrets; print(secrets.token_urlsafe(64))'.",
                id="core.E102",
            )
        )
    encryption = [k.strip() for k in (settings.FIELD_ENCRYPTION_KEY or "").split(",") if k.strip()]
    fingerprint = settings.FIELD_FINGERPRINT_KEY or ""
    for name, values in (("FIELD_ENCRYPTION_KEY", encryption), ("FIELD_FINGERPRINT_KEY", [fingerprint])):
        # A missing key is recipients.E001; here only keys that are set but guessable or shared.
        set_values = [v for v in values if v]
        if any(_weak(v, MIN_FIELD_KEY_LENGTH) or v == secret for v in set_values):
            problems.append(
                checks.Error(
                    f"{name} is weak: under {MIN_FIELD_KEY_LENGTH} characters, a demo value, or equal to SECRET_KEY.",
                    hint=f"Set {name} to its own random value (secrets.token_urlsafe(48)).",
                    id="core.E103",
                )
            )
    if fingerprint and fingerprint in encryption:
        problems.append(
            checks.Error(
                "FIELD_FINGERPRINT_KEY equals a FIELD_ENCRYPTION_KEY.",
                hint="Give the fingerprint key its own value: one leaked key must not open both.",
                id="core.E104",
            )
        )
    if settings.WEBHOOK_ALLOW_HTTP:
        problems.append(
            checks.Error(
                "WEBHOOK_ALLOW_HTTP is on: webhooks with people's payouts would leave in clear text.",
                hint="Unset WEBHOOK_ALLOW_HTTP.",
                id="core.E130",
            )
        )
    if settings.WEBHOOK_ALLOW_PRIVATE_TARGETS:
        problems.append(
            checks.Error(
                "WEBHOOK_ALLOW_PRIVATE_TARGETS is on: a brand could make us call our own network.",
                hint="Set WEBHOOK_ALLOW_PRIVATE_TARGETS = False (only local.py and test.py turn it on).",
                id="core.E131",
            )
        )
    return problems


def _fakes() -> list[checks.CheckMessage]:
    """What only a sandboxed deployment may keep."""
    if sandboxed():
        return []
    problems = []
    rail = settings.PAYOUT_DEFAULT_RAIL
    rails = getattr(settings, "PAYOUT_RAILS", {})
    if rail == "sandbox":
        problems.append(
            checks.Error(
                "PAYOUT_DEFAULT_RAIL is the sandbox: payouts 'settle' at once and nobody is paid.",
                hint="Set PAYOUT_DEFAULT_RAIL=psp_instant, sepa_file or psp_api "
                "(or SANDBOXED_DEPLOYMENT=nobody-is-paid).",
                id="core.E110",
            )
        )
    elif rail not in rails:
        problems.append(
            checks.Error(
                f"PAYOUT_DEFAULT_RAIL={rail!r} is not configured.",
                hint="Set ADYEN_BASE_URL, ADYEN_API_KEY, ADYEN_BALANCE_ACCOUNT_ID (psp_instant) or WISE_BASE_URL, "
                "WISE_API_TOKEN, WISE_PROFILE_ID, WISE_WEBHOOK_PUBLIC_KEY (psp_api).",
                id="core.E111",
            )
        )
    problems += _rail_credentials(rails)
    if settings.PLATFORM_FUNDING_IBAN == DEMO_IBAN:
        problems.append(
            checks.Error(
                "PLATFORM_FUNDING_IBAN is the demo account: brands would fund an account that is not ours.",
                hint="Set PLATFORM_FUNDING_IBAN, PLATFORM_FUNDING_BIC and PLATFORM_FUNDING_NAME.",
                id="core.E113",
            )
        )
    for check in _INTEGRATION_CHECKS:
        problems += check()
    problems += _payee_check()
    return problems


def _payee_check() -> list[checks.CheckMessage]:
    """Without a Verification of Payee provider the rails without a check of their own (pain.001
    files, the Adyen rail) pay every name unchecked: money to the wrong person is the worst bug.
    ``PAYOUT_VOP`` is read as ``payouts.rails.vop.vop_provider`` reads it (core imports no app)."""
    if (getattr(settings, "PAYOUT_VOP", None) or {}).get("BACKEND"):
        return []
    if getattr(settings, "PAYOUT_VOP_ACCEPT_UNCHECKED_NAMES", False):
        return [
            checks.Warning(
                "No Verification of Payee provider: payee names are not checked against their IBANs.",
                hint="Set VOP_BASE_URL and VOP_REQUESTER_BIC, then unset PAYOUT_VOP_ACCEPT_UNCHECKED_NAMES.",
                id="core.W114",
            )
        ]
    return [
        checks.Error(
            "No Verification of Payee provider: every payee name would be paid unchecked against its IBAN.",
            hint="Set VOP_BASE_URL and VOP_REQUESTER_BIC (and VOP_API_TOKEN), or accept paying names unchecked "
            "with PAYOUT_VOP_ACCEPT_UNCHECKED_NAMES=true.",
            id="core.E114",
        )
    ]


def _rail_credentials(rails: dict) -> list[checks.CheckMessage]:
    problems = []
    psp = rails.get("psp_api", {}).get("OPTIONS")
    if psp is not None:
        missing = [
            env
            for env, key in (
                ("WISE_API_TOKEN", "api_token"),
                ("WISE_PROFILE_ID", "profile_id"),
                ("WISE_WEBHOOK_PUBLIC_KEY", "webhook_public_key_pem"),
            )
            if not psp.get(key)
        ]
        if not str(psp.get("base_url", "")).startswith("https://"):
            missing.append("WISE_BASE_URL (https)")
        if missing:
            problems.append(
                checks.Error(
                    "The psp_api rail is missing credentials.", hint=f"Set {', '.join(missing)}.", id="core.E112"
                )
            )
    instant = rails.get("psp_instant", {}).get("OPTIONS")
    if instant is not None:
        missing = [
            env
            for env, key in (("ADYEN_API_KEY", "api_key"), ("ADYEN_BALANCE_ACCOUNT_ID", "balance_account_id"))
            if not instant.get(key)
        ]
        if not str(instant.get("base_url", "")).startswith("https://"):
            missing.append("ADYEN_BASE_URL (https)")
        if missing:
            problems.append(
                checks.Error(
                    "The psp_instant rail is missing credentials.", hint=f"Set {', '.join(missing)}.", id="core.E112"
                )
            )
    sepa = rails.get("sepa_file", {}).get("OPTIONS", {})
    if settings.PAYOUT_DEFAULT_RAIL == "sepa_file" and sepa.get("debtor_iban") == DEMO_IBAN:
        problems.append(
            checks.Error(
                "The sepa_file rail pays from the demo debtor account.",
                hint="Set SEPA_DEBTOR_NAME, SEPA_DEBTOR_IBAN and SEPA_DEBTOR_BIC.",
                id="core.E112",
            )
        )
    return problems


def refuse_unsafe_start() -> None:
    """Raise ImproperlyConfigured when any check fails: called by the WSGI entry point, since a
    web server that never runs ``manage.py check`` would otherwise serve a fake bank."""
    if not production_checks_on():
        return
    errors = [m for m in checks.run_checks(include_deployment_checks=True) if m.is_serious()]
    if errors:
        raise ImproperlyConfigured("Refusing to start:\n" + "\n".join(f"{m.id}: {m.msg} {m.hint}" for m in errors))
    if sandboxed():
        logger.warning("SANDBOXED DEPLOYMENT: nobody is paid (SANDBOXED_DEPLOYMENT=%s)", SANDBOX_OPT_IN)
