"""People in the admin: read-only (people change through services), bank accounts (IBANs and local
accounts) masked unless the staff user holds ``recipients.view_full_iban``, search by any
identifier typed in any human format, and export (an access request's answer) and erasure as
permissioned actions."""

import json
import logging

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from core.admin_confirm import Confirmation, action_confirmation_page, action_confirmed
from core.exceptions import ApplicationError, InvalidInput
from core.replica import LagTolerantChangelist
from recipients.models import (
    BankAccount,
    Consent,
    Identifier,
    IdentifierKind,
    MarketingConsent,
    Notice,
    NoticeDelivery,
    Person,
    PersonEvent,
)
from recipients.normalise import email_normalise, phone_normalise
from recipients.selectors import iban_fingerprint
from recipients.services import person_erase, person_export

security_log = logging.getLogger("security")


class ReadOnlyInline(admin.TabularInline):
    """History shown on the person's page: whoever may view the person sees it (IBANs masked)."""

    extra = 0
    can_delete = False
    show_change_link = False

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm("recipients.view_person")

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class IdentifierInline(ReadOnlyInline):
    model = Identifier
    fields = readonly_fields = ["kind", "shown_value", "is_active", "source", "created_at"]

    @admin.display(description="value")
    def shown_value(self, obj: Identifier) -> str:
        return str(obj).split(" ", 1)[1] if obj.kind != IdentifierKind.IBAN else f"fingerprint {obj.value[:12]}…"


class BankAccountInline(ReadOnlyInline):
    model = BankAccount
    _common = [
        "kind",
        "currency",
        "country",
        "bic",
        "bank_name",
        "is_current",
        "source",
        "created_at",
        "payee_check_result",
        "payee_checked_at",
    ]

    def get_fields(self, request: HttpRequest, obj=None) -> list[str]:
        iban_field = "full_iban" if request.user.has_perm("recipients.view_full_iban") else "masked"
        if iban_field == "full_iban" and obj is not None:
            security_log.info("full IBANs shown", extra={"user": request.user.pk, "person": obj.pk})
        return [iban_field, *self._common]

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return self.get_fields(request, obj)

    @admin.display(description="account")
    def full_iban(self, obj: BankAccount) -> str:
        """The whole IBAN, or every field of a local account (its holder's address too)."""
        iban = obj.iban()
        if iban:
            return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
        details = obj.details()
        return ", ".join(f"{key}: {value}" for key, value in sorted(details.items())) if details else obj.masked


class ConsentInline(ReadOnlyInline):
    model = Consent
    fields = readonly_fields = ["terms_version", "channel", "ip", "created_at"]


class MarketingConsentInline(ReadOnlyInline):
    model = MarketingConsent
    fields = readonly_fields = [
        "brand",
        "given_at",
        "channel",
        "language",
        "text",
        "confirmed_at",
        "confirm_by",
        "withdrawn_at",
        "withdrawal_channel",
    ]
    ordering = ["-given_at"]


class PersonEventInline(ReadOnlyInline):
    model = PersonEvent
    fk_name = "person"
    fields = readonly_fields = ["created_at", "kind", "actor", "source", "detail"]
    ordering = ["-created_at"]


