"""The portal tables' filters (GET, so a filtered view can be bookmarked and exported as it is),
with django-filter as the API's lists. A value that does not parse filters nothing."""

import django_filters

from campaigns.models import Reward
from payouts.models import PayoutItem


class RewardTableFilter(django_filters.FilterSet):
    campaign = django_filters.CharFilter(field_name="campaign__slug")
    status = django_filters.CharFilter(field_name="status")
    trigger = django_filters.CharFilter(field_name="rule__trigger")
    date_from = django_filters.DateFilter(field_name="created_at", lookup_expr="date__gte")
    date_to = django_filters.DateFilter(field_name="created_at", lookup_expr="date__lte")

    class Meta:
        model = Reward
        fields: list[str] = []


class PayoutTableFilter(django_filters.FilterSet):
    """Payout items: one row per reward paid, filtered by their payout's status and date."""

    campaign = django_filters.CharFilter(field_name="reward__campaign__slug")
    status = django_filters.CharFilter(field_name="payout__status")
    trigger = django_filters.CharFilter(field_name="reward__rule__trigger")
    date_from = django_filters.DateFilter(field_name="payout__created_at", lookup_expr="date__gte")
    date_to = django_filters.DateFilter(field_name="payout__created_at", lookup_expr="date__lte")

    class Meta:
        model = PayoutItem
        fields: list[str] = []
