"""Admin: brands, campaigns with their budgets, rules, the review queue, events and rewards.

Thin: lists are annotated through selectors, actions call one service each and report the
ApplicationError messages; statuses and money never change through a form.
"""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from campaigns.entitlements import entitlement_campaign_check, entitlement_trigger_check
from campaigns.models import (
    ENGAGEMENT_TERMS_WARNING,
    ENGAGEMENT_TRIGGERS,
    ActionWithdrawal,
    Brand,
    BrandEvent,
    BrandMembership,
    BrandPlan,
    Campaign,
    CampaignEvent,
    Plan,
    PlanCharge,
    Reward,
    RewardEvent,
    RewardInReview,
    RewardRule,
    TriggerEvent,
    UpgradeRequest,
    WebhookEndpoint,
    WebhookEndpointEvent,
)
from campaigns.selectors import brand_plan_current, brands_with_plan, campaigns_with_budget, review_queue
from campaigns.services import (
    brand_plan_change,
    campaign_end,
    campaign_pause,
    campaign_provision,
    campaign_resume,
    reward_void,
    rewards_approve_bulk,
    rewards_reject_bulk,
    upgrade_requests_handle,
)
from campaigns.webhooks import webhook_endpoint_enable
from core.admin_confirm import CONFIRM_FIELD
from core.admin_money import MoneyInputsForm, fields_with_money
from core.exceptions import ApplicationError
from core.money import format_minor
from core.replica import LagTolerantChangelist


class MembershipInline(admin.TabularInline):
    model = BrandMembership
    extra = 0
    autocomplete_fields = ["user"]


class BrandEventInline(admin.TabularInline):
    """The brand's own settings changed by its team (read-only: an audit trail)."""

    model = BrandEvent
    extra = 0
    can_delete = False
    fields = readonly_fields = ["created_at", "kind", "actor", "channel", "data"]
    ordering = ["-id"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class PlanPeriodInline(admin.TabularInline):
    """The brand's plan history; changes go through ``brand_plan_change`` (read-only here)."""

    model = BrandPlan
    extra = 0
    fields = ["plan", "started_at", "ended_at", "changed_by", "reason"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class PlanForm(MoneyInputsForm):
    money_inputs = ("monthly_payouts_minor", "fee_fixed_minor", "monthly_fee_minor")


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    """The packages on sale: ops edit them here, the pricing page and the entitlement checks read them."""

    form = PlanForm
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


class ChangePlanForm(forms.Form):
    plan = forms.ModelChoiceField(queryset=Plan.objects.order_by("position", "id"), label="New plan")
    reason = forms.CharField(max_length=200, help_text="Why (kept on the plan history).")


@admin.register(Brand)
class BrandAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "funding_reference", "default_currency", "plan", "status", "livemode", "live_since"]
    list_filter = ["status", "livemode", "default_currency"]
    search_fields = ["name", "slug", "funding_reference"]
    # A test tenant never turns live (its funds are test money) nor a live brand into a test one.
    readonly_fields = ["funding_reference", "created_at", "plan", "livemode", "test_of", "live_since"]
    inlines = [MembershipInline, PlanPeriodInline, BrandEventInline]

    def get_queryset(self, request):
        return brands_with_plan()

    @admin.display(description="plan", ordering="plan_name")
    def plan(self, obj: Brand) -> str:
        if obj.pk is None:
            return "—"
        url = reverse("admin:campaigns_brand_change_plan", args=[obj.pk])
        return format_html('{} · <a href="{}">Change plan</a>', obj.plan_name or "no plan", url)

    def has_add_permission(self, request) -> bool:
        # A brand needs a funding reference with a check character: created by brand_create.
        return False

    def get_urls(self):
        view = self.admin_site.admin_view(self.change_plan_view)
        return [path("<int:pk>/change-plan/", view, name="campaigns_brand_change_plan"), *super().get_urls()]

    def change_plan_view(self, request, pk: int):
        """Choose a plan and a reason, see what changes (fees, triggers, channels, allowances),
        confirm: only the confirmation's POST calls ``brand_plan_change`` with the actor. The new
        period (who, when, why) is the audit row; the admin's history of the brand logs it too."""
        brand = get_object_or_404(Brand, pk=pk)
        if not self.has_change_permission(request, brand):
            raise PermissionDenied
        current = brand_plan_current(brand=brand)
        form = ChangePlanForm(request.POST or None, initial={"plan": current})
        if request.method == "POST" and form.is_valid():
            plan, reason = form.cleaned_data["plan"], form.cleaned_data["reason"]
            if request.POST.get(CONFIRM_FIELD) == "yes":
                brand_plan_change(brand=brand, plan=plan, actor=request.user, reason=reason)
                self.log_change(request, brand, f"Plan changed from {current or 'none'} to {plan}: {reason}")
                self.message_user(request, f"{brand} is on {plan} from now.", messages.SUCCESS)
                return redirect("admin:campaigns_brand_change", brand.pk)
            return TemplateResponse(
                request,
                "admin/campaigns/brand_change_plan_confirm.html",
                {
                    **self.admin_site.each_context(request),
                    "opts": self.model._meta,
                    "title": f"Change the plan of {brand}",
                    "brand": brand,
                    "form": form,
                    "lines": plan_change_lines(current, plan),
                    "confirm_field": CONFIRM_FIELD,
                },
            )
        return TemplateResponse(
            request,
            "admin/campaigns/brand_change_plan.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": f"Change the plan of {brand}",
                "brand": brand,
                "current": current,
                "form": form,
                "requests": UpgradeRequest.objects.filter(brand=brand, handled_at__isnull=True),
            },
        )