def _identifier_matches(term: str) -> list[tuple[str, str]]:
    """The (kind, normalised value) pairs a search term could mean; nothing for free text."""
    term = term.strip()
    candidates: list[tuple[str, str]] = []
    attempts = [
        (IdentifierKind.EMAIL, lambda: email_normalise(term)),
        (IdentifierKind.IBAN, lambda: iban_fingerprint(term)),
        (IdentifierKind.WHATSAPP, lambda: phone_normalise(term)),
        (
            IdentifierKind.WHATSAPP,
            lambda: phone_normalise(term, region=getattr(settings, "PHONE_DEFAULT_REGION", "IT")),
        ),
    ]
    for kind, normalise in attempts:
        try:
            candidates.append((kind, normalise()))
        except InvalidInput:
            continue
    if ":" in term:
        candidates.append((IdentifierKind.SOCIAL, term))
    return candidates


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ["id", "__str__", "brand", "created_source", "created_at", "merged_into", "erased_at"]
    list_filter = [
        "brand",
        ("merged_into", admin.EmptyFieldListFilter),
        ("erased_at", admin.EmptyFieldListFilter),
        "created_source",
    ]
    list_select_related = ["merged_into", "brand"]
    search_fields = ["display_name"]
    search_help_text = "Name, email, phone number (any format), IBAN (any format) or provider:uid."
    ordering = ["-id"]
    show_full_result_count = False
    fields = readonly_fields = [
        "brand",
        "display_name",
        "preferred_language",
        "created_source",
        "created_at",
        "merged_into",
        "merged_at",
        "merged_people_list",
        "erased_at",
    ]
    inlines = [IdentifierInline, BankAccountInline, ConsentInline, MarketingConsentInline, PersonEventInline]
    actions = ["export_selected", "erase_selected"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_erase_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("recipients.erase_person")

    def has_export_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("recipients.export_person")

    @admin.display(description="merged into this person")
    def merged_people_list(self, obj: Person) -> str:
        return ", ".join(f"#{pk}" for pk in obj.merged_people.order_by("id").values_list("id", flat=True)) or "—"

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str):
        queryset_by_name, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        matches = _identifier_matches(search_term) if search_term else []
        if not matches:
            return queryset_by_name, may_have_duplicates
        owners = set()
        for kind, value in matches:
            owners.update(
                Identifier.objects.filter(kind=kind, value=value, is_active=True).values_list("person_id", flat=True)
            )
        return queryset_by_name | queryset.filter(id__in=owners), may_have_duplicates

    @admin.action(description="Export everything held about the selected person (JSON)", permissions=["export"])
    def export_selected(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one person to export.", messages.ERROR)
            return None
        export = person_export(person=queryset.get(), actor=request.user, source="admin")
        response = HttpResponse(
            json.dumps(export, ensure_ascii=False, indent=2), content_type="application/json; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="person-{export["person_id"]}.json"'
        return response

    @admin.action(description="Erase (pseudonymise) the selected people", permissions=["erase"])
    def erase_selected(self, request: HttpRequest, queryset: QuerySet) -> TemplateResponse | None:
        people = list(queryset.select_related("brand"))
        if not action_confirmed(request):
            return action_confirmation_page(
                self,
                request,
                action="erase_selected",
                selected=[p.pk for p in people],
                confirmation=_erasure_confirmation(people),
            )
        erased = 0
        for person in people:
            try:
                person_erase(person=person, actor=request.user, source="admin")
            except ApplicationError as exc:
                self.message_user(request, f"Person #{person.pk} was not erased: {exc.message}", messages.ERROR)
            else:
                erased += 1
        self.message_user(request, f"Erased {erased} people.", messages.SUCCESS)


def _erasure_confirmation(people: list[Person]) -> Confirmation:
    lines = [
        _("Person #%(id)s: %(name)s, %(brand)s")
        % {"id": p.pk, "name": p.display_name or _("no name"), "brand": p.brand or _("no brand")}
        for p in people
    ]
    return Confirmation(
        title=_("Erase people"),
        summary=ngettext(
            "You are erasing %(count)d person: their names, e-mails, phone numbers, social accounts and bank "
            "details are wiped, here and in payouts, payment files and bank statement lines.",
            "You are erasing %(count)d people: their names, e-mails, phone numbers, social accounts and bank "
            "details are wiped, here and in payouts, payment files and bank statement lines.",
            len(people),
        )
        % {"count": len(people)},
        lines=lines,
        warning=_("This cannot be undone. Rewards, payouts and the books are kept; the person can no longer be found."),
        button=_("Yes, erase them"),
    )


class NoticeDeliveryInline(admin.TabularInline):
    model = NoticeDelivery
    extra = 0
    can_delete = False
    fields = readonly_fields = [
        "channel",
        "status",
        "attempts",
        "next_attempt_at",
        "sent_at",
        "provider_message_id",
        "error_code",
        "error",
    ]

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Notice)
class NoticeAdmin(LagTolerantChangelist, admin.ModelAdmin):
    """What people were told, on which channel, and what failed (read-only: the outbox sends)."""

    list_display = ["created_at", "kind", "person", "status", "done_at"]
    list_filter = ["kind", "status", "deliveries__status"]
    list_select_related = ["person"]
    search_fields = ["=person__id", "=reward__id", "=payout__id", "key"]
    fields = readonly_fields = [
        "key",
        "kind",
        "person",
        "reward",
        "payout",
        "data",
        "status",
        "next_attempt_at",
        "created_at",
        "done_at",
    ]
    raw_id_fields = ["person", "reward", "payout"]
    inlines = [NoticeDeliveryInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
