"""Partner API for campaigns, rules, trigger events, rewards, balances and webhook endpoints.

Each view parses, checks scope (``BrandAPIView``), calls one service and renders. Every queryset
starts from the authenticated brand, so another brand's ids answer 404.
"""

import django_filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from campaigns.analytics import campaign_stats, campaign_stats_csv
from campaigns.evaluation import brand_visible_reason
from campaigns.models import (
    Campaign,
    CampaignStatus,
    Reward,
    RewardRule,
    Trigger,
    TriggerEvent,
    WebhookDelivery,
    WebhookEndpoint,
)
from campaigns.selectors import campaigns_with_budget
from campaigns.serializers import (
    BalancesSerializer,
    BulkEventsSerializer,
    BulkResultSerializer,
    CampaignCreateSerializer,
    CampaignSerializer,
    CampaignStatsSerializer,
    CampaignStatusSerializer,
    EventInputSerializer,
    EventResultSerializer,
    EventSerializer,
    OrderRefundResultSerializer,
    OrderRefundSerializer,
    RewardSerializer,
    RewardVoidSerializer,
    RuleSerializer,
    WebhookDeliverySerializer,
    WebhookEndpointCreateSerializer,
    WebhookEndpointEnabledSerializer,
    WebhookEndpointSecretSerializer,
    WebhookEndpointSerializer,
)
from campaigns.services import (
    EventInput,
    campaign_close,
    campaign_create,
    campaign_end,
    campaign_launch,
    campaign_pause,
    campaign_resume,
    event_ingest,
    event_ingest_bulk,
    order_refund,
    reward_approve,
    reward_void,
    rule_create,
)
from campaigns.webhooks import (
    webhook_delivery_redeliver,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_enable,
    webhook_endpoint_rotate_secret,
)
from core.api.errors import _flatten
from core.api.filters import DateTimeFilter, FilterSet, IdFilter
from core.api.reuse import reused
from core.api.schema import IDEMPOTENCY_KEY_REQUIRED
from core.api.views import BrandAPIView, BrandListAPIView
from core.exceptions import InvalidInput
from reconciliation.models import Account

# --- campaigns and rules -------------------------------------------------------------------------


class CampaignFilter(FilterSet):
    status = django_filters.ChoiceFilter(choices=CampaignStatus.choices)
    slug = django_filters.CharFilter()

    class Meta:
        model = Campaign
        fields = ["status", "mode", "slug"]


class CampaignListView(BrandListAPIView):
    serializer_class = CampaignSerializer
    filterset_class = CampaignFilter

    def get_queryset(self):
        return Campaign.objects.filter(brand=self.brand)

    @extend_schema(operation_id="campaigns_list", responses=CampaignSerializer(many=True))
    def get(self, request):
        return self.list_response()

    @extend_schema(
        operation_id="campaigns_create",
        request=CampaignCreateSerializer,
        responses={201: CampaignSerializer},
        summary="Create a draft campaign (with its budget account)",
        examples=[
            OpenApiExample(
                "JoyBack for TikTok logins",
                value={"name": "Summer", "slug": "summer", "mode": "joyback", "starts_at": "2026-06-01T00:00:00Z"},
                request_only=True,
            )
        ],
    )
    def post(self, request):
        form = CampaignCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        campaign = campaign_create(brand=self.brand, **form.validated_data)
        return Response(CampaignSerializer(campaign).data, status=status.HTTP_201_CREATED)


class CampaignDetailView(BrandAPIView):
    serializer_class = CampaignSerializer

    def get_queryset(self):
        return Campaign.objects.filter(brand=self.brand)

    @extend_schema(operation_id="campaigns_retrieve")
    def get(self, request, pk: int):
        return Response(CampaignSerializer(self.get_object()).data)


class CampaignStatusView(BrandAPIView):
    serializer_class = CampaignStatusSerializer

    def get_queryset(self):
        return Campaign.objects.filter(brand=self.brand)

    @extend_schema(
        operation_id="campaigns_status",
        request=CampaignStatusSerializer,
        responses=CampaignSerializer,
        summary="Change the status: launch / resume (active), pause, end, close",
    )
    def post(self, request, pk: int):
        campaign = self.get_object()
        form = CampaignStatusSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        target, actor = form.validated_data["status"], request.user.actor
        if target == CampaignStatus.ACTIVE:
            if campaign.status == CampaignStatus.PAUSED:
                campaign = campaign_resume(campaign=campaign, actor=actor)
            else:
                campaign = campaign_launch(campaign=campaign, actor=actor)
        elif target == CampaignStatus.PAUSED:
            campaign = campaign_pause(campaign=campaign, actor=actor, reason=form.validated_data["reason"] or "api")
        elif target == CampaignStatus.ENDED:
            campaign = campaign_end(campaign=campaign, actor=actor)
        else:
            campaign = campaign_close(campaign=campaign, actor=actor)
        campaign.refresh_from_db()
        return Response(CampaignSerializer(campaign).data)