def plan_change_lines(current: Plan | None, new: Plan) -> list[str]:
    """What a plan change changes, one line per difference, for the confirmation page."""

    def allowance(value, money=False) -> str:
        if value is None:
            return "no limit"
        return format_minor(value, new.currency) if money else str(value)

    if current is None:
        return [f"The brand has no plan; it goes on {new}."]
    if current == new:
        return [f"The brand is on {new} already: nothing changes."]
    pairs = [
        ("Plan", str(current), str(new)),
        ("Fee per reward (new rewards)", current.fee_description(), new.fee_description()),
        (
            "Monthly fee",
            format_minor(current.monthly_fee_minor, current.currency),
            format_minor(new.monthly_fee_minor, new.currency),
        ),
        ("Triggers", ", ".join(current.triggers), ", ".join(new.triggers)),
        ("Channels", ", ".join(current.channels), ", ".join(new.channels)),
        ("Actions per month", allowance(current.monthly_actions), allowance(new.monthly_actions)),
        (
            "Rewards per month",
            allowance(current.monthly_payouts_minor, True),
            allowance(new.monthly_payouts_minor, True),
        ),
    ]
    lines = [f"{label}: {before} → {after}" for label, before, after in pairs if before != after]
    lost = sorted(set(current.triggers) - set(new.triggers))
    if lost:
        lines.append(f"Live rules for {', '.join(lost)} stop rewarding (events are refused plan_excludes_trigger).")
    return lines


@admin.register(UpgradeRequest)
class UpgradeRequestAdmin(admin.ModelAdmin):
    """Brands asking for another plan from the portal; answered on the brand's Change plan page."""

    list_display = ["created_at", "brand", "current_plan", "wanted_plan", "requested_by", "handled_at", "change"]
    list_filter = [("handled_at", admin.EmptyFieldListFilter), "wanted_plan"]
    list_select_related = ["brand", "current_plan", "wanted_plan", "requested_by"]
    readonly_fields = ["brand", "current_plan", "wanted_plan", "message", "requested_by", "created_at", "handled_at"]
    actions = ["mark_handled"]

    @admin.display(description="")
    def change(self, obj: UpgradeRequest) -> str:
        return format_html(
            '<a href="{}">Change plan</a>', reverse("admin:campaigns_brand_change_plan", args=[obj.brand_id])
        )

    def has_add_permission(self, request) -> bool:
        return False  # brands make them in the portal

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(description="Mark the selected requests handled")
    def mark_handled(self, request, queryset):
        done = upgrade_requests_handle(request_ids=list(queryset.values_list("pk", flat=True)), actor=request.user)
        self.message_user(request, f"Handled: {done}.", messages.SUCCESS)


