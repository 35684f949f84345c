"""Notices to people for Prometheus (``core.metrics``), computed at each scrape: how many are
still being delivered and how long past its due time the most overdue one is."""

from collections.abc import Iterable

from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import Metric

from core.metrics import age_seconds, gauge
from recipients.models_notices import Notice, NoticeStatus


def notice_metrics() -> Iterable[Metric]:
    now = timezone.now()
    row = Notice.objects.filter(status=NoticeStatus.PENDING).aggregate(
        waiting=Count("id"), overdue=Min("next_attempt_at", filter=Q(next_attempt_at__lte=now))
    )
    waiting = gauge("notices_waiting", "Notices to people still being delivered.")
    waiting.add_metric([], row["waiting"])
    late = gauge("notice_overdue_seconds", "How long past its due time the most overdue waiting notice is.")
    late.add_metric([], age_seconds(row["overdue"], now))
    return [waiting, late]