class RuleListView(BrandListAPIView):
    serializer_class = RuleSerializer

    def get_campaign(self) -> Campaign:
        return self.brand_object(Campaign.objects.filter(brand=self.brand), self.kwargs["pk"])

    def get_queryset(self):
        return RewardRule.objects.filter(campaign__brand=self.brand, campaign_id=self.kwargs.get("pk")).select_related(
            "campaign"
        )

    @extend_schema(operation_id="rules_list", responses=RuleSerializer(many=True))
    def get(self, request, pk: int):
        self.get_campaign()
        return self.list_response()

    @extend_schema(operation_id="rules_create", request=RuleSerializer, responses={201: RuleSerializer})
    def post(self, request, pk: int):
        campaign = self.get_campaign()
        form = RuleSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        rule = rule_create(campaign=campaign, **form.validated_data)
        return Response(RuleSerializer(rule).data, status=status.HTTP_201_CREATED)


class RuleDetailView(BrandAPIView):
    serializer_class = RuleSerializer

    def get_queryset(self):
        return RewardRule.objects.filter(campaign__brand=self.brand).select_related("campaign")

    @extend_schema(operation_id="rules_retrieve")
    def get(self, request, pk: int):
        return Response(RuleSerializer(self.get_object()).data)


# --- trigger events ------------------------------------------------------------------------------


def _event_input(data: dict) -> EventInput:
    return EventInput(**{**data, "evidence": data.get("evidence") or {}, "source": "api"})


class EventFilter(FilterSet):
    campaign = django_filters.CharFilter(field_name="campaign__slug")
    type = django_filters.ChoiceFilter(choices=Trigger.choices)
    received_after = DateTimeFilter(field_name="received_at", lookup_expr="gte")
    received_before = DateTimeFilter(field_name="received_at", lookup_expr="lt")

    class Meta:
        model = TriggerEvent
        fields = ["campaign", "outcome", "type", "external_id", "received_after", "received_before"]


_EVENT_EXAMPLE = OpenApiExample(
    "A confirmed purchase",
    value={
        "external_id": "order-10045",
        "campaign": "summer",
        "type": "purchase",
        "email": "giulia@example.com",
        "iban": "IT60X0542811101000000123456",
        "purchase_amount_minor": 4999,
        "purchase_currency": "EUR",
        "order_id": "10045",
    },
    request_only=True,
)


class EventListView(BrandListAPIView):
    serializer_class = EventSerializer
    filterset_class = EventFilter
    required_scopes = {"POST": "events"}

    def get_queryset(self):
        return TriggerEvent.objects.filter(brand=self.brand).select_related("campaign", "reward")

    @extend_schema(operation_id="events_list", responses=EventSerializer(many=True))
    def get(self, request):
        return self.list_response()

    @extend_schema(
        operation_id="events_create",
        request=EventInputSerializer,
        responses={201: EventResultSerializer, 200: EventResultSerializer},
        examples=[_EVENT_EXAMPLE],
        summary="Send one trigger event (201 when new, 200 when the external_id was seen before)",
    )
    def post(self, request):
        # Kept serializers (core.api.reuse): the same validation and output as new ones, without
        # rebuilding their fields on every request. Raises ValidationError as is_valid() would.
        data = reused(EventInputSerializer).run_validation(request.data)
        result = event_ingest(brand=self.brand, payload=_event_input(data))
        event = result.event  # with its campaign and reward, as stored: nothing to read again
        return Response(
            {"event": reused(EventSerializer).to_representation(event), "replayed": result.replayed},
            status=status.HTTP_200_OK if result.replayed else status.HTTP_201_CREATED,
        )


