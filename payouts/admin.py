"""Ops screens for payouts: the list with filters, approve / retry / cancel / batch actions that
call services (each permissioned and audited by the service's PayoutEvent), attempts inline,
pain.001 batches with download, and the routing rules."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from campaigns.models import Brand, Campaign
from core.admin_confirm import Confirmation, action_confirmation_page, action_confirmed
from core.admin_money import fields_with_money
from core.exceptions import ApplicationError
from core.money import format_minor
from core.replica import LagTolerantChangelist
from payouts.models import (
    BrandBankAccount,
    Payout,
    PayoutAttempt,
    PayoutBatch,
    PayoutBatchEvent,
    PayoutEvent,
    PayoutStatus,
    RouteRule,
    Withdrawal,
)
from payouts.pain002 import parse_pain002
from payouts.rails import rail_names
from payouts.selectors import payouts_for_admin
from payouts.services import (
    payout_approve,
    payout_batch_apply_pain002,
    payout_batch_approve,
    payout_batch_create,
    payout_batch_download,
    payout_cancel,
    payout_retry,
)
from payouts.services.withdrawals import brand_bank_account_decide, withdrawal_refund


class CampaignFilter(admin.SimpleListFilter):
    title = "campaign"
    parameter_name = "campaign"

    def lookups(self, request, model_admin):
        return [(c.pk, str(c)) for c in Campaign.objects.select_related("brand").order_by("brand__slug", "slug")[:200]]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(items__reward__campaign_id=self.value()).distinct()
        return queryset


class BrandFilter(admin.SimpleListFilter):
    title = "brand"
    parameter_name = "brand"

    def lookups(self, request, model_admin):
        return [(b.pk, b.name) for b in Brand.objects.order_by("name")[:200]]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(items__reward__campaign__brand_id=self.value()).distinct()
        return queryset


class AttemptInline(admin.TabularInline):
    model = PayoutAttempt
    extra = 0
    can_delete = False
    fields = [
        "number",
        "started_at",
        "finished_at",
        "outcome",
        "recovered",
        "error_class",
        "reason_code",
        "reason_text",
    ]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class EventInline(admin.TabularInline):
    model = PayoutEvent
    extra = 0
    can_delete = False
    fields = ["created_at", "kind", "from_status", "to_status", "actor", "data"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class BatchEventInline(admin.TabularInline):
    """Who built, approved, downloaded (each time) or expired the file: the batch's audit rows."""

    model = PayoutBatchEvent
    extra = 0
    can_delete = False
    fields = ["created_at", "kind", "actor", "reason", "data"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


def _totals(amounts: list[tuple[int, str]]) -> str:
    """Amounts in several currencies summed per currency, formatted for the locale."""
    sums: dict[str, int] = {}
    for amount_minor, currency in amounts:
        sums[currency] = sums.get(currency, 0) + amount_minor
    return " + ".join(format_minor(total, currency) for currency, total in sorted(sums.items()))


def _payouts_confirmation(payouts: list[Payout]) -> Confirmation:
    large = [p for p in payouts if p.requires_approval and p.approved_at is None]
    lines = [
        _("%(payout)s: %(amount)s to %(name)s — %(step)s")
        % {
            "payout": p.end_to_end_id,
            "amount": format_minor(p.amount_minor, p.currency),
            "name": p.creditor_name,
            "step": _("second approval") if p in large else _("release from review"),
        }
        for p in payouts
    ]
    summary = ngettext(
        "You are giving %(count)d payout of %(total)s its second approval, after which it is paid.",
        "You are giving %(count)d payouts of %(total)s in all their second approval, after which they are paid.",
        len(large),
    ) % {"count": len(large), "total": _totals([(p.amount_minor, p.currency) for p in large])}
    return Confirmation(
        title=_("Approve payouts"),
        summary=summary,
        lines=lines,
        warning=_("Four-eyes: you may not approve a payout you created or whose rewards you approved."),
        button=_("Yes, approve and send"),
    )


def _waiting_for(payout: Payout) -> str:
    if payout.held_by_ops:
        return f"review: {payout.review_reason}" if payout.needs_review else "second approval"
    if payout.status == PayoutStatus.CREATED and payout.next_attempt_at:
        return f"retry at {payout.next_attempt_at:%H:%M:%S}"
    return ""


def _payee_check(payout: Payout) -> str:
    """The bank's answer to the payee check, the name it gave, and what the policy did with it."""
    if not payout.vop_checked_at:
        return ""
    suggested = f" (bank: {payout.vop_suggested_name})" if payout.vop_suggested_name else ""
    return f"{payout.vop_result.replace('_', ' ')}{suggested} → {payout.vop_action}"


def _run(modeladmin, request, queryset, action, verb: str) -> None:
    done = 0
    for obj in queryset:
        try:
            action(obj)
        except ApplicationError as exc:
            modeladmin.message_user(request, f"{obj}: {exc}", messages.ERROR)
        else:
            done += 1
    if done:
        modeladmin.message_user(request, f"{verb} {done}.", messages.SUCCESS)


@admin.register(Payout)
class PayoutAdmin(LagTolerantChangelist, admin.ModelAdmin):
    list_display = [
        "end_to_end_id",
        "person",
        "amount",
        "rail",
        "status",
        "waiting_for",
        "payee_check",
        "creditor_iban_masked",
        "reason_code",
        "created_at",
        "settled_at",
    ]
    list_filter = [
        "status",
        "rail",
        "needs_review",
        "requires_approval",
        "vop_result",
        "vop_action",
        CampaignFilter,
        BrandFilter,
        "created_at",
    ]
    date_hierarchy = "created_at"
    search_fields = ["end_to_end_id", "rail_reference", "=person__id"]
    list_select_related = ["person"]
    inlines = [AttemptInline, EventInline]
    actions = ["approve", "retry", "cancel", "create_batch"]
    fields = readonly_fields = fields_with_money(Payout, {"amount_minor": "amount"})

    def get_queryset(self, request):
        return payouts_for_admin()

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="amount", ordering="amount_minor")
    def amount(self, obj: Payout) -> str:
        return format_minor(obj.amount_minor, obj.currency)

    @admin.display(description="waiting for")
    def waiting_for(self, obj: Payout) -> str:
        return _waiting_for(obj)

    @admin.display(description="payee check (VoP)", ordering="vop_result")
    def payee_check(self, obj: Payout) -> str:
        return _payee_check(obj)

    @admin.action(description="Approve / release from review", permissions=["approve"])
    def approve(self, request, queryset):
        payouts = list(queryset)
        if any(p.requires_approval and p.approved_at is None for p in payouts) and not action_confirmed(request):
            return action_confirmation_page(
                self,
                request,
                action="approve",
                selected=[p.pk for p in payouts],
                confirmation=_payouts_confirmation(payouts),
            )
        _run(self, request, payouts, lambda p: payout_approve(payout=p, approver=request.user), "Approved")
        return None

    @admin.action(description="Retry now", permissions=["retry"])
    def retry(self, request, queryset):
        _run(self, request, queryset, lambda p: payout_retry(payout=p, actor=request.user), "Retried")

    @admin.action(description="Cancel (not yet sent)", permissions=["cancel"])
    def cancel(self, request, queryset):
        _run(
            self,
            request,
            queryset,
            lambda p: payout_cancel(payout=p, actor=request.user, reason="Cancelled in the admin"),
            "Cancelled",
        )

    @admin.action(description="Create a pain.001 batch from the selected file-rail payouts", permissions=["batch"])
    def create_batch(self, request, queryset):
        try:
            batch = payout_batch_create(actor=request.user, payout_ids=list(queryset.values_list("id", flat=True)))
        except ApplicationError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self.message_user(request, f"Built {batch} for {format_minor(batch.control_sum_minor, batch.currency)}.")

    def has_approve_permission(self, request):
        return request.user.has_perm("payouts.approve_payout")

    def has_retry_permission(self, request):
        return request.user.has_perm("payouts.retry_payout")

    def has_cancel_permission(self, request):
        return request.user.has_perm("payouts.cancel_payout")

    def has_batch_permission(self, request):
        return request.user.has_perm("payouts.download_payoutbatch")


