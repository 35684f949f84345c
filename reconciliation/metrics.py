"""The books for Prometheus (``core.metrics``), computed at each scrape: how long ago each
platform bank account last had a statement imported (since the account was added, before its
first), so an alert says when the bank's files stop arriving; and whether the daily
``ledger_verify`` passed (``core.metrics.verification_register``)."""

from collections.abc import Iterable

from django.db.models import Max
from django.utils import timezone
from prometheus_client.core import Metric

from core.metrics import age_seconds, gauge
from reconciliation.models import PlatformBankAccount


def statement_metrics() -> Iterable[Metric]:
    now = timezone.now()
    age = gauge(
        "bank_statement_last_import_age_seconds",
        "Seconds since a statement of the platform bank account was last imported.",
        ["account", "currency"],
    )
    accounts = PlatformBankAccount.objects.annotate(last=Max("statements__created_at")).values_list(
        "pk", "currency", "created_at", "last"
    )
    for pk, currency, created_at, last in accounts:
        age.add_metric([str(pk), currency], age_seconds(last or created_at, now))
    return [age]


LEDGER_VERIFY_TASK = "reconciliation.tasks.ledger_verify_task"


def ledger_verified(result) -> bool:
    """``ledger_verify_task`` returns True only when the books and the bank side both verify."""
    return result is True