class EventBulkView(BrandAPIView):
    serializer_class = BulkEventsSerializer
    required_scopes = {"POST": "events"}

    @extend_schema(
        operation_id="events_bulk",
        request=BulkEventsSerializer,
        responses=BulkResultSerializer,
        summary="Send up to 1,000 events; one result per event, in order",
    )
    def post(self, request):
        form = BulkEventsSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        raw = form.validated_data["events"]
        results: list[dict | None] = [None] * len(raw)
        valid: list[tuple[int, EventInput]] = []
        # One serializer for every item, as DRF's ListSerializer does with its child: a new one
        # per item deep-copies its declared fields each time (over half the call's CPU).
        checker = reused(EventInputSerializer)
        for index, item in enumerate(raw):
            try:
                data = checker.run_validation(item)
            except ValidationError as exc:  # exc.detail: the field errors, as is_valid() keeps them
                results[index] = _bulk_error(
                    index, item, "validation_error", "The event has invalid fields.", exc.detail
                )
            else:
                valid.append((index, _event_input(data)))
        outcomes = event_ingest_bulk(brand=self.brand, payloads=[payload for _, payload in valid])
        for (index, payload), outcome in zip(valid, outcomes, strict=True):
            if outcome.error is not None:
                results[index] = _bulk_error(
                    index, {"external_id": payload.external_id}, outcome.error.code, outcome.error.message
                )
                continue
            results[index] = {
                "index": index,
                "external_id": payload.external_id,
                "outcome": outcome.outcome,
                "reason": brand_visible_reason(outcome.reason),
                "event_id": outcome.event.pk if outcome.event else None,
                "reward_id": outcome.reward.pk if outcome.reward else None,
                "replayed": outcome.replayed,
            }
        return Response(BulkResultSerializer({"results": results}).data)


def _bulk_error(index: int, item, code: str, detail: str, field_errors=None) -> dict:
    external_id = item.get("external_id") if isinstance(item, dict) else ""
    error = {"code": code, "detail": detail}
    if field_errors:
        error["errors"] = _flatten(field_errors)
    return {
        "index": index,
        "external_id": external_id if isinstance(external_id, str) else "",
        "outcome": "error",
        "reason": code,
        "event_id": None,
        "reward_id": None,
        "replayed": False,
        "error": error,
    }


class EventDetailView(BrandAPIView):
    serializer_class = EventSerializer

    def get_queryset(self):
        return TriggerEvent.objects.filter(brand=self.brand).select_related("campaign", "reward")

    @extend_schema(operation_id="events_retrieve")
    def get(self, request, pk: int):
        return Response(EventSerializer(self.get_object()).data)


# --- rewards -------------------------------------------------------------------------------------


class RewardFilter(FilterSet):
    campaign = django_filters.CharFilter(field_name="campaign__slug")
    person = IdFilter(field_name="person_id")

    class Meta:
        model = Reward
        fields = ["status", "campaign", "person"]


def _rewards(brand):
    return Reward.objects.filter(campaign__brand=brand).select_related("campaign", "event")


class RewardListView(BrandListAPIView):
    serializer_class = RewardSerializer
    filterset_class = RewardFilter

    def get_queryset(self):
        return _rewards(self.brand)

    @extend_schema(operation_id="rewards_list", responses=RewardSerializer(many=True))
    def get(self, request):
        return self.list_response()


class RewardDetailView(BrandAPIView):
    serializer_class = RewardSerializer

    def get_queryset(self):
        return _rewards(self.brand)

    @extend_schema(operation_id="rewards_retrieve")
    def get(self, request, pk: int):
        return Response(RewardSerializer(self.get_object()).data)


class RewardApproveView(BrandAPIView):
    serializer_class = RewardSerializer

    def get_queryset(self):
        return _rewards(self.brand)

    @extend_schema(
        operation_id="rewards_approve", request=None, responses=RewardSerializer, summary="Approve a reward in review"
    )
    def post(self, request, pk: int):
        reward = reward_approve(reward=self.get_object(), actor=request.user.actor)
        return Response(RewardSerializer(_rewards(self.brand).get(pk=reward.pk)).data)


class RewardVoidView(BrandAPIView):
    serializer_class = RewardVoidSerializer

    def get_queryset(self):
        return _rewards(self.brand)

    @extend_schema(
        operation_id="rewards_void",
        request=RewardVoidSerializer,
        responses=RewardSerializer,
        summary="Void a reward in review or held (a refund, an undone action)",
    )
    def post(self, request, pk: int):
        reward = self.get_object()
        form = RewardVoidSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        reward = reward_void(reward=reward, actor=request.user.actor, reason=form.validated_data["reason"])
        return Response(RewardSerializer(_rewards(self.brand).get(pk=reward.pk)).data)


