"""Admin: brands, campaigns with their budgets, rules, the review queue, events and rewards.

Thin: lists are annotated through selectors, actions call one service each and report the
ApplicationError messages; statuses and money never change through a form.
"""

from django.contrib import admin, messages
from django.db.models import QuerySet

from campaigns.models import (
    ENGAGEMENT_TERMS_WARNING,
    ENGAGEMENT_TRIGGERS,
    Brand,
    BrandMembership,
    BrandPlan,
    Campaign,
    CampaignEvent,
    Plan,
    Reward,
    RewardEvent,
    RewardInReview,
    RewardRule,
    TriggerEvent,
    WebhookEndpoint,
    WebhookEndpointEvent,
)
from campaigns.selectors import campaigns_with_budget, review_queue
from campaigns.services import (
    campaign_end,
    campaign_pause,
    campaign_provision,
    campaign_resume,
    reward_void,
    rewards_approve_bulk,
    rewards_reject_bulk,
)
from campaigns.webhooks import webhook_endpoint_enable
from core.exceptions import ApplicationError
from core.money import format_minor


class MembershipInline(admin.TabularInline):
    model = BrandMembership
    extra = 0
    autocomplete_fields = ["user"]


class PlanPeriodInline(admin.TabularInline):
    """The brand's plan history; changes go through ``brand_plan_change`` (read-only here)."""

    model = BrandPlan
    extra = 0
    fields = ["plan", "started_at", "ended_at", "changed_by", "reason"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    """The packages on sale: ops edit them here, the pricing page and the entitlement checks read them."""

    list_display = ["name", "slug", "monthly_fee", "fee", "is_public", "position"]
    list_editable = ["is_public", "position"]
    ordering = ["position", "id"]

    @admin.display(description="monthly fee")
    def monthly_fee(self, obj: Plan) -> str:
        return format_minor(obj.monthly_fee_minor, obj.currency)

    @admin.display(description="fee per reward")
    def fee(self, obj: Plan) -> str:
        return obj.fee_description()

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # brands' history points at it (PROTECT); retire a plan by hiding it


@admin.register(Brand)
class BrandAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "funding_reference", "default_currency", "fee", "status"]
    list_filter = ["status", "default_currency"]
    search_fields = ["name", "slug", "funding_reference"]
    readonly_fields = ["funding_reference", "created_at"]
    inlines = [MembershipInline, PlanPeriodInline]

    @admin.display(description="fee per reward")
    def fee(self, obj: Brand) -> str:
        return obj.fee_description()

    def has_add_permission(self, request) -> bool:
        # A brand needs a funding reference with a check character: created by brand_create.
        return False


class RuleInline(admin.StackedInline):
    model = RewardRule
    extra = 0
    fieldsets = [
        (None, {"fields": ["name", "trigger", "custom_name", "is_active", "verification", "platform_terms"]}),
        ("Amount", {"fields": ["amount_type", "fixed_minor", "percent_bps", "min_minor", "max_minor"]}),
        (
            "Conditions",
            {
                "fields": [
                    "allowed_iban_countries",
                    "new_people_only",
                    "min_purchase_minor",
                    "view_threshold",
                    "required_code",
                ]
            },
        ),
        (
            "Caps (empty: none)",
            {
                "fields": [
                    ("person_count_per_day", "person_count_per_week", "person_count_per_campaign"),
                    ("person_amount_per_day_minor", "person_amount_per_week_minor", "person_amount_per_campaign_minor"),
                    ("iban_count_per_day", "iban_count_per_campaign"),
                    ("campaign_count", "campaign_count_per_day"),
                ]
            },
        ),
        ("Maturing and approval", {"fields": ["hold_days", "approval_policy", "review_above_minor"]}),
    ]
    readonly_fields = ["platform_terms"]

    @admin.display(description="platform terms")
    def platform_terms(self, obj: RewardRule) -> str:
        return obj.terms_warning or "—"


