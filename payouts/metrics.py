"""The payouts' state for Prometheus (``core.metrics``), computed at each scrape: how many payouts
are in each non-final status and how old the oldest is, and how many claims are stuck (in
``submitting`` past ``PAYOUT_STALE_CLAIM_SECONDS``: their worker died, and the tick's recovery
has not caught up). Final statuses are not counted: they grow for ever, and a count of them
would scan the table at every scrape."""

from collections.abc import Iterable
from datetime import timedelta

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import Metric

from core.metrics import age_seconds, gauge
from payouts import conf
from payouts.models import Payout, PayoutStatus

NOT_FINAL = (PayoutStatus.CREATED, PayoutStatus.SUBMITTING, PayoutStatus.SUBMITTED)


def payout_metrics() -> Iterable[Metric]:
    now = timezone.now()
    rows = {
        row["status"]: row
        for row in Payout.objects.filter(status__in=NOT_FINAL)
        .values("status")
        .annotate(count=Count("id"), oldest=Min("created_at"))
        .order_by()
    }
    count = gauge("payouts", "Payouts in each status that is not final.", ["status"])
    oldest = gauge(
        "payouts_oldest_age_seconds", "Age of the oldest payout in each status that is not final.", ["status"]
    )
    for status in NOT_FINAL:
        row = rows.get(status.value, {"count": 0, "oldest": None})
        count.add_metric([status.value], row["count"])
        oldest.add_metric([status.value], age_seconds(row["oldest"], now))
    stuck = gauge("payouts_stuck_claims", "Payouts in submitting for longer than PAYOUT_STALE_CLAIM_SECONDS.")
    cutoff = now - timedelta(seconds=conf.stale_claim_seconds())
    stuck.add_metric([], Payout.objects.filter(status=PayoutStatus.SUBMITTING, claimed_at__lt=cutoff).count())
    return [count, oldest, stuck]
