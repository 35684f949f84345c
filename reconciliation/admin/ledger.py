"""The books in the admin: read-only everywhere (corrections are reversing entries posted by
services), fast on large tables (stored balances, no COUNT(*) over postings, keyset statements)."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from core.admin_money import fields_with_money
from core.money import format_minor
from core.replica import LagTolerantChangelist
from reconciliation.models import Account, Hold, JournalEntry, Posting
from reconciliation.selectors import account_statement, trial_balance


class ReadOnlyAdmin(admin.ModelAdmin):
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Account)
class AccountAdmin(ReadOnlyAdmin):
    list_display = ["code", "name", "kind", "currency", "posted", "held", "available", "allow_overdraft", "is_active"]
    list_filter = ["kind", "currency", "allow_overdraft", "is_active"]
    search_fields = ["code", "name", "owner_id"]
    ordering = ["code"]
    readonly_fields = ["posted", "held", "available", "statement_link"]
    list_per_page = 100

    @admin.display(description="posted", ordering="posted_minor")
    def posted(self, obj: Account) -> str:
        return format_minor(obj.posted_minor, obj.currency)

    @admin.display(description="held", ordering="held_minor")
    def held(self, obj: Account) -> str:
        return format_minor(obj.held_minor, obj.currency)

    @admin.display(description="available")
    def available(self, obj: Account) -> str:
        return format_minor(obj.available_minor, obj.currency)

    @admin.display(description="statement")
    def statement_link(self, obj: Account) -> str:
        url = reverse("admin:reconciliation_account_statement", args=[obj.pk])
        return format_html('<a href="{}">Account statement</a>', url)

    def get_urls(self):
        return [
            path(
                "<int:account_id>/statement/",
                self.admin_site.admin_view(self.statement_view),
                name="reconciliation_account_statement",
            ),
            path(
                "trial-balance/",
                self.admin_site.admin_view(self.trial_balance_view),
                name="reconciliation_trial_balance",
            ),
            *super().get_urls(),
        ]

    def statement_view(self, request: HttpRequest, account_id: int):
        account = get_object_or_404(Account, pk=account_id)
        if not self.has_view_permission(request, account):
            raise PermissionDenied
        try:
            after = int(request.GET.get("after", "")) if request.GET.get("after") else None
        except ValueError:
            after = None
        page = account_statement(account=account, after_posting_id=after, limit=100)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Statement of {account.code}",
            "account": account,
            "page": page,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/reconciliation/account_statement.html", context)

    def trial_balance_view(self, request: HttpRequest):
        context = {
            **self.admin_site.each_context(request),
            "title": "Trial balance",
            "rows": trial_balance(),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/reconciliation/trial_balance.html", context)


class PostingInline(admin.TabularInline):
    model = Posting
    fields = ["account", "debit", "credit", "currency", "balance_after"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("account")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="debit")
    def debit(self, obj: Posting) -> str:
        return format_minor(obj.debit_minor, obj.currency) if obj.debit_minor else ""

    @admin.display(description="credit")
    def credit(self, obj: Posting) -> str:
        return format_minor(obj.credit_minor, obj.currency) if obj.credit_minor else ""

    @admin.display(description="balance after")
    def balance_after(self, obj: Posting) -> str:
        return format_minor(obj.balance_after_minor, obj.currency)


@admin.register(JournalEntry)
class JournalEntryAdmin(LagTolerantChangelist, ReadOnlyAdmin):
    list_display = ["id", "created_at", "effective_date", "kind", "memo", "reference", "idempotency_key", "reverses"]
    list_filter = ["kind", "effective_date"]
    search_fields = ["=idempotency_key", "=reference_id", "reference_type", "memo"]
    date_hierarchy = "effective_date"
    ordering = ["-id"]
    inlines = [PostingInline]
    list_select_related = ["reverses"]

    @admin.display(description="reference")
    def reference(self, obj: JournalEntry) -> str:
        return f"{obj.reference_type}:{obj.reference_id}" if obj.reference_type else ""


@admin.register(Hold)
class HoldAdmin(ReadOnlyAdmin):
    list_display = ["id", "account", "amount", "status", "expires_at", "created_at", "resolved_at", "reference"]
    list_filter = ["status", "currency"]
    search_fields = ["=idempotency_key", "=reference_id", "account__code"]
    list_select_related = ["account"]
    ordering = ["-id"]
    fields = readonly_fields = fields_with_money(
        Hold, {"amount_minor": "amount", "committed_amount_minor": "committed_amount"}
    )

    @admin.display(description="amount", ordering="amount_minor")
    def amount(self, obj: Hold) -> str:
        return format_minor(obj.amount_minor, obj.currency)

    @admin.display(description="committed amount")
    def committed_amount(self, obj: Hold) -> str:
        if obj.committed_amount_minor is None:
            return "—"
        return format_minor(obj.committed_amount_minor, obj.currency)

    @admin.display(description="reference")
    def reference(self, obj: Hold) -> str:
        return f"{obj.reference_type}:{obj.reference_id}" if obj.reference_type else ""
