"""The brand's contacts: the name, e-mail, WhatsApp number and social account of the people who
gave it marketing consent, and only theirs (``recipients.selectors.brand_contacts``); everyone
else stays "Person #n" on every other page. A filtered table, the same filter as a streaming CSV
(admins and owners only: it is a copy of personal data leaving the platform, and its audit row
is written before the first byte), and the words of the consent box the brand's claim pages show
(``campaigns.marketing``)."""

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from campaigns.marketing import PURPOSE_MAX, brand_marketing_purpose_set, marketing_consent_text
from campaigns.models import BrandRole
from core.exceptions import ApplicationError
from recipients.models_consent import ConsentChannel
from recipients.selectors import brand_contacts
from recipients.services.consent import contacts_export_record
from web.portal.access import brand_view
from web.portal.views.common import report
from web.portal.views.tables import PAGE_SIZE, _stream_csv

CSV_HEADER = ["consent_id", "person_id", "name", "email", "whatsapp", "social", "given_at", "channel", "language"]


class ContactFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=100)
    channel = forms.ChoiceField(required=False, choices=[("", ""), *ConsentChannel.choices])
    date_from = forms.DateField(required=False)
    date_to = forms.DateField(required=False)


class WordingForm(forms.Form):
    purpose_en = forms.CharField(
        label=gettext_lazy("What you will send (English)"),
        required=False,
        max_length=PURPOSE_MAX,
        help_text=gettext_lazy("E.g. our newsletter and offers by e-mail and WhatsApp. Blank: the default."),
    )
    purpose_it = forms.CharField(
        label=gettext_lazy("What you will send (Italian)"),
        required=False,
        max_length=PURPOSE_MAX,
        help_text=gettext_lazy("E.g. la nostra newsletter e offerte via e-mail e WhatsApp. Blank: the default."),
    )


def _filters(request) -> tuple[ContactFilterForm, dict]:
    form = ContactFilterForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    return form, {
        "search": data.get("q", ""),
        "channel": data.get("channel", ""),
        "given_from": data.get("date_from"),
        "given_to": data.get("date_to"),
    }


@brand_view()
@require_GET
def contacts(request, access):
    form, f = _filters(request)
    rows = brand_contacts(brand_id=access.brand.pk, **f).order_by("-id")
    if request.GET.get("format") == "csv":
        if not access.can_edit:
            raise Http404("No such page.")
        with transaction.atomic():
            contacts_export_record(
                brand=access.brand, channel="portal", actor=request.user, filters=f, rows=rows.count()
            )
        lines = (
            [
                c.pk,
                c.root_id,
                c.person.display_name,
                c.email or "",
                c.whatsapp or "",
                c.social or "",
                c.given_at.isoformat(),
                c.channel,
                c.language,
            ]
            for c in rows.iterator(chunk_size=2000)
        )
        return _stream_csv(f"{access.brand.slug}-contacts.csv", CSV_HEADER, lines)
    brand = access.brand
    return render(
        request,
        "portal/contacts.html",
        {
            "access": access,
            "brand": brand,
            "form": form,
            "page": Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page")),
            "channels": ConsentChannel.choices,
            "query": request.GET.copy(),
            "wording_form": WordingForm(
                initial={"purpose_en": brand.marketing_purpose_en, "purpose_it": brand.marketing_purpose_it}
            ),
            "texts": [marketing_consent_text(brand=brand, language=lang) for lang in ("en", "it")],
        },
    )


@brand_view(BrandRole.ADMIN)
@require_POST
def contacts_wording(request, access):
    form = WordingForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Each purpose is one line of at most %(max)s characters.") % {"max": PURPOSE_MAX})
        return redirect("portal:contacts", brand_slug=access.brand.slug)
    try:
        brand_marketing_purpose_set(brand=access.brand, **form.cleaned_data)
    except ApplicationError as exc:
        report(request, exc)
    else:
        messages.success(request, _("Saved. Your claim pages ask with the new words from now on."))
    return redirect("portal:contacts", brand_slug=access.brand.slug)
