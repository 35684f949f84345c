"""Test mode's payouts (issue 28; ``campaigns.services.test_mode`` has the design).

A payout is a test payout when its person belongs to a test tenant. It is created on the sandbox
rail whatever the routing rules say, paid "from" the test books' sandbox bank
(``testmode:platform:bank:sandbox:<CUR>`` is its ``debtor_account_code``: that is how every later
step knows it is a test payout) and moves through ``testmode:payouts:in_transit:<CUR>``, so the
platform's real bank and in-transit accounts never see it. A file rail never takes it (payout
files take only the live operating account's payouts).

Two guards run before any rail is called (``payout_rail_refusal``): a test payout on anything but
the sandbox is refused, and where production refuses the sandbox (``PRODUCTION_CHECKS`` without
``SANDBOXED_DEPLOYMENT``) a live payout on the sandbox is refused too — routing already treats the
sandbox as unavailable for live money there, so this only catches a hand-edited payout.
"""

from core.checks import production_checks_on, sandboxed
from payouts.models import Payout
from payouts.rails import get_rail
from payouts.rails.base import Rail
from payouts.rails.routing import NoRoute
from payouts.rails.sandbox import SandboxRail
from reconciliation.test_books import is_test_code, trial_bank_account

SANDBOX_RAIL = "sandbox"
# ISO 20022 AG01 "transaction forbidden": what the refusal is recorded as.
REFUSED_REASON = "AG01"


def payout_is_test(payout: Payout) -> bool:
    return is_test_code(payout.debtor_account_code)


def trial_debtor_code(*, currency: str) -> str:
    """The account a test payout is paid from (and settles against)."""
    return trial_bank_account(currency=currency).code


def live_money_refuses_sandbox() -> bool:
    """Production refuses the sandbox for live money, unless the whole deployment is sandboxed."""
    return production_checks_on() and not sandboxed()


def trial_route(*, currency: str, country: str, amount_minor: int, account_type: str) -> tuple[str, str]:
    """A test payout's rail: the sandbox, never a fallback. Raises NoRoute when the sandbox cannot
    carry it (it takes IBANs only): the test money waits, as a live payout nobody can carry does."""
    rail = get_rail(SANDBOX_RAIL)
    if not isinstance(rail, SandboxRail) or not rail.capabilities().supports(
        currency=currency, country=country, amount_minor=amount_minor, account_type=account_type
    ):
        raise NoRoute(
            f"The sandbox cannot carry {amount_minor} {currency} to {country} ({account_type}).",
            details={"currency": currency, "country": country, "amount_minor": amount_minor},
        )
    return SANDBOX_RAIL, ""


def payout_rail_refusal(payout: Payout, rail: Rail) -> str:
    """Why ``payout`` must not be sent on ``rail`` (empty: it may)."""
    is_sandbox = isinstance(rail, SandboxRail)
    if payout_is_test(payout) and not is_sandbox:
        return f"A test payout goes to the sandbox only, never to {payout.rail!r}."
    if not payout_is_test(payout) and is_sandbox and live_money_refuses_sandbox():
        return "Live money never goes to the sandbox rail in production."
    return ""
