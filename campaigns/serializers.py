"""Partner API shapes for campaigns, rules, trigger events, rewards, balances and webhook endpoints.
Amounts are integer minor units of the named currency (``500`` EUR = €5.00)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from campaigns.evaluation import brand_visible_reason, brand_visible_reasons
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
from campaigns.models.campaigns import CLAIM_WINDOW_DAYS
from core.api import fields
from core.api.reuse import reused

MAX_MINOR = 10**15  # far above any real amount, far below a BIGINT overflow


class CampaignSerializer(fields.ModelSerializer):
    class Meta:
        model = Campaign
        fields = [
            "id", "name", "slug", "mode", "currency", "timezone", "starts_at", "ends_at", "status",
            "payout_mode", "aggregate_minutes", "min_payout_minor", "claim_window_days", "buyer_claim_links",
            "vop_no_match", "vop_close_match", "vop_not_possible", "undo_void_content_removed",
            "undo_void_views_dropped", "undo_void_authorization_revoked", "undo_void_optin_withdrawn", "created_at",
        ]  # fmt: skip
        read_only_fields = fields


class CampaignCreateSerializer(serializers.Serializer):
    name = fields.CharField(max_length=200)
    slug = fields.SlugField(max_length=80)
    mode = fields.ChoiceField(choices=CampaignMode.choices)
    currency = fields.CharField(min_length=3, max_length=3, required=False, default="")
    starts_at = fields.DateTimeField()
    ends_at = fields.DateTimeField(required=False, allow_null=True, default=None)
    timezone = fields.CharField(max_length=64, required=False, default="Europe/Amsterdam")
    payout_mode = fields.ChoiceField(choices=PayoutMode.choices, required=False, default=PayoutMode.INSTANT)
    aggregate_minutes = fields.IntegerField(min_value=0, max_value=60 * 24 * 31, required=False, default=0)
    min_payout_minor = fields.IntegerField(min_value=0, max_value=MAX_MINOR, required=False, default=0)
    claim_window_days = fields.IntegerField(
        min_value=CLAIM_WINDOW_DAYS[0],
        max_value=CLAIM_WINDOW_DAYS[1],
        required=False,
        allow_null=True,
        default=None,
        help_text="Days a person has to give a bank account once a reward is owed to them; reminded after a "
        "third and two thirds, then the money goes back to the campaign (`reward.expired`). Null: never.",
    )
    buyer_claim_links = fields.BooleanField(
        required=False,
        default=False,
        help_text="API-only plans (the Cashback API alone): e-mail buyers you sent without a bank account a "
        "link to give one. Other plans have claim pages anyway.",
    )
    # What counts as an action undone during its hold (each voids the reward; all on by default).
    undo_void_content_removed = fields.BooleanField(
        required=False,
        default=True,
        help_text="Void a reward whose video is deleted or made private before it matures.",
    )
    undo_void_views_dropped = fields.BooleanField(
        required=False, default=True, help_text="Void a reward whose video's views fall below the rule's threshold."
    )
    undo_void_authorization_revoked = fields.BooleanField(
        required=False, default=True, help_text="Void pending TikTok rewards when the person removes our access."
    )
    undo_void_optin_withdrawn = fields.BooleanField(
        required=False, default=True, help_text="Void a pending WhatsApp opt-in reward when the person sends STOP."
    )


class CampaignStatusSerializer(serializers.Serializer):
    status = fields.ChoiceField(
        choices=[CampaignStatus.ACTIVE, CampaignStatus.PAUSED, CampaignStatus.ENDED, CampaignStatus.CLOSED],
        help_text="`active` launches a draft or resumes a paused campaign.",
    )
    reason = fields.CharField(max_length=200, required=False, allow_blank=True, default="")


class RuleSerializer(fields.ModelSerializer):
    campaign = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = RewardRule
        fields = "__all__"
        read_only_fields = ["id", "campaign", "created_at", "is_active"]
        validators = []  # the model's full_clean (in rule_create) and its constraints decide

    def get_fields(self):
        declared = super().get_fields()
        declared["allowed_iban_countries"] = serializers.ListField(
            child=fields.CharField(min_length=2, max_length=2), required=False, max_length=40
        )
        return declared


class RewardBriefSerializer(fields.ModelSerializer):
    class Meta:
        model = Reward
        fields = ["id", "status", "amount_minor", "fee_minor", "currency", "matures_at"]


class EventInputSerializer(serializers.Serializer):
    """One trigger event. ``external_id`` is your idempotency key for the event: sending it again
    with the same content returns the first outcome (``replayed: true``)."""

    external_id = fields.CharField(max_length=200)
    campaign = fields.SlugField(max_length=80, help_text="The campaign's slug.")
    type = fields.ChoiceField(choices=Trigger.choices)
    custom_name = fields.CharField(max_length=60, required=False, allow_blank=True, default="")
    occurred_at = fields.DateTimeField(required=False, allow_null=True, default=None)
    name = fields.CharField(max_length=200, required=False, allow_blank=True, default="")
    email = fields.CharField(max_length=254, required=False, allow_blank=True, default="")
    whatsapp = fields.CharField(max_length=40, required=False, allow_blank=True, default="")
    phone_region = fields.CharField(max_length=2, required=False, allow_blank=True, default="")
    iban = fields.CharField(max_length=42, required=False, allow_blank=True, default="")
    social_provider = fields.CharField(max_length=20, required=False, allow_blank=True, default="")
    social_uid = fields.CharField(max_length=200, required=False, allow_blank=True, default="")
    evidence = fields.JSONObjectField(required=False, default=dict)
    ip = fields.IPAddressField(required=False, allow_blank=True, default="")
    device_fingerprint = fields.CharField(max_length=128, required=False, allow_blank=True, default="")
    purchase_amount_minor = fields.IntegerField(
        min_value=1, max_value=MAX_MINOR, required=False, allow_null=True, default=None
    )
    purchase_currency = fields.CharField(max_length=3, required=False, allow_blank=True, default="")
    order_id = fields.CharField(max_length=120, required=False, allow_blank=True, default="")
    code = fields.CharField(max_length=120, required=False, allow_blank=True, default="")
    view_count = fields.IntegerField(min_value=0, max_value=MAX_MINOR, required=False, allow_null=True, default=None)


class EventSerializer(fields.ModelSerializer):
    campaign = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    reward = serializers.SerializerMethodField()

    class Meta:
        model = TriggerEvent
        fields = [
            "id", "external_id", "campaign", "type", "custom_name", "occurred_at", "received_at", "source",
            "person", "outcome", "reason", "review_reasons", "purchase_amount_minor", "purchase_currency",
            "order_id", "reward",
        ]  # fmt: skip

    def to_representation(self, instance):
        # What ops read in full (the admin), a brand reads as ``brand_visible_reasons`` says.
        data = super().to_representation(instance)
        data["reason"] = brand_visible_reason(data["reason"])
        data["review_reasons"] = brand_visible_reasons(data["review_reasons"])
        return data

    @extend_schema_field(RewardBriefSerializer(allow_null=True))
    def get_reward(self, event):
        try:
            reward = event.reward
        except Reward.DoesNotExist:
            return None
        return reused(RewardBriefSerializer).to_representation(reward)


class EventResultSerializer(serializers.Serializer):
    event = EventSerializer()
    replayed = fields.BooleanField(help_text="True when this external_id was ingested before.")


class BulkEventsSerializer(serializers.Serializer):
    events = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=1000)


class BulkItemErrorSerializer(serializers.Serializer):
    code = fields.CharField()
    detail = fields.CharField()
    errors = serializers.ListField(child=serializers.DictField(), required=False)


class BulkItemSerializer(serializers.Serializer):
    index = fields.IntegerField()
    external_id = fields.CharField(allow_blank=True)
    outcome = fields.ChoiceField(choices=["rejected", "review", "held", "rewarded", "error"])
    reason = fields.CharField(allow_blank=True)
    event_id = fields.IntegerField(allow_null=True)
    reward_id = fields.IntegerField(allow_null=True)
    replayed = fields.BooleanField()
    error = BulkItemErrorSerializer(required=False)


class BulkResultSerializer(serializers.Serializer):
    results = BulkItemSerializer(many=True)


class RewardSerializer(fields.ModelSerializer):
    campaign = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    event_external_id = fields.CharField(source="event.external_id", read_only=True)

    class Meta:
        model = Reward
        fields = [
            "id", "campaign", "rule", "event", "event_external_id", "person", "amount_minor", "fee_minor",
            "currency", "status", "occurred_at", "matures_at", "review_reasons", "decided_at",
            "decision_reason", "undone_reason", "created_at", "updated_at",
        ]  # fmt: skip

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["review_reasons"] = brand_visible_reasons(data["review_reasons"])
        return data


class RewardVoidSerializer(serializers.Serializer):
    reason = fields.CharField(max_length=200)


class OrderRefundSerializer(serializers.Serializer):
    amount_minor = fields.IntegerField(
        min_value=1,
        max_value=MAX_MINOR,
        required=False,
        allow_null=True,
        default=None,
        help_text="The refunded part of the purchase, minor units; omit it for a full refund.",
    )
    reason = fields.CharField(max_length=200, required=False, allow_blank=True, default="")


class RewardRefundSerializer(serializers.Serializer):
    reward = RewardBriefSerializer()
    outcome = fields.ChoiceField(
        choices=["voided", "clawed_back", "reduced", "unchanged", "paid", "payable_partial", "in_payout"],
        help_text="What the refund did to this reward: `paid` (already sent, not recovered), `payable_partial` "
        "(a payable reward is clawed back only in full), `in_payout` (its payout is running: send the refund "
        "again when it ends).",
    )


class OrderRefundResultSerializer(serializers.Serializer):
    order_id = fields.CharField()
    purchase_amount_minor = fields.IntegerField()
    refunded_minor = fields.IntegerField(help_text="This order's refunds so far, this one included.")
    rewards = RewardRefundSerializer(many=True)


class FundsSerializer(serializers.Serializer):
    currency = fields.CharField()
    available_minor = fields.IntegerField(help_text="Prepaid money not yet allocated to a campaign.")


class CampaignBudgetSerializer(serializers.Serializer):
    campaign_id = fields.IntegerField()
    slug = fields.CharField()
    currency = fields.CharField()
    funded_minor = fields.IntegerField()
    held_minor = fields.IntegerField()
    spent_minor = fields.IntegerField()
    available_minor = fields.IntegerField()


class BalancesSerializer(serializers.Serializer):
    funds = FundsSerializer(many=True)
    campaigns = CampaignBudgetSerializer(many=True)


class WebhookEndpointSerializer(fields.ModelSerializer):
    class Meta:
        model = WebhookEndpoint
        fields = [
            "id", "url", "description", "event_types", "is_active", "disabled_at", "disabled_reason",
            "rotated_at", "previous_secret_expires_at", "failure_streak", "created_at",
        ]  # fmt: skip


class WebhookEndpointCreateSerializer(serializers.Serializer):
    url = fields.URLField(max_length=500)
    description = fields.CharField(max_length=200, required=False, allow_blank=True, default="")
    event_types = serializers.ListField(
        child=fields.ChoiceField(choices=WEBHOOK_EVENT_TYPES), required=False, default=list,
        help_text="Empty: every event type.",
    )  # fmt: skip


class WebhookEndpointSecretSerializer(WebhookEndpointSerializer):
    secret = fields.CharField(
        allow_null=True,
        help_text="Shown once. Verify `JoyBack-Signature` with it. `null` in an Idempotency-Key replay.",
    )

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]


class WebhookEndpointEnabledSerializer(WebhookEndpointSerializer):
    requeued_deliveries = fields.IntegerField(
        help_text="Deliveries of the outage (events younger than 72 hours) sent again now; 0 if it was active."
    )
    expired_deliveries = fields.IntegerField(
        help_text="Deliveries of the outage older than 72 hours: given up, still in the delivery log."
    )

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "requeued_deliveries", "expired_deliveries"]


class WebhookDeliverySerializer(fields.ModelSerializer):
    event_id = fields.CharField(source="event.public_id")
    event_type = fields.CharField(source="event.type")

    class Meta:
        model = WebhookDelivery
        fields = [
            "id", "event_id", "event_type", "endpoint", "attempt", "status", "response_code", "response_snippet",
            "error", "next_attempt_at", "last_attempt_at", "delivered_at", "created_at",
        ]  # fmt: skip


# --- what the money bought (issue 29) ------------------------------------------------------------


class MoneySerializer(serializers.Serializer):
    """An exact amount in major units as a decimal string (``"0.004371"``), never a float."""

    amount = fields.CharField(help_text='Major units, exact ("5.10", a cost per view "0.004371").')
    currency = fields.CharField()


class StatsFunnelSerializer(serializers.Serializer):
    visits = fields.IntegerField(help_text="Claim page views (a daily counter: no cookie, nobody identified).")
    started = fields.IntegerField(help_text="Actions started: trigger events received, accepted or not.")
    verified = fields.IntegerField(help_text="Rewards past verification and hold: payable, paid or expired.")
    paid = fields.IntegerField(help_text="Rewards paid out.")


class StatsTriggerSerializer(serializers.Serializer):
    trigger = fields.CharField()
    label = fields.CharField()
    started = fields.IntegerField()
    accepted = fields.IntegerField(help_text="Events that earned a reward, whatever became of it.")
    verified = fields.IntegerField()
    paid = fields.IntegerField()
    undone = fields.IntegerField(help_text="Rewards voided or clawed back.")
    spent_minor = fields.IntegerField(
        help_text="Rewards and fees the budget paid (payable or paid); the fee alone of expired rewards."
    )
    reserved_minor = fields.IntegerField(help_text="Still reserved for rewards in review or held.")
    cost_per_action = MoneySerializer(allow_null=True, help_text="Spent per verified action.")


class StatsVideoSerializer(serializers.Serializer):
    id = fields.IntegerField()
    platform = fields.CharField()
    platform_label = fields.CharField()
    video_id = fields.CharField()
    share_url = fields.CharField(help_text="The video's link as the platform gives it; empty if none.")
    cover_url = fields.CharField(help_text="The cover image as the platform gives it (TikTok's expire: re-read).")
    views = fields.IntegerField(help_text="The last view count read.")
    live = fields.BooleanField(help_text="False once the platform no longer shows the video (deleted or private).")
    handle = fields.CharField(
        allow_null=True, help_text="The author, only if they gave your brand marketing consent; else null."
    )
    submitted_at = fields.DateTimeField()
    checked_at = fields.DateTimeField(allow_null=True)


class StatsDaySerializer(serializers.Serializer):
    day = serializers.DateField()
    visits = fields.IntegerField()
    started = fields.IntegerField()
    verified = fields.IntegerField()
    spent_minor = fields.IntegerField()
    views = fields.IntegerField(help_text="Total views reached by the end of the day.")


class CampaignStatsSerializer(serializers.Serializer):
    campaign_id = fields.IntegerField()
    currency = fields.CharField()
    as_of = fields.DateTimeField(
        allow_null=True, help_text="Events up to about this time are in the figures (they trail by a few minutes)."
    )
    funnel = StatsFunnelSerializer()
    spent_minor = fields.IntegerField()
    reserved_minor = fields.IntegerField()
    total_views = fields.IntegerField()
    cost_per_action = MoneySerializer(allow_null=True, help_text="Spent per verified action.")
    cost_per_view = MoneySerializer(allow_null=True)
    cost_per_mille = MoneySerializer(allow_null=True, help_text="Spent per thousand views (CPM).")
    by_trigger = StatsTriggerSerializer(many=True)
    videos_total = fields.IntegerField()
    videos_live = fields.IntegerField()
    videos = StatsVideoSerializer(many=True, help_text="The most viewed videos (up to 100).")
    days = StatsDaySerializer(many=True, help_text="The last 30 days, in the campaign's time zone.")
