"""The outgoing webhooks' backlog for Prometheus (``core.metrics``), computed at each scrape:
deliveries not yet delivered (pending, being sent) and how late the most overdue pending one is."""

from collections.abc import Iterable

from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import Metric

from campaigns.models import DeliveryStatus, WebhookDelivery
from core.metrics import age_seconds, gauge


def webhook_metrics() -> Iterable[Metric]:
    now = timezone.now()
    counts = WebhookDelivery.objects.filter(status__in=(DeliveryStatus.PENDING, DeliveryStatus.SENDING)).aggregate(
        pending=Count("id", filter=Q(status=DeliveryStatus.PENDING)),
        sending=Count("id", filter=Q(status=DeliveryStatus.SENDING)),
    )
    overdue = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now).aggregate(
        oldest=Min("next_attempt_at")
    )["oldest"]
    backlog = gauge("webhook_deliveries_undelivered", "Webhook deliveries not yet delivered.", ["status"])
    for status in ("pending", "sending"):
        backlog.add_metric([status], counts[status])
    late = gauge("webhook_delivery_overdue_seconds", "How long past its due time the most overdue pending delivery is.")
    late.add_metric([], age_seconds(overdue, now))
    return [backlog, late]
