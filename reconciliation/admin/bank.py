"""The reconciliation dashboard and the bank side of the admin.

Every action calls a service (which audits it); the lists are annotated through selectors and never
count a large table (``show_full_result_count = False``)."""

import csv

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import F, Q
from django.http import HttpRequest, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from core.admin_money import fields_with_money
from core.exceptions import ApplicationError
from core.money import format_amount, format_minor
from core.replica import LagTolerantChangelist
from reconciliation.admin.ledger import ReadOnlyAdmin
from reconciliation.bank_selectors import dashboard, unconfirmed_advices, write_offs_waiting
from reconciliation.matching import Candidate, line_candidates
from reconciliation.models import (
    BankStatement,
    Match,
    MatchStatus,
    PlatformBankAccount,
    ReconciliationAction,
    StatementImport,
    StatementLine,
    StatementLineStatus,
    Suggestion,
    SuggestionStatus,
)
from reconciliation.services.bank_reports import statement_line_report_decide
from reconciliation.services.matching import (
    match_undo,
    statement_line_duplicate_decide,
    statement_line_match_manual,
    statement_line_move_to_suspense,
    statement_lines_match,
    suggestion_confirm,
    write_off_decide,
    write_off_request,
)
from reconciliation.services.statements import platform_bank_account_create, statement_import
from reconciliation.statements.formats import statement_format_choices, statement_format_get

RECONCILE = "reconciliation.reconcile_statement"


def _require(request: HttpRequest, perm: str) -> None:
    if not request.user.has_perm(perm):
        raise PermissionDenied


def _account_format_choices() -> list[tuple[str, str]]:
    return [("", "camt.053 or camt.054, as the file says"), *statement_format_choices()]


def _upload_format_choices() -> list[tuple[str, str]]:
    return [("", "The account's format (without one: camt, as the file says)"), *statement_format_choices()]


class PlatformBankAccountForm(forms.ModelForm):
    statement_format = forms.ChoiceField(
        choices=_account_format_choices,
        required=False,
        help_text="How its statement uploads are read unless the upload says otherwise; a bank that sends "
        "only a CSV export needs its layout here.",
    )

    class Meta:
        model = PlatformBankAccount
        fields = ["name", "iban", "other_id", "other_scheme", "bic", "currency", "time_zone", "statement_format"]
        help_texts = {"other_id": "Only for an account without IBAN (camt Acct/Id/Othr/Id), e.g. a USD account."}


@admin.register(PlatformBankAccount)
class PlatformBankAccountAdmin(admin.ModelAdmin):
    list_display = ["name", "identifier", "currency", "statement_format", "upload_link", "ledger_account", "is_active"]
    list_select_related = ["ledger_account"]
    form = PlatformBankAccountForm

    @admin.display(description="Statements")
    def upload_link(self, obj: PlatformBankAccount) -> str:
        url = reverse("admin:reconciliation_statement_upload")
        return format_html('<a href="{}?bank_account={}">Upload</a>', url, obj.pk)

    def get_readonly_fields(self, request, obj=None):
        return ["iban", "other_id", "other_scheme", "currency"] if obj else []

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        created = platform_bank_account_create(
            name=obj.name,
            iban=obj.iban,
            other_id=obj.other_id,
            other_scheme=obj.other_scheme,
            currency=obj.currency,
            bic=obj.bic,
            time_zone=obj.time_zone,
            statement_format=obj.statement_format,
        )
        obj.pk = created.pk

    def has_delete_permission(self, request, obj=None):
        return False


class UploadForm(forms.Form):
    file = forms.FileField(help_text="camt.053 / camt.054 XML, or a bank's CSV export, as the bank sent it.")
    bank_account = forms.ModelChoiceField(
        queryset=PlatformBankAccount.objects.filter(is_active=True).order_by("name", "currency"),
        required=False,
        empty_label="The one the file names (camt)",
        help_text="Needed for a CSV export, which names no account.",
    )
    statement_format = forms.ChoiceField(
        choices=_upload_format_choices,
        required=False,
        label="Format",
        error_messages={"invalid_choice": "%(value)s is not a statement format this platform reads."},
    )

    def clean(self):
        cleaned = super().clean()
        account, name = cleaned.get("bank_account"), cleaned.get("statement_format")
        if name and statement_format_get(name).is_csv and account is None:
            self.add_error("bank_account", "A CSV export names no account: choose the one it is from.")
        return cleaned


