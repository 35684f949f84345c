"""The test books: the platform's accounts for test mode's money (issue 28).

A test tenant (a ``Brand`` with ``livemode=False``) has its own brand, campaign and person
accounts like any tenant. The platform's side of its money — the bank a simulated transfer comes
from and a sandbox payout goes back to, the fees, the money in transit — are accounts of their own
whose code starts with ``testmode:``, so the platform's real books (bank accounts, fees, in transit)
never hold a cent of test money, and a report of the live books leaves out every ``testmode:`` code.
"""

from reconciliation.models import Account, AccountKind
from reconciliation.services import account_get_or_create

TEST_BOOKS_PREFIX = "testmode:"
TEST_OWNER = "test"


def is_test_code(code: str) -> bool:
    return code.startswith(TEST_BOOKS_PREFIX)


def trial_bank_account(*, currency: str) -> Account:
    """``testmode:platform:bank:sandbox:<CUR>``: the sandbox bank that simulated transfers come from
    and sandbox payouts settle against (asset, may go below zero as a real bank account may)."""
    return account_get_or_create(
        code=f"{TEST_BOOKS_PREFIX}platform:bank:sandbox:{currency}",
        name=f"Test mode sandbox bank {currency}",
        kind=AccountKind.ASSET,
        currency=currency,
        allow_overdraft=True,
        owner_type=TEST_OWNER,
    )


def trial_fees_account(*, currency: str) -> Account:
    """``testmode:platform:fees:<CUR>``: the fees test rewards pay, never the platform's income."""
    return account_get_or_create(
        code=f"{TEST_BOOKS_PREFIX}platform:fees:{currency}",
        name=f"Test mode fees {currency}",
        kind=AccountKind.INCOME,
        currency=currency,
        owner_type=TEST_OWNER,
    )


def trial_in_transit_account(*, currency: str) -> Account:
    """``testmode:payouts:in_transit:<CUR>``: sandbox payouts between sent and settled."""
    return account_get_or_create(
        code=f"{TEST_BOOKS_PREFIX}payouts:in_transit:{currency}",
        name=f"Test mode payouts in transit {currency}",
        kind=AccountKind.LIABILITY,
        currency=currency,
        owner_type=TEST_OWNER,
    )
