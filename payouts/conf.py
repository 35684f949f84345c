"""Payout settings with their defaults. Read through these functions (never ``settings.X``
directly) so a test's ``settings`` fixture override takes effect at call time."""

from django.conf import settings


def _get(name: str, default):
    return getattr(settings, name, default)


def approval_threshold_minor() -> int:
    """Payouts of at least this amount (minor units) need a second staff member's approval."""
    return _get("PAYOUT_APPROVAL_THRESHOLD_MINOR", 100_000)


def withdrawal_approval_threshold_minor() -> int:
    """A brand's withdrawal of at least this amount (minor units) waits for ops' approval."""
    return _get("WITHDRAWAL_APPROVAL_THRESHOLD_MINOR", 100_000)


def batch_approval_threshold_minor() -> int:
    """A pain.001 batch whose control sum reaches this needs approval before it can be downloaded."""
    return _get("PAYOUT_BATCH_APPROVAL_THRESHOLD_MINOR", 1_000_000)


def batch_expire_days() -> int:
    """A pain.001 batch never downloaded this many days after it was built expires: it can no
    longer be downloaded and its payouts fail back to payable, to be paid in a new file."""
    return _get("PAYOUT_BATCH_EXPIRE_DAYS", 7)


def max_attempts() -> int:
    return _get("PAYOUT_MAX_ATTEMPTS", 6)


def backoff_base_seconds() -> float:
    return _get("PAYOUT_BACKOFF_BASE_SECONDS", 30.0)


def backoff_max_seconds() -> float:
    return _get("PAYOUT_BACKOFF_MAX_SECONDS", 3600.0)


def stale_claim_seconds() -> int:
    """A payout left in ``submitting`` longer than this is taken to have lost its worker."""
    return _get("PAYOUT_STALE_CLAIM_SECONDS", 120)


def requeue_after_seconds() -> int:
    """A payout whose execute task was enqueued this long ago and never claimed it is taken to have
    lost the task (it failed before its claim); the sweep enqueues another. Far above how long a
    task waits in a queue that drains."""
    return _get("PAYOUT_REQUEUE_AFTER_SECONDS", 900)


def failed_retry_minutes() -> float:
    """After a payout the rail refused for a reason other than the account (a limit, a
    reachability or policy refusal), the next one to the same account waits this long, doubling
    with each refusal in a row (at most ``failed_retry_max_hours``): a refusal that persists
    would otherwise be retried, and the person told, every minute."""
    return _get("PAYOUT_FAILED_RETRY_MINUTES", 60.0)


def failed_retry_max_hours() -> float:
    return _get("PAYOUT_FAILED_RETRY_MAX_HOURS", 24.0)


def min_amount_minor() -> int:
    """Global floor below which no payout is created (campaigns may set a higher one)."""
    return _get("PAYOUT_MIN_AMOUNT_MINOR", 1)


def return_watch_hours() -> int:
    """How long after settlement the poller keeps asking an instant rail whether it was returned."""
    return _get("PAYOUT_RETURN_WATCH_HOURS", 48)


def bank_overdue_business_days() -> int:
    """A payout not seen on the bank statement this many business days after leaving is an exception."""
    return _get("PAYOUT_BANK_OVERDUE_BUSINESS_DAYS", 2)


def debtor_ibans() -> dict[str, str]:
    """Currency → IBAN of the platform bank account payouts are paid from (reconciliation's
    PlatformBankAccount). Unset: the first active platform account in that currency."""
    return _get("PAYOUT_DEBTOR_IBANS", {})


def enqueue_on_payable() -> bool:
    """Create and execute payouts as soon as rewards become payable (hooked on the reward rows),
    instead of waiting for the every-minute sweep. Off by default when django-q2 runs tasks
    synchronously (tests): there the hook would run a whole payout inside other apps' calls."""
    value = _get("PAYOUT_ENQUEUE_ON_PAYABLE", None)
    if value is None:
        return not settings.Q_CLUSTER.get("sync", False)
    return bool(value)


def bank_charge_max_minor() -> int:
    """The largest bank charge (minor units) a statement line may carry and still match the payout
    its EndToEndId names: a debit that much above the payout, a return that much below it. Small
    by default (SEPA charges are cents to a few euro): a larger difference goes to staff, since the
    platform absorbs whatever it books as a charge."""
    return _get("PAYOUT_BANK_CHARGE_MAX_MINOR", 500)