@admin.register(PayoutBatch)
class PayoutBatchAdmin(admin.ModelAdmin):
    list_display = [
        "batch_id",
        "execution_date",
        "count",
        "control_sum",
        "status",
        "instant",
        "approval",
        "download_link",
        "status_report_link",
    ]
    list_filter = ["status", "execution_date"]
    fields = readonly_fields = fields_with_money(PayoutBatch, {"control_sum_minor": "control_sum"}, exclude=("file",))
    inlines = [BatchEventInline]
    actions = ["approve"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_urls(self):
        return [
            path(
                "<int:pk>/download/",
                self.admin_site.admin_view(self.download_view),
                name="payouts_payoutbatch_download",
            ),
            path(
                "<int:pk>/status-report/",
                self.admin_site.admin_view(self.status_report_view),
                name="payouts_payoutbatch_status_report",
            ),
            *super().get_urls(),
        ]

    @admin.display(description="control sum")
    def control_sum(self, obj: PayoutBatch) -> str:
        return format_minor(obj.control_sum_minor, obj.currency)

    @admin.display(description="approval")
    def approval(self, obj: PayoutBatch) -> str:
        if not obj.requires_approval:
            return "not needed"
        return f"by {obj.approved_by}" if obj.approved_at else "waiting"

    @admin.display(description="pain.001")
    def download_link(self, obj: PayoutBatch) -> str:
        return format_html('<a href="{}">download</a>', reverse("admin:payouts_payoutbatch_download", args=[obj.pk]))

    def download_view(self, request, pk: int):
        batch = get_object_or_404(PayoutBatch, pk=pk)
        try:
            data = payout_batch_download(batch=batch, actor=request.user)
        except ApplicationError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return HttpResponse(str(exc), status=403, content_type="text/plain")
        response = HttpResponse(data, content_type="application/xml")
        response["Content-Disposition"] = f'attachment; filename="{batch.batch_id}.xml"'
        return response

    @admin.display(description="pain.002")
    def status_report_link(self, obj: PayoutBatch) -> str:
        url = reverse("admin:payouts_payoutbatch_status_report", args=[obj.pk])
        return format_html('<a href="{}">import status report</a>', url)

    def status_report_view(self, request, pk: int):
        """The bank's pain.002 for this file: rejected payments fail (money back to payable),
        settled ones settle. Moving money, so it needs ``approve_payout``; the service audits
        each payout's change and applying the same report twice changes nothing."""
        batch = get_object_or_404(PayoutBatch, pk=pk)
        if not request.user.has_perm("payouts.approve_payout"):
            raise PermissionDenied
        form = StatusReportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                report = parse_pain002(upload.read())
                counts = payout_batch_apply_pain002(batch=batch, report=report)
            except ApplicationError as exc:
                self.message_user(request, f"{upload.name} was not applied ({exc.code}): {exc.message}", messages.ERROR)
            else:
                self.message_user(
                    request, f"Status report applied: {counts['failed']} failed, {counts['settled']} settled."
                )
                return HttpResponseRedirect(reverse("admin:payouts_payoutbatch_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "title": f"pain.002 status report for {batch.batch_id}",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/payouts/status_report.html", context)

    @admin.action(description="Approve (four-eyes)")
    def approve(self, request, queryset):
        batches = list(queryset.defer("file"))
        if not action_confirmed(request):
            return action_confirmation_page(
                self,
                request,
                action="approve",
                selected=[b.pk for b in batches],
                confirmation=_batches_confirmation(batches),
            )
        _run(self, request, batches, lambda b: payout_batch_approve(batch=b, approver=request.user), "Approved")
        return None


def _batches_confirmation(batches: list[PayoutBatch]) -> Confirmation:
    lines = [
        ngettext(
            "%(batch)s: %(count)d payment, %(total)s, to be executed on %(date)s",
            "%(batch)s: %(count)d payments, %(total)s, to be executed on %(date)s",
            b.count,
        )
        % {
            "batch": b.batch_id,
            "count": b.count,
            "total": format_minor(b.control_sum_minor, b.currency),
            "date": b.execution_date.isoformat(),
        }
        for b in batches
    ]
    summary = ngettext(
        "You are approving %(count)d pain.001 file of %(total)s: once downloaded, the bank pays it.",
        "You are approving %(count)d pain.001 files of %(total)s in all: once downloaded, the bank pays them.",
        len(batches),
    ) % {"count": len(batches), "total": _totals([(b.control_sum_minor, b.currency) for b in batches])}
    return Confirmation(
        title=_("Approve payout files"),
        summary=summary,
        lines=lines,
        warning=_("Four-eyes: you may not approve a file you built or whose rewards you approved."),
        button=_("Yes, approve the files"),
    )


class StatusReportForm(forms.Form):
    file = forms.FileField(help_text="The pain.002 (001.03 or 001.10) the bank sent for this file.")


class RouteRuleForm(forms.ModelForm):
    class Meta:
        model = RouteRule
        fields = [
            "priority",
            "currency",
            "country",
            "min_amount_minor",
            "max_amount_minor",
            "rail",
            "fallback_rail",
            "active",
        ]

    def _known(self, name: str) -> str:
        if name and name not in rail_names():
            raise forms.ValidationError(f"No rail called {name!r}; configured: {', '.join(rail_names())}.")
        return name

    def clean_rail(self):
        return self._known(self.cleaned_data["rail"])

    def clean_fallback_rail(self):
        return self._known(self.cleaned_data["fallback_rail"])


@admin.register(RouteRule)
class RouteRuleAdmin(admin.ModelAdmin):
    form = RouteRuleForm
    list_display = [
        "priority",
        "currency",
        "country",
        "min_amount",
        "max_amount",
        "rail",
        "fallback_rail",
        "active",
    ]
    list_editable = ["active"]
    ordering = ["priority", "id"]

    def _bound(self, obj: RouteRule, value: int | None) -> str:
        # A rule for any currency has no unit to format its bound in.
        if value is None:
            return "—"
        return format_minor(value, obj.currency) if obj.currency else f"{value} (minor units)"

    @admin.display(description="from amount", ordering="min_amount_minor")
    def min_amount(self, obj: RouteRule) -> str:
        return self._bound(obj, obj.min_amount_minor)

    @admin.display(description="up to amount", ordering="max_amount_minor")
    def max_amount(self, obj: RouteRule) -> str:
        return self._bound(obj, obj.max_amount_minor)


@admin.register(BrandBankAccount)
class BrandBankAccountAdmin(admin.ModelAdmin):
    """Ops verify a brand's bank account before any withdrawal goes to it: against the brand's
    company documents, or a top-up it was sent from."""

    list_display = ["brand", "masked", "holder_name", "status", "created_by", "created_at", "decided_by"]
    list_filter = ["status"]
    list_select_related = ["brand", "created_by", "decided_by"]
    readonly_fields = [f.name for f in BrandBankAccount._meta.fields]
    actions = ["verify", "reject"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_verify_permission(self, request) -> bool:
        return request.user.has_perm("payouts.verify_brandbankaccount")

    @admin.action(description="Verify: the account is the brand's", permissions=["verify"])
    def verify(self, request, queryset):
        _run(
            self,
            request,
            queryset,
            lambda a: brand_bank_account_decide(account=a, approver=request.user, verified=True),
            "Verified",
        )

    @admin.action(description="Reject", permissions=["verify"])
    def reject(self, request, queryset):
        _run(
            self,
            request,
            queryset,
            lambda a: brand_bank_account_decide(account=a, approver=request.user, verified=False),
            "Rejected",
        )


@admin.register(Withdrawal)
class WithdrawalAdmin(admin.ModelAdmin):
    """Read-only: a withdrawal's payout is approved, released from review, retried or cancelled
    on the payout's page. Its payee check's answer is shown here too: anything but a match waits
    for ops (``WITHDRAWAL_POLICY``), who compare the bank's name with the verified account's."""

    list_display = [
        "id",
        "brand",
        "amount",
        "bank_account",
        "payout_link",
        "payout_status",
        "waiting_for",
        "payee_check",
        "back_entry",
        "created_by",
        "created_at",
    ]
    list_filter = ["payout__status", "payout__needs_review", "payout__vop_result"]
    list_select_related = ["brand", "bank_account", "payout", "created_by"]
    fields = readonly_fields = [
        *fields_with_money(Withdrawal, {"amount_minor": "amount"}),
        "payout_status",
        "waiting_for",
        "payee_check",
    ]
    actions = ["refund"]

    def has_refund_permission(self, request) -> bool:
        return request.user.has_perm("payouts.refund_withdrawal")

    @admin.action(
        description="Give back to the brand's funds (payout failed, cancelled or returned)", permissions=["refund"]
    )
    def refund(self, request, queryset):
        _run(self, request, queryset, lambda w: withdrawal_refund(withdrawal=w, actor=request.user), "Refunded")

    @admin.display(description="amount", ordering="amount_minor")
    def amount(self, obj) -> str:
        return format_minor(obj.amount_minor, obj.currency)

    @admin.display(description="payout", ordering="payout_id")
    def payout_link(self, obj: Withdrawal) -> str:
        url = reverse("admin:payouts_payout_change", args=[obj.payout_id])
        return format_html('<a href="{}">{}</a>', url, obj.payout.end_to_end_id)

    @admin.display(description="payout status", ordering="payout__status")
    def payout_status(self, obj: Withdrawal) -> str:
        return obj.payout.status

    @admin.display(description="waiting for")
    def waiting_for(self, obj: Withdrawal) -> str:
        return _waiting_for(obj.payout)

    @admin.display(description="payee check (VoP)", ordering="payout__vop_result")
    def payee_check(self, obj: Withdrawal) -> str:
        return _payee_check(obj.payout)

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
