"""Partner API: the payouts that carry a brand's rewards (read only)."""

import django_filters
from django.db.models import Prefetch, Q, Sum
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from core.api.filters import FilterSet, IdFilter
from core.api.views import BrandAPIView, BrandListAPIView
from payouts.models import Payout, PayoutItem, PayoutStatus
from payouts.serializers import PayoutSerializer


def brand_payouts(brand):
    """Payouts with at least one reward of ``brand``, annotated with that brand's share."""
    mine = PayoutItem.objects.filter(reward__campaign__brand=brand)
    return (
        Payout.objects.filter(id__in=mine.values("payout_id"))
        .annotate(brand_amount_minor=Sum("items__amount_minor", filter=Q(items__reward__campaign__brand=brand)))
        .prefetch_related(Prefetch("items", queryset=mine.order_by("id"), to_attr="brand_items"))
    )


class PayoutFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=PayoutStatus.choices)
    person = IdFilter(field_name="person_id")

    class Meta:
        model = Payout
        fields = ["status", "person"]


class PayoutListView(BrandListAPIView):
    serializer_class = PayoutSerializer
    filterset_class = PayoutFilter

    def get_queryset(self):
        return brand_payouts(self.brand)

    @extend_schema(operation_id="payouts_list", responses=PayoutSerializer(many=True))
    def get(self, request):
        return self.list_response()


class PayoutDetailView(BrandAPIView):
    serializer_class = PayoutSerializer

    def get_queryset(self):
        return brand_payouts(self.brand)

    @extend_schema(operation_id="payouts_retrieve")
    def get(self, request, pk: int):
        return Response(PayoutSerializer(self.get_object()).data)
