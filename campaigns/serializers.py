"""Partner API shapes for campaigns, rules, trigger events, rewards, balances and webhook endpoints.
Amounts are integer minor units of the named currency (``500`` EUR = €5.00)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from campaigns.models import (
    WEBHOOK_EVENT_TYPES,
    Campaign,
    CampaignMode,
    CampaignStatus,
    PayoutMode,
    Reward,
    RewardRule,
    Trigger,
    TriggerEvent,
    WebhookDelivery,
    WebhookEndpoint,
)
from core.api.reuse import reused

MAX_MINOR = 10**15  # far above any real amount, far below a BIGINT overflow


class CampaignSerializer(serializers.ModelSerializer):
    class Meta:
        model = Campaign
        fields = [
            "id", "name", "slug", "mode", "currency", "timezone", "starts_at", "ends_at", "status",
            "payout_mode", "aggregate_minutes", "min_payout_minor", "created_at",
        ]  # fmt: skip
        read_only_fields = fields


class CampaignCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    slug = serializers.SlugField(max_length=80)
    mode = serializers.ChoiceField(choices=CampaignMode.choices)
    currency = serializers.CharField(min_length=3, max_length=3, required=False, default="")
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    timezone = serializers.CharField(max_length=64, required=False, default="Europe/Amsterdam")
    payout_mode = serializers.ChoiceField(choices=PayoutMode.choices, required=False, default=PayoutMode.INSTANT)
    aggregate_minutes = serializers.IntegerField(min_value=0, max_value=60 * 24 * 31, required=False, default=0)
    min_payout_minor = serializers.IntegerField(min_value=0, max_value=MAX_MINOR, required=False, default=0)


class CampaignStatusSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=[CampaignStatus.ACTIVE, CampaignStatus.PAUSED, CampaignStatus.ENDED, CampaignStatus.CLOSED],
        help_text="`active` launches a draft or resumes a paused campaign.",
    )
    reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class RuleSerializer(serializers.ModelSerializer):
    campaign = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = RewardRule
        fields = "__all__"
        read_only_fields = ["id", "campaign", "created_at", "is_active"]
        validators = []  # the model's full_clean (in rule_create) and its constraints decide

    def get_fields(self):
        fields = super().get_fields()
        fields["allowed_iban_countries"] = serializers.ListField(
            child=serializers.CharField(min_length=2, max_length=2), required=False, max_length=40
        )
        return fields


class RewardBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Reward
        fields = ["id", "status", "amount_minor", "fee_minor", "currency", "matures_at"]


class EventInputSerializer(serializers.Serializer):
    """One trigger event. ``external_id`` is your idempotency key for the event: sending it again
    with the same content returns the first outcome (``replayed: true``)."""

    external_id = serializers.CharField(max_length=200)
    campaign = serializers.SlugField(max_length=80, help_text="The campaign's slug.")
    type = serializers.ChoiceField(choices=Trigger.choices)
    custom_name = serializers.CharField(max_length=60, required=False, allow_blank=True, default="")
    occurred_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    email = serializers.CharField(max_length=254, required=False, allow_blank=True, default="")
    whatsapp = serializers.CharField(max_length=40, required=False, allow_blank=True, default="")
    phone_region = serializers.CharField(max_length=2, required=False, allow_blank=True, default="")
    iban = serializers.CharField(max_length=42, required=False, allow_blank=True, default="")
    social_provider = serializers.CharField(max_length=20, required=False, allow_blank=True, default="")
    social_uid = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    evidence = serializers.DictField(required=False, default=dict)
    ip = serializers.IPAddressField(required=False, allow_blank=True, default="")
    device_fingerprint = serializers.CharField(max_length=128, required=False, allow_blank=True, default="")
    purchase_amount_minor = serializers.IntegerField(
        min_value=1, max_value=MAX_MINOR, required=False, allow_null=True, default=None
    )
    purchase_currency = serializers.CharField(max_length=3, required=False, allow_blank=True, default="")
    order_id = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    code = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    view_count = serializers.IntegerField(
        min_value=0, max_value=MAX_MINOR, required=False, allow_null=True, default=None
    )


class EventSerializer(serializers.ModelSerializer):
    campaign = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    reward = serializers.SerializerMethodField()

    class Meta:
        model = TriggerEvent
        fields = [
            "id", "external_id", "campaign", "type", "custom_name", "occurred_at", "received_at", "source",
            "person", "outcome", "reason", "review_reasons", "purchase_amount_minor", "purchase_currency",
            "order_id", "reward",
        ]  # fmt: skip

    @extend_schema_field(RewardBriefSerializer(allow_null=True))
    def get_reward(self, event):
        try:
            reward = event.reward
        except Reward.DoesNotExist:
            return None
        return reused(RewardBriefSerializer).to_representation(reward)


class EventResultSerializer(serializers.Serializer):
    event = EventSerializer()
    replayed = serializers.BooleanField(help_text="True when this external_id was ingested before.")


class BulkEventsSerializer(serializers.Serializer):
    events = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=1000)


class BulkItemErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    detail = serializers.CharField()
    errors = serializers.ListField(child=serializers.DictField(), required=False)


class BulkItemSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    external_id = serializers.CharField(allow_blank=True)
    outcome = serializers.ChoiceField(choices=["rejected", "review", "held", "rewarded", "error"])
    reason = serializers.CharField(allow_blank=True)
    event_id = serializers.IntegerField(allow_null=True)
    reward_id = serializers.IntegerField(allow_null=True)
    replayed = serializers.BooleanField()
    error = BulkItemErrorSerializer(required=False)


class BulkResultSerializer(serializers.Serializer):
    results = BulkItemSerializer(many=True)


class RewardSerializer(serializers.ModelSerializer):
    campaign = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    event_external_id = serializers.CharField(source="event.external_id", read_only=True)

    class Meta:
        model = Reward
        fields = [
            "id", "campaign", "rule", "event", "event_external_id", "person", "amount_minor", "fee_minor",
            "currency", "status", "occurred_at", "matures_at", "review_reasons", "decided_at",
            "decision_reason", "created_at", "updated_at",
        ]  # fmt: skip


class RewardVoidSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=200)


class FundsSerializer(serializers.Serializer):
    currency = serializers.CharField()
    available_minor = serializers.IntegerField(help_text="Prepaid money not yet allocated to a campaign.")


class CampaignBudgetSerializer(serializers.Serializer):
    campaign_id = serializers.IntegerField()
    slug = serializers.CharField()
    currency = serializers.CharField()
    funded_minor = serializers.IntegerField()
    held_minor = serializers.IntegerField()
    spent_minor = serializers.IntegerField()
    available_minor = serializers.IntegerField()


class BalancesSerializer(serializers.Serializer):
    funds = FundsSerializer(many=True)
    campaigns = CampaignBudgetSerializer(many=True)


class WebhookEndpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookEndpoint
        fields = [
            "id", "url", "description", "event_types", "is_active", "disabled_at", "disabled_reason",
            "rotated_at", "previous_secret_expires_at", "failure_streak", "created_at",
        ]  # fmt: skip


class WebhookEndpointCreateSerializer(serializers.Serializer):
    url = serializers.URLField(max_length=500)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    event_types = serializers.ListField(
        child=serializers.ChoiceField(choices=WEBHOOK_EVENT_TYPES), required=False, default=list,
        help_text="Empty: every event type.",
    )  # fmt: skip


class WebhookEndpointSecretSerializer(WebhookEndpointSerializer):
    secret = serializers.CharField(help_text="Shown once. Verify `JoyBack-Signature` with it.")

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]


class WebhookEndpointEnabledSerializer(WebhookEndpointSerializer):
    requeued_deliveries = serializers.IntegerField(
        help_text="Deliveries of the outage (events younger than 72 hours) sent again now; 0 if it was active."
    )
    expired_deliveries = serializers.IntegerField(
        help_text="Deliveries of the outage older than 72 hours: given up, still in the delivery log."
    )

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "requeued_deliveries", "expired_deliveries"]


class WebhookDeliverySerializer(serializers.ModelSerializer):
    event_id = serializers.CharField(source="event.public_id")
    event_type = serializers.CharField(source="event.type")

    class Meta:
        model = WebhookDelivery
        fields = [
            "id", "event_id", "event_type", "endpoint", "attempt", "status", "response_code", "response_snippet",
            "error", "next_attempt_at", "last_attempt_at", "delivered_at", "created_at",
        ]  # fmt: skip
