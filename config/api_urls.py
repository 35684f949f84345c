"""The partner API (/api/v1/), its OpenAPI schema (/api/schema/) and docs (/api/docs/), and the
inbound webhooks (/api/webhooks/<provider>/)."""

from django.http import JsonResponse
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularSwaggerView

from campaigns import api as campaigns_api
from core.api.schema import SchemaView
from core.webhooks_in import InboundWebhookView
from payouts import api as payouts_api
from recipients import api as recipients_api
from reconciliation import api as reconciliation_api


@csrf_exempt
def api_not_found(request, *args, **kwargs):
    """Unknown API paths (and ids that are not numbers) answer in the API's error format, whatever
    the method."""
    return JsonResponse(
        {
            "type": "urn:joyback:problem:not_found",
            "title": "Not found",
            "status": 404,
            "detail": "Not found.",
            "code": "not_found",
        },  # fmt: skip
        status=404,
        content_type="application/problem+json",
    )


v1 = [
    path("campaigns/", campaigns_api.CampaignListView.as_view(), name="campaign-list"),
    path("campaigns/<int:pk>/", campaigns_api.CampaignDetailView.as_view(), name="campaign-detail"),
    path("campaigns/<int:pk>/status/", campaigns_api.CampaignStatusView.as_view(), name="campaign-status"),
    path("campaigns/<int:pk>/stats/", campaigns_api.CampaignStatsView.as_view(), name="campaign-stats"),
    path(
        "campaigns/<int:pk>/stats.csv",
        campaigns_api.CampaignStatsCsvView.as_view(),
        {"format": "csv"},
        name="campaign-stats-csv",
    ),
    path("campaigns/<int:pk>/rules/", campaigns_api.RuleListView.as_view(), name="campaign-rules"),
    path("rules/<int:pk>/", campaigns_api.RuleDetailView.as_view(), name="rule-detail"),
    path("events/", campaigns_api.EventListView.as_view(), name="event-list"),
    path("events/bulk/", campaigns_api.EventBulkView.as_view(), name="event-bulk"),
    path("staff/statements/", reconciliation_api.StatementImportView.as_view(), name="staff-statement-import"),
    path("events/<int:pk>/", campaigns_api.EventDetailView.as_view(), name="event-detail"),
    path("people/", recipients_api.PersonCreateView.as_view(), name="person-create"),
    path("people/<int:pk>/", recipients_api.PersonDetailView.as_view(), name="person-detail"),
    path("contacts/", recipients_api.ContactListView.as_view(), name="contact-list"),
    path("rewards/", campaigns_api.RewardListView.as_view(), name="reward-list"),
    path("rewards/<int:pk>/", campaigns_api.RewardDetailView.as_view(), name="reward-detail"),
    path("rewards/<int:pk>/approve/", campaigns_api.RewardApproveView.as_view(), name="reward-approve"),
    path("rewards/<int:pk>/void/", campaigns_api.RewardVoidView.as_view(), name="reward-void"),
    path("orders/<str:order_id>/refund/", campaigns_api.OrderRefundView.as_view(), name="order-refund"),
    path("payouts/", payouts_api.PayoutListView.as_view(), name="payout-list"),
    path("payouts/<int:pk>/", payouts_api.PayoutDetailView.as_view(), name="payout-detail"),
    path("balances/", campaigns_api.BalancesView.as_view(), name="balances"),
    path("webhook-endpoints/", campaigns_api.WebhookEndpointListView.as_view(), name="webhook-endpoint-list"),
    path(
        "webhook-endpoints/<int:pk>/", campaigns_api.WebhookEndpointDetailView.as_view(), name="webhook-endpoint-detail"
    ),
    path(
        "webhook-endpoints/<int:pk>/rotate-secret/",
        campaigns_api.WebhookEndpointRotateView.as_view(),
        name="webhook-endpoint-rotate",
    ),
    path(
        "webhook-endpoints/<int:pk>/enable/",
        campaigns_api.WebhookEndpointEnableView.as_view(),
        name="webhook-endpoint-enable",
    ),
    path(
        "webhook-endpoints/<int:pk>/deliveries/",
        campaigns_api.WebhookDeliveryListView.as_view(),
        name="webhook-endpoint-deliveries",
    ),
    path(
        "webhook-deliveries/<int:pk>/redeliver/",
        campaigns_api.WebhookRedeliverView.as_view(),
        name="webhook-delivery-redeliver",
    ),
]

urlpatterns = [
    path("schema/", SchemaView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("webhooks/<slug:provider>/", InboundWebhookView.as_view(), name="webhook-in"),
    path("v1/", include(v1)),
    # Last: any other path under /api/. Not ".*": "." stops at a newline, so an id of "1%0a"
    # matched neither <int:pk> nor the catch-all and got Django's HTML 404 page.
    re_path(r"^[\s\S]*$", api_not_found),
]