class RuleForm(MoneyInputsForm):
    money_inputs = (
        "fixed_minor", "min_minor", "max_minor", "min_purchase_minor", "person_amount_per_day_minor",
        "person_amount_per_week_minor", "person_amount_per_campaign_minor", "review_above_minor",
    )  # fmt: skip


class RuleInlineFormSet(forms.BaseInlineFormSet):
    """The admin's rules obey the brand's plan like the portal's and the API's (``rule_create``'s
    check, run here because the inline saves the rows itself): a refused trigger is a form error.
    Their amounts are in the campaign's currency."""

    def get_form_kwargs(self, index):
        return {**super().get_form_kwargs(index), "currency": self.instance.currency}

    def clean(self):
        super().clean()
        campaign = self.instance
        if not campaign.brand_id:
            return
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or data.get("DELETE") or not form.has_changed() or not data.get("trigger"):
                continue
            try:
                entitlement_trigger_check(brand=campaign.brand, trigger=data["trigger"])
            except ApplicationError as exc:
                form.add_error("trigger", exc.message)


class RuleInline(admin.StackedInline):
    model = RewardRule
    form = RuleForm
    formset = RuleInlineFormSet
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


class CampaignAdminFormMixin:
    """A new campaign obeys the brand's plan (``campaign_provision``'s check, shown on the form)."""

    def clean(self):
        data = super().clean()
        brand, mode = data.get("brand"), data.get("mode")
        if self.instance.pk is None and brand is not None and mode:
            try:
                entitlement_campaign_check(brand=brand, mode=mode)
            except ApplicationError as exc:
                raise forms.ValidationError(exc.message, code=exc.code) from exc
        return data


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


class CampaignForm(MoneyInputsForm):
    money_inputs = ("min_payout_minor",)


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    form = CampaignForm
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

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        return type("CampaignAdminForm", (CampaignAdminFormMixin, form), {})

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
        else:
            campaign_provision(campaign=obj, actor=request.user)

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
    "undone_reason",
    "rechecked_at",
    "recheck_failures",
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


@admin.register(ActionWithdrawal)
class ActionWithdrawalAdmin(ReadOnlyAdmin):
    """What platforms told us people took back (``campaigns.services.undone``): read-only, the
    account only as its fingerprint."""

    list_display = ["id", "platform", "kind", "occurred_at", "created_at"]
    list_filter = ["platform", "kind"]
    fields = ["platform", "kind", "account", "occurred_at", "ref", "data", "created_at"]
    readonly_fields = fields


@admin.register(Reward)
class RewardAdmin(LagTolerantChangelist, ReadOnlyAdmin):
    list_display = ["id", "campaign", "person", "amount", "fee", "status", "matures_at", "created_at"]
    list_filter = ["status", "undone_reason", "campaign__brand", "campaign", "rule__trigger"]
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
    # The queue is a work list ops decide from: read on the primary, unlike the rewards list.
    get_changelist = admin.ModelAdmin.get_changelist

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
class TriggerEventAdmin(LagTolerantChangelist, ReadOnlyAdmin):
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
    fields = readonly_fields = fields_with_money(TriggerEvent, {"purchase_amount_minor": "purchase_amount"})

    @admin.display(description="purchase amount")
    def purchase_amount(self, obj: TriggerEvent) -> str:
        if obj.purchase_amount_minor is None:
            return "—"
        return format_minor(obj.purchase_amount_minor, obj.purchase_currency)


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


@admin.register(PlanCharge)
class PlanChargeAdmin(ReadOnlyAdmin):
    """Plans' monthly fees (``campaigns.services.plan_charges``): made and taken by the daily
    task, never by hand; a due one waits for the brand's funds."""

    list_display = ["month", "brand", "plan", "amount", "posted_at"]
    list_filter = [("posted_at", admin.EmptyFieldListFilter), "month"]
    list_select_related = ["brand", "plan"]
    search_fields = ["brand__name", "brand__slug"]
    fields = ["brand", "plan", "month", "amount", "created_at", "posted_at", "entry"]
    readonly_fields = fields

    @admin.display(description="Amount")
    def amount(self, obj: PlanCharge) -> str:
        return format_minor(obj.amount_minor, obj.currency)
