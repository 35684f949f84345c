from babel import Locale
from django import forms
from django.utils import translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.exceptions import InvalidInput
from recipients.normalise import email_normalise, iban_normalise, phone_normalise


class PayoutForm(forms.Form):
    """Name, a way to reach the person, the IBAN, consent. ``website`` is a honeypot: hidden from
    people (CSS and aria-hidden), filled in by form-filling bots."""

    name = forms.CharField(label=_("Your full name"), max_length=140, help_text=_("As on your bank account."))
    email = forms.EmailField(label=_("Email"), required=False, help_text=_("We tell you when the money is sent."))
    whatsapp = forms.CharField(
        label=_("WhatsApp number"),
        max_length=32,
        required=False,
        help_text=_("Instead of, or as well as, an email. E.g. +39 347 123 4567."),
    )
    iban = forms.CharField(
        label=_("IBAN"), max_length=42, help_text=_("Where we send the money. E.g. IT60 X054 2811 1010 0000 0123 456.")
    )
    consent = forms.BooleanField(label=_("I accept the terms and the privacy notice."), required=True)
    website = forms.CharField(required=False, label="Website")

    def __init__(self, *args, needs_contact: bool = True, phone_region: str = "IT", **kwargs):
        super().__init__(*args, **kwargs)
        self.needs_contact = needs_contact
        self.phone_region = phone_region  # numbers typed without +country are read as from here
        self.fields["iban"].widget.attrs.update(
            {
                "autocomplete": "off",
                "spellcheck": "false",
                "inputmode": "text",
                "aria-describedby": "id_iban_helptext iban-status",
            }
        )
        self.fields["name"].widget.attrs["autocomplete"] = "name"
        self.fields["email"].widget.attrs["autocomplete"] = "email"
        self.fields["whatsapp"].widget.attrs.update({"autocomplete": "tel", "inputmode": "tel"})
        self.fields["website"].widget.attrs.update({"tabindex": "-1", "autocomplete": "off"})

    def clean_iban(self):
        try:
            return iban_normalise(self.cleaned_data["iban"]).normalised
        except InvalidInput as exc:
            # The checker's fixed messages are in the catalogue (payouts.claim.texts).
            raise forms.ValidationError(gettext(exc.message)) from exc

    def clean_whatsapp(self):
        value = self.cleaned_data.get("whatsapp", "").strip()
        if not value:
            return ""
        try:
            return phone_normalise(value, region=self.phone_region)
        except InvalidInput as exc:
            country = Locale.parse(translation.get_language() or "en").territories.get(self.phone_region, "")
            raise forms.ValidationError(
                gettext(
                    "%(number)s is not a valid WhatsApp number for %(country)s. A number from another country"
                    " starts with + and its country code, e.g. +44 7700 900123."
                )
                % {"number": value, "country": country or self.phone_region}
            ) from exc

    def clean_email(self):
        value = self.cleaned_data.get("email", "").strip()
        if not value:
            return ""
        try:
            return email_normalise(value)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean(self):
        data = super().clean()
        if self.needs_contact and not data.get("email") and not data.get("whatsapp"):
            raise forms.ValidationError(_("Give an email or a WhatsApp number, so we can tell you about your money."))
        return data

    @property
    def is_bot(self) -> bool:
        return bool(self.data.get("website"))


class VideoChoiceForm(forms.Form):
    video_id = forms.CharField(max_length=64)
