"""Reads about payouts: what is waiting to be paid, admin lists, and the reconciliation
dashboard's exception lists."""

from datetime import date, timedelta
from decimal import Decimal

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Sum
from django.utils import timezone

from campaigns.models import Reward, RewardStatus
from core.money import minor_to_decimal
from payouts import conf
from payouts.models import Payout, PayoutItem, PayoutStatus
from reconciliation.bank_selectors import OpenException


def rewards_awaiting_payout() -> QuerySet[Reward]:
    """Payable rewards in no live payout; a paid reward whose payout came back is owed again."""
    items = PayoutItem.objects.filter(reward=OuterRef("pk"))
    return Reward.objects.filter(
        Q(status=RewardStatus.PAYABLE) | Q(Exists(items), status=RewardStatus.PAID), ~Exists(items.filter(active=True))
    )


def bank_accounts_paid() -> QuerySet:
    """Proof that a bank account's holder is paid there: the ids of accounts a payout settled
    into and was not returned from (a return moves it to ``returned``). Registered with
    ``recipients.selectors.iban_proof_register``: another brand's holder of an IBAN counts for
    fraud signals only with such a proof. A test tenant's payouts prove nothing: the sandbox
    "settles" whatever a brand types, so its test people would count at every other brand."""
    return (
        Payout.objects.filter(status=PayoutStatus.SETTLED, bank_account__isnull=False)
        .exclude(person__brand__livemode=False)
        .values("bank_account_id")
    )


def payouts_for_admin() -> QuerySet[Payout]:
    return Payout.objects.select_related("person", "bank_account", "batch", "approved_by", "created_by")


def business_days_before(day: date, days: int) -> date:
    """The date ``days`` business days (Mon-Fri) before ``day``."""
    while days > 0:
        day -= timedelta(days=1)
        if day.weekday() < 5:
            days -= 1
    return day


def business_days_after(day: date, days: int) -> date:
    """The date ``days`` business days (Mon-Fri) after ``day``."""
    while days > 0:
        day += timedelta(days=1)
        if day.weekday() < 5:
            days -= 1
    return day


def _exception(kind: str, title: str, qs, link: str) -> list[OpenException]:
    rows = list(qs.values("currency").annotate(n=Count("id"), total=Sum("amount_minor")))
    return [
        OpenException(
            kind=kind,
            title=f"{title} ({row['currency']})",
            count=row["n"],
            amount=minor_to_decimal(row["total"], row["currency"]) if row["total"] else Decimal(0),
            link=link,
        )
        for row in rows
        if row["n"]
    ]


def payout_exceptions(*, today: date | None = None) -> list[OpenException]:
    """Payouts the bank statement should have shown by now: submitted and not settled after N
    business days, and payouts the rail called settled but no bank line confirmed."""
    today = today or timezone.localdate()
    cutoff = business_days_before(today, conf.bank_overdue_business_days())
    # A payout paid from a balance the rail keeps (PayPal's) never shows on the bank statement.
    bank_paid = Payout.objects.filter(debtor_account_code__startswith="platform:bank:")
    overdue = bank_paid.filter(status=PayoutStatus.SUBMITTED, submitted_at__date__lt=cutoff)
    unseen = bank_paid.filter(
        status=PayoutStatus.SETTLED,
        settled_via__in=["rail", "pain002"],
        bank_debit_line_id__isnull=True,
        settled_at__date__lt=cutoff,
    )
    return [
        *_exception(
            "payouts_not_on_bank",
            "Payouts sent but not seen on the bank",
            overdue,
            "/admin/payouts/payout/?status__exact=submitted",
        ),
        *_exception(
            "payouts_settled_unseen",
            "Payouts settled by the rail with no bank line",
            unseen,
            "/admin/payouts/payout/?status__exact=settled",
        ),
    ]


def bank_postings_ahead() -> dict[str, int]:
    """Per bank ledger account code, what payouts posted to it that no bank line booked yet, in
    minor units as the bank account moved: settled by their rail or a pain.002 with no debit line
    matched (out), returned by their rail with no return line (back). A timing difference of the
    statements' closing-balance check (``reconciliation.bank_selectors``)."""
    ahead: dict[str, int] = {}
    bank_paid = Payout.objects.filter(debtor_account_code__startswith="platform:bank:")
    out = (
        bank_paid.filter(settled_entry__isnull=False, bank_debit_line_id__isnull=True)
        .values("debtor_account_code")
        .annotate(total=Sum("amount_minor"))
    )
    back = (
        bank_paid.filter(status=PayoutStatus.RETURNED, bank_return_line_id__isnull=True)
        .values("debtor_account_code")
        .annotate(total=Sum("amount_minor"))
    )
    for row in out:
        ahead[row["debtor_account_code"]] = ahead.get(row["debtor_account_code"], 0) - row["total"]
    for row in back:
        ahead[row["debtor_account_code"]] = ahead.get(row["debtor_account_code"], 0) + row["total"]
    return ahead