class OrderRefundView(BrandAPIView):
    serializer_class = OrderRefundSerializer

    @extend_schema(
        operation_id="orders_refund",
        request=OrderRefundSerializer,
        responses=OrderRefundResultSerializer,
        summary="Refund an order: void, reduce or claw back what its purchase earned",
        description="Full (no `amount_minor`) or partial. A reward still in review or held is voided, or "
        "reduced by the refunded share of the purchase; a payable one is clawed back (in full only); money "
        "already paid is not recovered. Send an `Idempotency-Key`: the same key never refunds twice.",
        examples=[OpenApiExample("A partial refund", value={"amount_minor": 2500}, request_only=True)],
        parameters=[IDEMPOTENCY_KEY_REQUIRED],
    )
    def post(self, request, order_id: str):
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            raise InvalidInput("A refund needs an Idempotency-Key header.", code="idempotency_key_required")
        form = OrderRefundSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        result = order_refund(
            brand=self.brand, order_id=order_id, key=key, actor=request.user.actor, **form.validated_data
        )
        return Response(OrderRefundResultSerializer(result).data)


# --- balances ------------------------------------------------------------------------------------


class BalancesView(BrandAPIView):
    serializer_class = BalancesSerializer

    @extend_schema(operation_id="balances_retrieve", summary="Unallocated funds and every campaign's budget")
    def get(self, request):
        brand = self.brand
        funds = Account.objects.filter(
            owner_type="brand", owner_id=str(brand.pk), code__startswith=f"brand:{brand.pk}:funds:"
        ).order_by("currency")
        campaigns = campaigns_with_budget().filter(brand=brand).order_by("id")
        return Response(
            BalancesSerializer(
                {
                    "funds": [
                        {"currency": a.currency, "available_minor": a.posted_minor - a.held_minor} for a in funds
                    ],
                    "campaigns": [
                        {
                            "campaign_id": c.pk,
                            "slug": c.slug,
                            "currency": c.currency,
                            "funded_minor": c.funded_minor or 0,
                            "held_minor": c.held_minor or 0,
                            "spent_minor": c.spent_minor or 0,
                            "available_minor": c.available_minor or 0,
                        }
                        for c in campaigns
                    ],
                }
            ).data
        )


# --- what the money bought ----------------------------------------------------------------------


class CsvRenderer(BaseRenderer):
    """Text the view already wrote as CSV (``?format=csv`` or ``stats.csv``)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data.encode(self.charset) if isinstance(data, str) else JSONRenderer().render(data)


def _money(value) -> dict | None:
    return None if value is None else {"amount": str(value.amount), "currency": value.currency.code}


def stats_payload(stats) -> dict:
    """The JSON shape of ``campaigns.analytics.CampaignStats``."""
    return {
        "campaign_id": stats.campaign.pk,
        "currency": stats.currency,
        "as_of": stats.as_of,
        "funnel": stats.funnel,
        "spent_minor": stats.spent_minor,
        "reserved_minor": stats.reserved_minor,
        "total_views": stats.total_views,
        "cost_per_action": _money(stats.cost_per_action),
        "cost_per_view": _money(stats.cost_per_view),
        "cost_per_mille": _money(stats.cost_per_mille),
        "by_trigger": [{**t.__dict__, "cost_per_action": _money(t.cost_per_action)} for t in stats.by_trigger],
        "videos_total": stats.videos_total,
        "videos_live": stats.videos_live,
        "videos": stats.videos,
        "days": [
            {
                "day": day,
                "visits": visits,
                "started": started,
                "verified": verified,
                "spent_minor": spent,
                "views": views,
            }
            for day, visits, started, verified, spent, views in stats.daily()
        ],
    }


class CampaignStatsView(BrandAPIView):
    """What the campaign's money bought, from daily figures kept by a background roll-up."""

    serializer_class = CampaignStatsSerializer
    renderer_classes = [JSONRenderer, CsvRenderer]

    def get_queryset(self):
        return Campaign.objects.filter(brand=self.brand).select_related("brand")

    @extend_schema(
        operation_id="campaigns_stats",
        summary="Reach and UGC analytics: funnel, cost per action / view / thousand views, videos, daily series",
        description=(
            "Figures trail the events by a few minutes (`as_of`). The author handle of a video is shown "
            "only where the person gave the brand marketing consent. `?format=csv` (or `stats.csv`) "
            "answers one line per day of the campaign instead."
        ),
        parameters=[
            OpenApiParameter(
                "format", OpenApiTypes.STR, enum=["json", "csv"], required=False, description="`csv`: one line per day."
            )
        ],
        responses={
            (200, "application/json"): CampaignStatsSerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="One line per day."),
        },
    )
    def get(self, request, pk: int, format=None):
        campaign = self.get_object()
        if request.accepted_renderer.format == "csv":
            response = Response(campaign_stats_csv(campaign=campaign), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-stats.csv"'
            return response
        return Response(CampaignStatsSerializer(stats_payload(campaign_stats(campaign=campaign))).data)


class CampaignStatsCsvView(CampaignStatsView):
    """``stats.csv``: the CSV variant at an address of its own (a spreadsheet's "from web")."""

    renderer_classes = [CsvRenderer]

    @extend_schema(
        operation_id="campaigns_stats_csv",
        summary="The campaign's daily figures as CSV, one line per day",
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="One line per day.")},
    )
    def get(self, request, pk: int, format=None):
        return super().get(request, pk, format)