class CampaignEventInline(admin.TabularInline):
    model = CampaignEvent
    extra = 0
    can_delete = False
    fields = ["created_at", "kind", "from_status", "to_status", "actor", "reason", "data"]
    readonly_fields = fields
    ordering = ["-id"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


def _run(modeladmin, request, queryset: QuerySet, action, label: str) -> None:
    done = 0
    for obj in queryset:
        try:
            action(obj)
            done += 1
        except ApplicationError as exc:
            modeladmin.message_user(request, f"{obj}: {exc.message}", messages.ERROR)
    if done:
        modeladmin.message_user(request, f"{label}: {done}.", messages.SUCCESS)


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["__str__", "mode", "status", "funded", "held", "spent", "available", "starts_at", "ends_at"]
    list_filter = ["status", "mode", "currency", "brand"]
    list_select_related = ["brand", "budget_account"]
    search_fields = ["name", "slug", "brand__name"]
    readonly_fields = ["status", "budget_summary", "platform_terms", "created_at"]
    inlines = [RuleInline, CampaignEventInline]
    actions = ["pause", "resume", "end"]

    def get_queryset(self, request):
        return campaigns_with_budget()

    def _money(self, obj, value) -> str:
        return format_minor(value or 0, obj.currency)

    @admin.display(description="funded", ordering="funded_minor")
    def funded(self, obj):
        return self._money(obj, obj.funded_minor)

    @admin.display(description="held (reserved)", ordering="held_minor")
    def held(self, obj):
        return self._money(obj, obj.held_minor)

    @admin.display(description="spent", ordering="spent_minor")
    def spent(self, obj):
        return self._money(obj, obj.spent_minor)

    @admin.display(description="available", ordering="available_minor")
    def available(self, obj):
        return self._money(obj, obj.available_minor)

    @admin.display(description="budget")
    def budget_summary(self, obj) -> str:
        if obj.pk is None:
            return "Allocated after the campaign is created."
        parts = [("funded", self.funded), ("held", self.held), ("spent", self.spent), ("available", self.available)]
        return " · ".join(f"{label} {value(obj)}" for label, value in parts)

    @admin.display(description="platform terms")
    def platform_terms(self, obj) -> str:
        if obj.pk is None:
            return "—"
        engaging = [str(r) for r in obj.rules.filter(is_active=True, trigger__in=ENGAGEMENT_TRIGGERS).order_by("id")]
        if not engaging:
            return "—"
        return f"{', '.join(engaging)}: {ENGAGEMENT_TERMS_WARNING}"

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
        else:
            campaign_provision(campaign=obj)

    @admin.action(description="Pause selected campaigns")
    def pause(self, request, queryset):
        _run(self, request, queryset, lambda c: campaign_pause(campaign=c, actor=request.user), "Paused")

    @admin.action(description="Resume selected campaigns")
    def resume(self, request, queryset):
        _run(self, request, queryset, lambda c: campaign_resume(campaign=c, actor=request.user), "Resumed")

    @admin.action(description="End selected campaigns")
    def end(self, request, queryset):
        _run(self, request, queryset, lambda c: campaign_end(campaign=c, actor=request.user), "Ended")


class RewardEventInline(admin.TabularInline):
    model = RewardEvent
    extra = 0
    can_delete = False
    fields = ["created_at", "kind", "from_status", "to_status", "actor", "reason", "data"]
    readonly_fields = fields
    ordering = ["id"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


REWARD_FIELDS = [
    "id",
    "campaign",
    "rule",
    "person",
    "amount",
    "fee",
    "status",
    "matures_at",
    "review_reasons",
    "iban_fingerprint",
    "decided_by",
    "decided_at",
    "decision_reason",
    "payout_ref",
    "hold",
    "commit_entry",
    "clawback_entry",
    "event",
    "created_at",
]


@admin.register(Reward)
class RewardAdmin(ReadOnlyAdmin):
    list_display = ["id", "campaign", "person", "amount", "fee", "status", "matures_at", "created_at"]
    list_filter = ["status", "campaign__brand", "campaign", "rule__trigger"]
    list_select_related = ["campaign__brand", "person"]
    search_fields = ["=id", "event__external_id", "payout_ref"]
    date_hierarchy = "created_at"
    fields = REWARD_FIELDS
    readonly_fields = REWARD_FIELDS
    inlines = [RewardEventInline]
    actions = ["void"]

    @admin.display(description="amount", ordering="amount_minor")
    def amount(self, obj):
        return format_minor(obj.amount_minor, obj.currency)

    @admin.display(description="fee", ordering="fee_minor")
    def fee(self, obj):
        return format_minor(obj.fee_minor, obj.currency)

    def has_change_permission(self, request, obj=None) -> bool:
        # Read-only form; the change permission gates the actions.
        return request.user.has_perm("campaigns.change_reward")

    @admin.action(description="Void selected rewards (refund / undone action)")
    def void(self, request, queryset):
        _run(
            self,
            request,
            queryset,
            lambda r: reward_void(reward=r, actor=request.user, reason=f"Voided in admin by {request.user}"),
            "Voided",
        )


@admin.register(RewardInReview)
class ReviewQueueAdmin(RewardAdmin):
    list_display = ["id", "campaign", "person", "amount", "reasons", "created_at"]
    list_filter = ["campaign__brand", "campaign", "rule__trigger"]
    actions = ["approve", "reject_fraud", "reject_rules"]

    def get_queryset(self, request):
        return review_queue()

    @admin.display(description="why in review")
    def reasons(self, obj) -> str:
        return ", ".join(obj.review_reasons)

    def _report(self, request, outcome, label: str) -> None:
        if outcome.done:
            self.message_user(request, f"{label}: {len(outcome.done)}.", messages.SUCCESS)
        for reward_id, code in outcome.failed.items():
            self.message_user(request, f"Reward #{reward_id}: {code}.", messages.ERROR)

    @admin.action(description="Approve selected rewards")
    def approve(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        self._report(request, rewards_approve_bulk(reward_ids=ids, actor=request.user), "Approved")

    @admin.action(description="Reject: suspected fraud")
    def reject_fraud(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        self._report(
            request, rewards_reject_bulk(reward_ids=ids, actor=request.user, reason="Suspected fraud"), "Rejected"
        )

    @admin.action(description="Reject: does not meet the campaign's rules")
    def reject_rules(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        self._report(
            request,
            rewards_reject_bulk(reward_ids=ids, actor=request.user, reason="Does not meet the campaign's rules"),
            "Rejected",
        )


@admin.register(TriggerEvent)
class TriggerEventAdmin(ReadOnlyAdmin):
    list_display = [
        "external_id",
        "brand",
        "campaign",
        "type",
        "source",
        "outcome",
        "reason",
        "occurred_at",
        "received_at",
    ]
    list_filter = ["outcome", "type", "source", "brand", "campaign", "reason"]
    list_select_related = ["brand", "campaign__brand"]
    search_fields = ["=external_id", "=email", "=whatsapp", "=order_id", "=ip"]
    date_hierarchy = "received_at"


class WebhookEndpointEventInline(admin.TabularInline):
    model = WebhookEndpointEvent
    extra = 0
    can_delete = False
    fields = ["created_at", "kind", "channel", "actor", "reason", "data"]
    readonly_fields = fields
    ordering = ["-id"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    """Brands register endpoints (portal, API) so the URL passes the address guard and the secret
    is shown to them once; staff see the state and history and can enable a disabled one again."""

    list_display = ["id", "brand", "url", "is_active", "failure_streak", "disabled_at", "disabled_reason", "deleted_at"]
    list_filter = ["is_active", "brand"]
    list_select_related = ["brand"]
    search_fields = ["url", "brand__name"]
    fields = [
        "brand", "url", "description", "event_types", "is_active", "disabled_at", "disabled_reason",
        "failing_since", "failure_streak", "rotated_at", "deleted_at", "created_at",
    ]  # fmt: skip
    readonly_fields = fields
    inlines = [WebhookEndpointEventInline]
    actions = ["enable"]

    def has_change_permission(self, request, obj=None) -> bool:
        # Read-only form; the change permission gates the action.
        return request.user.has_perm("campaigns.change_webhookendpoint")

    @admin.action(description="Enable selected endpoints again (resends deliveries still in the retry window)")
    def enable(self, request, queryset):
        _run(
            self,
            request,
            queryset,
            lambda e: webhook_endpoint_enable(endpoint=e, channel="admin", actor=request.user),
            "Enabled",
        )