@admin.register(StatementImport)
class StatementImportAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "filename",
        "kind",
        "source",
        "statements_count",
        "lines_count",
        "new_lines_count",
        "imported_by",
    ]
    list_select_related = ["imported_by"]
    readonly_fields = [f.name for f in StatementImport._meta.fields]
    show_full_result_count = False
    change_list_template = "admin/reconciliation/statementimport/change_list.html"

    def get_urls(self):
        return [
            path("upload/", self.admin_site.admin_view(self.upload_view), name="reconciliation_statement_upload"),
            *super().get_urls(),
        ]

    def upload_view(self, request: HttpRequest):
        _require(request, RECONCILE)
        form = UploadForm(request.POST or None, request.FILES or None, initial=self._upload_initial(request))
        if request.method == "POST" and form.is_valid():
            upload, account = form.cleaned_data["file"], form.cleaned_data["bank_account"]
            try:
                result = statement_import(
                    source=upload,
                    filename=upload.name,
                    origin="admin",
                    actor=request.user,
                    statement_format=form.cleaned_data["statement_format"],
                    bank_account_id=account.pk if account is not None else None,
                )
            except ApplicationError as exc:
                messages.error(request, f"{upload.name} was not imported ({exc.code}): {exc.message}")
            else:
                if result.replayed:
                    messages.info(request, f"{upload.name} was imported before; nothing changed.")
                else:
                    messages.success(
                        request,
                        f"Imported {len(result.statements)} statement(s) with {result.new_lines} new line(s) "
                        f"({result.duplicate_lines} already known). Matching runs in the background.",
                    )
                    if result.possible_duplicates:
                        messages.warning(
                            request,
                            f"{result.possible_duplicates} line(s) repeat another booking of this file: they are "
                            "stored and flagged; confirm each one or set it aside as a duplicate.",
                        )
                    if result.ambiguous_lines:
                        messages.warning(
                            request,
                            f"{result.ambiguous_lines} line(s) may repeat a booking an earlier file reported: they "
                            "are stored and posted by nobody until you say which booking each one is.",
                        )
                    for statement in result.balance_mismatches:
                        messages.warning(
                            request,
                            f"Statement {statement.statement_id}: {statement.balance_problem}.",
                        )
                return HttpResponseRedirect(reverse("reconciliation_dashboard"))
        context = {
            **self.admin_site.each_context(request),
            "title": "Upload a bank statement",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/reconciliation/upload.html", context)

    @staticmethod
    def _upload_initial(request: HttpRequest) -> dict:
        """``?bank_account=<id>`` (the link on an account's page) preselects it and its format."""
        account_id = request.GET.get("bank_account", "")
        account = PlatformBankAccount.objects.filter(pk=account_id).first() if account_id.isdigit() else None
        if account is None:
            return {}
        return {"bank_account": account.pk, "statement_format": account.statement_format}


class BalanceMismatchFilter(admin.SimpleListFilter):
    title = "closing balance check"
    parameter_name = "balance_mismatch"

    def lookups(self, request, model_admin):
        return [("1", "Does not add up"), ("0", "Adds up")]

    def queryset(self, request, queryset):
        if self.value() == "1":
            return queryset.filter(
                (~Q(balance_difference=0) & Q(balance_difference__isnull=False)) | ~Q(balance_note="")
            )
        if self.value() == "0":
            return queryset.filter(balance_difference=0)
        return queryset


class MatchingFailedFilter(admin.SimpleListFilter):
    title = "matching failed"
    parameter_name = "matching_failed"

    def lookups(self, request, model_admin):
        return [("1", "A matcher failed on it")]

    def queryset(self, request, queryset):
        return queryset.exclude(matching_error="") if self.value() == "1" else queryset


class UnconfirmedAdviceFilter(admin.SimpleListFilter):
    title = "bank reports"
    parameter_name = "unconfirmed_advice"

    def lookups(self, request, model_admin):
        return [("1", "Notified (camt.054), not on the day's statement")]

    def queryset(self, request, queryset):
        return queryset.filter(pk__in=unconfirmed_advices().values("pk")) if self.value() == "1" else queryset


@admin.register(BankStatement)
class BankStatementAdmin(ReadOnlyAdmin):
    list_display = [
        "statement_id",
        "bank_account",
        "kind",
        "closing_balance_date",
        "opening",
        "closing",
        "entry_count",
        "balance_check",
    ]
    list_filter = [BalanceMismatchFilter, "kind", "bank_account"]
    list_select_related = ["bank_account"]
    search_fields = ["=statement_id", "=message_id"]
    show_full_result_count = False
    fields = readonly_fields = fields_with_money(
        BankStatement,
        {
            "opening_balance": "opening",
            "closing_balance": "closing",
            "credit_total": "credits",
            "debit_total": "debits",
            "balance_difference": "balance_check",
        },
    )

    @staticmethod
    def _amount(obj: BankStatement, value) -> str:
        return "—" if value is None else format_amount(value, obj.bank_account.currency)

    @admin.display(description="opening balance", ordering="opening_balance")
    def opening(self, obj: BankStatement) -> str:
        return self._amount(obj, obj.opening_balance)

    @admin.display(description="closing balance", ordering="closing_balance")
    def closing(self, obj: BankStatement) -> str:
        return self._amount(obj, obj.closing_balance)

    @admin.display(description="credits")
    def credits(self, obj: BankStatement) -> str:
        return self._amount(obj, obj.credit_total)

    @admin.display(description="debits")
    def debits(self, obj: BankStatement) -> str:
        return self._amount(obj, obj.debit_total)

    @admin.display(description="adds up")
    def balance_check(self, obj: BankStatement) -> str:
        if obj.balance_note:
            return obj.balance_note
        if obj.balance_difference is None:
            return "—"
        return "yes" if obj.balance_difference == 0 else f"off by {self._amount(obj, obj.balance_difference)}"


class ExplainForm(forms.Form):
    ACTIONS = [
        ("match", "Match to a business object"),
        ("suspense", "Keep in suspense (with a reason)"),
        ("write_off", "Ask for a write-off (a second person approves)"),
        ("confirm_booking", "Possible duplicate: it is a real booking"),
        ("duplicate", "Possible duplicate: set it aside (with a reason)"),
        ("reported_before", "Maybe reported before: it is the same booking as line <target id>"),
        ("own_booking", "Maybe reported before: it is a booking of its own (it gets posted)"),
    ]
    action = forms.ChoiceField(choices=ACTIONS)
    target = forms.ChoiceField(
        required=False,
        label="Match to",
        help_text="Payouts of this amount and currency sent up to a month before the booking, and the "
        "brands a credit could be the top-up of.",
    )
    target_id = forms.CharField(required=False, label="Earlier line id", help_text="Only for “maybe reported before”.")
    reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, candidates: list[Candidate], **kwargs):
        super().__init__(*args, **kwargs)
        self.candidates = {c.key: c for c in candidates}
        empty = "Choose…" if candidates else "Nothing fits this line's amount and date"
        self.fields["target"].choices = [("", empty), *((c.key, c.label) for c in candidates)]

    def clean(self):
        data = super().clean()
        if data.get("action") == "match" and not data.get("target"):
            raise forms.ValidationError("Choose what the line is matched to.")
        if data.get("action") == "reported_before" and not data.get("target_id", "").strip().isdigit():
            raise forms.ValidationError("Give the id of the line it repeats as target id.")
        if (
            data.get("action") in {"suspense", "write_off", "duplicate", "reported_before", "own_booking"}
            and not data.get("reason", "").strip()
        ):
            raise forms.ValidationError("Say why.")
        return data


