from babel import Locale
from django import forms
from django.utils import translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from campaigns.marketing import ConsentText
from core.exceptions import InvalidInput
from recipients.accounts import AccountType, account_normalise, account_types
from recipients.normalise import BANK, IBAN, PAYPAL, email_normalise, iban_normalise, paypal_normalise, phone_normalise

ACCOUNT_TYPE = "account_type"
DESTINATION = "destination"


class PayoutForm(forms.Form):
    """Name, a way to reach the person, the bank account, consent. ``website`` is a honeypot:
    hidden from people (CSS and aria-hidden), filled in by form-filling bots. With
    ``marketing`` (the brand's words, ``campaigns.marketing``) an optional, unticked box asks
    for marketing consent (``marketing``).

    The account is an IBAN, unless the payout currency's account requirements
    (``recipients.accounts``: the PSP's contract, or the built-in one) list local account types:
    then the person picks one (``account_type``) and fills in its fields, named
    ``<type>__<key>`` (``sort_code__sortCode``). A field the contract refreshes on change (the
    country of a US address) is read from the submitted data, so the re-rendered form carries
    what that country adds (its state). Where the campaign offers PayPal (``paypal``), the person
    chooses a bank account or PayPal (``destination``) and gives the PayPal account's e-mail
    (``paypal_email``). ``cleaned_data["account"]`` is the validated account."""

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

    def __init__(
        self,
        *args,
        needs_contact: bool = True,
        phone_region: str = "IT",
        currency: str = "EUR",
        paypal: bool = False,
        marketing: ConsentText | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.marketing = marketing
        if marketing is not None:
            # Optional and never ticked for the person: their own click is the consent. The
            # version travels with the page, so a "yes" given to words changed since is asked again.
            self.fields["marketing"] = forms.BooleanField(label=marketing.text, required=False, initial=False)
            self.fields["marketing_version"] = forms.CharField(
                widget=forms.HiddenInput, required=False, initial=marketing.version
            )
        self.needs_contact = needs_contact
        self.phone_region = phone_region  # numbers typed without +country are read as from here
        self.currency = currency
        self.paypal = paypal
        self.account_types = self._account_types()
        if self.account_types:
            self._account_fields_add()
        if paypal:
            self._paypal_fields_add()
        if marketing is not None:
            names = [n for n in self.fields if n != "marketing"]
            names.insert(names.index("consent") + 1, "marketing")
            self.order_fields(names)
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

    def _account_types(self) -> tuple[AccountType, ...]:
        """The payout currency's account types when any is local; () for IBAN only."""
        types = account_types(currency=self.currency)
        if all(t.type == IBAN for t in types):
            return ()
        return tuple(self._refined(t) for t in types)

    def _refined(self, account_type: AccountType) -> AccountType:
        refresh = {
            f.key: self.data.get(self._name(account_type, f.key), "")
            for f in account_type.fields
            if f.refresh_on_change and self.data.get(self._name(account_type, f.key))
        }
        if not refresh:
            return account_type
        refined = account_types(currency=self.currency, kind=account_type.type, refresh=refresh)
        return next((t for t in refined if t.type == account_type.type), account_type)

    @staticmethod
    def _name(account_type: AccountType, key: str) -> str:
        return f"{account_type.type}__{key}"

    def _account_fields_add(self) -> None:
        self.fields["iban"].required = False
        self.fields[ACCOUNT_TYPE] = forms.ChoiceField(
            label=_("Your bank account"),
            choices=[(t.type, t.title) for t in self.account_types],
            initial=self.account_types[0].type,
            widget=forms.RadioSelect,
        )
        for account_type in self.account_types:
            if account_type.type == IBAN:
                continue
            for field in account_type.asked:
                help_text = _("E.g. %(example)s") % {"example": field.example} if field.example else ""
                if field.choices:
                    form_field = forms.ChoiceField(
                        label=field.name, required=False, help_text=help_text, choices=[("", "—"), *field.choices]
                    )
                else:
                    form_field = forms.CharField(label=field.name, required=False, help_text=help_text, max_length=200)
                form_field.widget.attrs.update({"autocomplete": "off", "spellcheck": "false"})
                self.fields[self._name(account_type, field.key)] = form_field

    def _paypal_fields_add(self) -> None:
        self.fields["iban"].required = False
        self.fields[DESTINATION] = forms.ChoiceField(
            label=_("Where to send the money"),
            choices=[(BANK, _("My bank account")), (PAYPAL, _("My PayPal account"))],
            initial=BANK,
            widget=forms.RadioSelect,
        )
        self.fields["paypal_email"] = forms.CharField(
            label=_("PayPal e-mail address"),
            max_length=254,
            required=False,
            help_text=_(
                "The address of your PayPal account. No bank checks the name for PayPal: Verification of Payee"
                " applies to bank accounts only."
            ),
        )
        self.fields["paypal_email"].widget.attrs.update({"autocomplete": "email", "spellcheck": "false"})
        self.order_fields(["name", "email", "whatsapp", DESTINATION, "paypal_email"])

    def account_groups(self) -> list[tuple[AccountType, list]]:
        """Each account type with its bound fields, for the template (the IBAN type: the IBAN)."""
        groups = []
        for account_type in self.account_types:
            keys = (
                ["iban"] if account_type.type == IBAN else [self._name(account_type, f.key) for f in account_type.asked]
            )
            groups.append((account_type, [self[k] for k in keys if k in self.fields]))
        return groups

    def clean_iban(self):
        if not self.cleaned_data["iban"].strip() and (self.account_types or self.paypal):
            return ""  # required only when the IBAN is the account chosen (``clean``)
        try:
            return iban_normalise(self.cleaned_data["iban"]).normalised
        except InvalidInput as exc:
            # The checker's fixed messages are in the catalogue (web.claim.texts).
            raise forms.ValidationError(gettext(exc.message)) from exc

    def _account_clean(self, data: dict) -> None:
        chosen = next((t for t in self.account_types if t.type == data.get(ACCOUNT_TYPE)), None)
        if chosen is None:
            return  # the choice field said what is wrong
        if chosen.type == IBAN:
            if not data.get("iban") and "iban" not in self.errors:
                self.add_error("iban", forms.ValidationError(self.fields["iban"].error_messages["required"]))
            return
        details = {f.key: data.get(self._name(chosen, f.key), "") for f in chosen.asked}
        try:
            data["account"] = account_normalise(kind=chosen.type, currency=self.currency, details=details)
        except InvalidInput as exc:
            for key, message in (exc.details or {}).get("fields", {}).items():
                name = self._name(chosen, key)
                self.add_error(name if name in self.fields else None, message)
        data["iban"] = ""

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

    def _paypal_clean(self, data: dict) -> None:
        try:
            data["account"] = paypal_normalise(data.get("paypal_email", ""))
        except InvalidInput:
            self.add_error("paypal_email", _("Enter the e-mail address of your PayPal account."))
        data["iban"] = ""

    def clean(self):
        data = super().clean()
        data["account"] = None
        if self.paypal and data.get(DESTINATION) == PAYPAL:
            self._paypal_clean(data)
        elif self.account_types:
            self._account_clean(data)
        elif self.paypal and not data.get("iban") and "iban" not in self.errors:
            self.add_error("iban", forms.ValidationError(self.fields["iban"].error_messages["required"]))
        if data.get("marketing") and data.get("marketing_version") != self.marketing.version:
            self.add_error("marketing", _("The wording of this box has just changed: please read it again."))
        if self.needs_contact and not data.get("email") and not data.get("whatsapp"):
            raise forms.ValidationError(_("Give an email or a WhatsApp number, so we can tell you about your money."))
        return data

    @property
    def is_bot(self) -> bool:
        return bool(self.data.get("website"))


class VideoChoiceForm(forms.Form):
    video_id = forms.CharField(max_length=64)