# --- webhook endpoints ---------------------------------------------------------------------------


def _endpoints(brand):
    return WebhookEndpoint.objects.filter(brand=brand, deleted_at__isnull=True)


class WebhookEndpointListView(BrandListAPIView):
    serializer_class = WebhookEndpointSerializer
    replay_redacted_fields = ("secret",)

    def get_queryset(self):
        return _endpoints(self.brand)

    @extend_schema(operation_id="webhook_endpoints_list", responses=WebhookEndpointSerializer(many=True))
    def get(self, request):
        return self.list_response()

    @extend_schema(
        operation_id="webhook_endpoints_create",
        request=WebhookEndpointCreateSerializer,
        responses={201: WebhookEndpointSecretSerializer},
        summary="Register an endpoint; the signing secret is in the answer, once",
    )
    def post(self, request):
        form = WebhookEndpointCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        created = webhook_endpoint_create(brand=self.brand, **form.validated_data)
        data = {**WebhookEndpointSerializer(created.endpoint).data, "secret": created.secret}
        return Response(data, status=status.HTTP_201_CREATED)


class WebhookEndpointDetailView(BrandAPIView):
    serializer_class = WebhookEndpointSerializer

    def get_queryset(self):
        return _endpoints(self.brand)

    @extend_schema(operation_id="webhook_endpoints_retrieve")
    def get(self, request, pk: int):
        return Response(WebhookEndpointSerializer(self.get_object()).data)

    @extend_schema(operation_id="webhook_endpoints_delete", responses={204: None})
    def delete(self, request, pk: int):
        webhook_endpoint_delete(endpoint=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookEndpointRotateView(BrandAPIView):
    serializer_class = WebhookEndpointSecretSerializer
    replay_redacted_fields = ("secret",)

    def get_queryset(self):
        return _endpoints(self.brand)

    @extend_schema(
        operation_id="webhook_endpoints_rotate_secret",
        request=None,
        responses=WebhookEndpointSecretSerializer,
        summary="New secret now; the old one still signs (a second v1) for 24 hours",
    )
    def post(self, request, pk: int):
        rotated = webhook_endpoint_rotate_secret(endpoint=self.get_object())
        return Response({**WebhookEndpointSerializer(rotated.endpoint).data, "secret": rotated.secret})


class WebhookEndpointEnableView(BrandAPIView):
    serializer_class = WebhookEndpointEnabledSerializer

    def get_queryset(self):
        return _endpoints(self.brand)

    @extend_schema(
        operation_id="webhook_endpoints_enable",
        request=None,
        responses=WebhookEndpointEnabledSerializer,
        summary="Enable again an endpoint disabled for failing; the last 72 hours' deliveries are sent again",
    )
    def post(self, request, pk: int):
        enabled = webhook_endpoint_enable(endpoint=self.get_object(), channel="api", actor=request.user.actor)
        return Response(
            {
                **WebhookEndpointSerializer(enabled.endpoint).data,
                "requeued_deliveries": enabled.requeued,
                "expired_deliveries": enabled.expired,
            }
        )


class WebhookDeliveryListView(BrandListAPIView):
    serializer_class = WebhookDeliverySerializer

    def get_queryset(self):
        return WebhookDelivery.objects.filter(
            endpoint__brand=self.brand, endpoint_id=self.kwargs.get("pk")
        ).select_related("event")

    @extend_schema(
        operation_id="webhook_deliveries_list",
        responses=WebhookDeliverySerializer(many=True),
        summary="The delivery log of an endpoint",
    )
    def get(self, request, pk: int):
        self.brand_object(_endpoints(self.brand), pk)
        return self.list_response()


class WebhookRedeliverView(BrandAPIView):
    serializer_class = WebhookDeliverySerializer

    def get_queryset(self):
        return WebhookDelivery.objects.filter(endpoint__brand=self.brand).select_related("event")

    @extend_schema(operation_id="webhook_deliveries_redeliver", request=None, responses=WebhookDeliverySerializer)
    def post(self, request, pk: int):
        delivery = webhook_delivery_redeliver(delivery=self.get_object())
        return Response(WebhookDeliverySerializer(self.get_queryset().get(pk=delivery.pk)).data)