@admin.register(StatementLine)
class StatementLineAdmin(LagTolerantChangelist, ReadOnlyAdmin):
    list_display = [
        "booking_date",
        "direction",
        "shown_amount",
        "currency",
        "status",
        "end_to_end_id",
        "counterparty_name",
        "short_remittance",
        "bank_account",
    ]
    list_filter = [
        "status",
        "possible_duplicate",
        "amount_mismatch",
        MatchingFailedFilter,
        UnconfirmedAdviceFilter,
        "credit_debit",
        "bank_account",
        "reversal",
        ("booking_date", admin.DateFieldListFilter),
    ]
    search_fields = ["=end_to_end_id", "=entry_reference", "remittance", "counterparty_name", "=counterparty_iban"]
    list_select_related = ["bank_account"]
    date_hierarchy = "booking_date"
    show_full_result_count = False
    ordering = ["-booking_date", "-pk"]
    actions = ["run_matching", "export_csv"]
    fields = readonly_fields = [
        *fields_with_money(StatementLine, {"amount": "shown_amount"}, exclude=("amount_minor",)),
        "explain_link",
    ]

    @admin.display(description="amount", ordering="amount")
    def shown_amount(self, obj: StatementLine) -> str:
        return format_amount(obj.amount, obj.currency)

    @admin.display(description="")
    def direction(self, obj: StatementLine) -> str:
        return "in" if obj.is_credit else "out"

    @admin.display(description="remittance")
    def short_remittance(self, obj: StatementLine) -> str:
        return obj.remittance[:60]

    @admin.display(description="explain")
    def explain_link(self, obj: StatementLine) -> str:
        return format_html(
            '<a href="{}">Explain this line</a>', reverse("admin:reconciliation_line_explain", args=[obj.pk])
        )

    def get_urls(self):
        return [
            path(
                "<int:line_id>/explain/",
                self.admin_site.admin_view(self.explain_view),
                name="reconciliation_line_explain",
            ),
            *super().get_urls(),
        ]

    @admin.action(description="Run matching on the selected new lines")
    def run_matching(self, request, queryset):
        _require(request, RECONCILE)
        result = statement_lines_match(line_ids=list(queryset.values_list("pk", flat=True)))
        self.message_user(
            request,
            f"Matched {result.matched_total}, suggested {result.suggested}, unmatched {result.unmatched}.",
        )

    @admin.action(description="Export the selected lines as CSV")
    def export_csv(self, request, queryset):
        return lines_csv_response(queryset)

    def explain_view(self, request: HttpRequest, line_id: int):
        line = get_object_or_404(StatementLine.objects.select_related("bank_account", "statement"), pk=line_id)
        if not self.has_view_permission(request, line):
            raise PermissionDenied
        form = ExplainForm(request.POST or None, candidates=line_candidates(line))
        if request.method == "POST" and form.is_valid():
            _require(request, RECONCILE)
            data = form.cleaned_data
            try:
                if data["action"] == "match":
                    target = form.candidates[data["target"]]
                    statement_line_match_manual(
                        line_id=line.pk,
                        target_type=target.target_type,
                        target_id=target.target_id,
                        actor=request.user,
                        note=data["reason"],
                    )
                    messages.success(request, "Line matched.")
                elif data["action"] == "suspense":
                    statement_line_move_to_suspense(line_id=line.pk, actor=request.user, reason=data["reason"])
                    messages.success(request, "Line kept in suspense.")
                elif data["action"] in {"confirm_booking", "duplicate"}:
                    duplicate = data["action"] == "duplicate"
                    statement_line_duplicate_decide(
                        line_id=line.pk, actor=request.user, duplicate=duplicate, reason=data["reason"]
                    )
                    messages.success(request, "Line set aside as a duplicate." if duplicate else "Booking confirmed.")
                elif data["action"] in {"reported_before", "own_booking"}:
                    before = data["action"] == "reported_before"
                    statement_line_report_decide(
                        line_id=line.pk,
                        actor=request.user,
                        confirms_line_id=int(data["target_id"]) if before else None,
                        reason=data["reason"],
                    )
                    messages.success(request, "Line kept as a confirmation." if before else "Line will be posted.")
                else:
                    write_off_request(line_id=line.pk, actor=request.user, reason=data["reason"])
                    messages.success(request, "Write-off requested; a second person must approve it.")
            except ApplicationError as exc:
                messages.error(request, f"{exc.message} ({exc.code})")
            else:
                return HttpResponseRedirect(reverse("admin:reconciliation_line_explain", args=[line.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Bank line {line}",
            "line": line,
            "form": form,
            "suggestions": line.suggestions.filter(status=SuggestionStatus.OPEN).order_by("-score"),
            "matches": line.matches.order_by("-pk"),
            "actions": line.actions.select_related("actor", "approved_by", "decision").order_by("-pk"),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/reconciliation/line_explain.html", context)


def lines_csv_response(queryset) -> StreamingHttpResponse:
    """Streams, so exporting a million lines holds one row at a time."""

    class Echo:
        def write(self, value):
            return value

    writer = csv.writer(Echo())
    header = [
        "id",
        "booking_date",
        "direction",
        "amount",
        "currency",
        "status",
        "end_to_end_id",
        "counterparty_name",
        "counterparty_iban",
        "remittance",
        "bank_account",
    ]

    def rows():
        yield writer.writerow(header)
        for line in queryset.select_related("bank_account").order_by("pk").iterator(chunk_size=2000):
            yield writer.writerow(
                [
                    line.pk,
                    line.booking_date,
                    line.credit_debit,
                    line.amount,
                    line.currency,
                    line.status,
                    line.end_to_end_id,
                    line.counterparty_name,
                    line.counterparty_iban,
                    line.remittance,
                    line.bank_account.identifier,
                ]
            )

    response = StreamingHttpResponse(rows(), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="statement-lines.csv"'
    return response


class AmountMismatchFilter(admin.SimpleListFilter):
    title = "amount"
    parameter_name = "amount_mismatch"

    def lookups(self, request, model_admin):
        return [("1", "Differs from the bank line")]

    def queryset(self, request, queryset):
        if self.value() == "1":
            return queryset.exclude(line__amount_minor=F("amount_minor")).exclude(matcher="reversal")
        return queryset


@admin.register(Match)
class MatchAdmin(LagTolerantChangelist, ReadOnlyAdmin):
    list_display = ["line", "matcher", "target_type", "target_id", "amount", "status", "created_by", "created_at"]
    list_filter = ["status", "matcher", "target_type", AmountMismatchFilter]
    search_fields = ["=target_id", "=line__end_to_end_id"]
    list_select_related = ["line", "created_by"]
    show_full_result_count = False
    actions = ["undo"]
    fields = readonly_fields = fields_with_money(Match, {"amount_minor": "amount"})

    @admin.display(description="amount", ordering="amount_minor")
    def amount(self, obj: Match) -> str:
        return format_minor(obj.amount_minor, obj.line.currency)

    @admin.action(description="Undo the selected matches (lines go back to suspense)")
    def undo(self, request, queryset):
        _require(request, RECONCILE)
        done = 0
        for match in queryset.filter(status=MatchStatus.ACTIVE):
            try:
                match_undo(match_id=match.pk, actor=request.user, reason="undone from the admin")
                done += 1
            except ApplicationError as exc:
                self.message_user(request, f"Match {match.pk}: {exc.message}", level=messages.ERROR)
        self.message_user(request, f"Undid {done} match(es).")


@admin.register(Suggestion)
class SuggestionAdmin(ReadOnlyAdmin):
    list_display = ["line", "target_type", "target_id", "score", "reason", "status"]
    list_filter = ["status", "target_type"]
    list_select_related = ["line"]
    show_full_result_count = False
    actions = ["confirm"]

    @admin.action(description="Confirm the selected suggestions")
    def confirm(self, request, queryset):
        _require(request, RECONCILE)
        for suggestion in queryset.filter(status=SuggestionStatus.OPEN):
            try:
                suggestion_confirm(suggestion_id=suggestion.pk, actor=request.user)
            except ApplicationError as exc:
                self.message_user(request, f"Suggestion {suggestion.pk}: {exc.message}", level=messages.ERROR)


class WaitingFilter(admin.SimpleListFilter):
    """Write-off requests nobody has decided yet (a decision is its own, later row)."""

    title = "four-eyes"
    parameter_name = "waiting"

    def lookups(self, request, model_admin):
        return [("1", "Waiting for a second person")]

    def queryset(self, request, queryset):
        if self.value() == "1":
            return queryset.filter(pk__in=write_offs_waiting().values("pk"))
        return queryset


@admin.register(ReconciliationAction)
class ReconciliationActionAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "kind", "state", "line", "actor", "approved_by", "reason"]
    list_filter = [WaitingFilter, "kind", "status"]
    list_select_related = ["line", "actor", "approved_by", "decision"]
    show_full_result_count = False
    actions = ["approve", "reject"]
    readonly_fields = [f.name for f in ReconciliationAction._meta.fields]

    @admin.display(description="status")
    def state(self, obj: ReconciliationAction) -> str:
        if obj.status == ReconciliationAction.Status.PENDING_APPROVAL:
            decision = getattr(obj, "decision", None)
            if decision is None:
                return "Waiting for a second person"
            return f"Requested; {decision.get_status_display().lower()} in #{decision.pk}"
        return obj.get_status_display()

    def _decide(self, request, queryset, approve: bool):
        for action in queryset.filter(pk__in=write_offs_waiting().values("pk")):
            try:
                write_off_decide(action_id=action.pk, approver=request.user, approve=approve)
            except ApplicationError as exc:
                self.message_user(request, f"Request {action.pk}: {exc.message}", level=messages.ERROR)

    @admin.action(description="Approve the selected write-offs (four-eyes)")
    def approve(self, request, queryset):
        self._decide(request, queryset, True)

    @admin.action(description="Reject the selected write-offs")
    def reject(self, request, queryset):
        self._decide(request, queryset, False)


def dashboard_view(request: HttpRequest):
    if not request.user.has_perm("reconciliation.view_statementline"):
        raise PermissionDenied
    context = {**admin.site.each_context(request), "title": "Reconciliation", **dashboard()}
    if request.GET.get("export") == "unmatched":
        return lines_csv_response(
            StatementLine.objects.filter(
                status__in=[StatementLineStatus.NEW, StatementLineStatus.UNMATCHED, StatementLineStatus.SUGGESTED]
            )
        )
    return TemplateResponse(request, "admin/reconciliation/dashboard.html", context)
