"""Portal forms. Amounts are typed in major units (12.50) and turned into integer minor units
with ``core.money.to_minor`` (which refuses extra decimals rather than rounding); the rule's own
``clean()`` (via ``rule_create``) is the single source of the validation rules."""

import zoneinfo
from datetime import datetime
from decimal import Decimal

from django import forms
from django.conf import settings
from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext_lazy as _

from campaigns.models import (
    AmountType,
    ApprovalPolicy,
    BrandRole,
    CampaignMode,
    PayoutMode,
    Plan,
    RewardRule,
    Trigger,
    Verification,
    VopAction,
)
from campaigns.models.campaigns import CLAIM_WINDOW_DAYS, VOP_ACTIONS_WITHOUT_ASK, Campaign, validate_timezone
from campaigns.models.rules import verification_default
from core.exceptions import InvalidInput
from core.money import minor_to_decimal, to_minor

# localize: an amount is typed as people write it in their language (3,50 in Italian).
MONEY = {"max_digits": 12, "decimal_places": 2, "min_value": Decimal("0.01"), "localize": True}


def _money_field(label, help_text="") -> forms.DecimalField:
    return forms.DecimalField(label=label, required=False, help_text=help_text, **MONEY)


def _timezone_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(zoneinfo.available_timezones())]


class BrandForm(forms.Form):
    name = forms.CharField(label=_("Brand name"), max_length=200)
    default_currency = forms.ChoiceField(label=_("Currency"), choices=[(c, c) for c in settings.CURRENCIES])


class CampaignForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=200)
    slug = forms.SlugField(
        label=_("Slug"),
        max_length=80,
        required=False,
        help_text=_("Part of the claim link /c/<brand>/<slug>/; from the name if empty."),
    )
    mode = forms.ChoiceField(label=_("Mode"), choices=CampaignMode.choices)
    currency = forms.ChoiceField(label=_("Currency"), choices=[(c, c) for c in settings.CURRENCIES])
    starts_at = forms.DateTimeField(label=_("Starts at"), widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    ends_at = forms.DateTimeField(
        label=_("Ends at"), required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    timezone = forms.ChoiceField(
        label=_("Time zone"), choices=_timezone_choices, initial="Europe/Rome", validators=[validate_timezone]
    )
    payout_mode = forms.ChoiceField(label=_("Payout mode"), choices=PayoutMode.choices, initial=PayoutMode.INSTANT)
    aggregate_minutes = forms.IntegerField(
        label=_("Aggregate interval (minutes)"), min_value=0, initial=0, required=False
    )
    claim_window_days = forms.IntegerField(
        label=_("Days to give a bank account"),
        min_value=CLAIM_WINDOW_DAYS[0],
        max_value=CLAIM_WINDOW_DAYS[1],
        required=False,
        help_text=_(
            "After this many days without a bank account, a person's reward goes back to the campaign "
            "(reminders after a third and two thirds of it). Empty: it waits for ever."
        ),
    )
    buyer_claim_links = forms.BooleanField(
        label=Campaign._meta.get_field("buyer_claim_links").verbose_name,
        help_text=Campaign._meta.get_field("buyer_claim_links").help_text,
        required=False,
    )
    # What counts as an action undone during its hold (campaigns.services.undone): the model's
    # own checkboxes (label, help text, ticked by default).
    undo_void_content_removed = Campaign._meta.get_field("undo_void_content_removed").formfield()
    undo_void_views_dropped = Campaign._meta.get_field("undo_void_views_dropped").formfield()
    undo_void_authorization_revoked = Campaign._meta.get_field("undo_void_authorization_revoked").formfield()
    undo_void_optin_withdrawn = Campaign._meta.get_field("undo_void_optin_withdrawn").formfield()
    # Verification of Payee: what a payout does when the person's bank answers other than "match".
    vop_no_match = forms.ChoiceField(
        label=Campaign._meta.get_field("vop_no_match").verbose_name,
        help_text=Campaign._meta.get_field("vop_no_match").help_text,
        choices=VOP_ACTIONS_WITHOUT_ASK,
        initial=VopAction.REVIEW,
        required=False,
    )
    vop_close_match = forms.ChoiceField(
        label=Campaign._meta.get_field("vop_close_match").verbose_name,
        help_text=Campaign._meta.get_field("vop_close_match").help_text,
        choices=VopAction.choices,
        initial=VopAction.ASK,
        required=False,
    )
    vop_not_possible = forms.ChoiceField(
        label=Campaign._meta.get_field("vop_not_possible").verbose_name,
        help_text=Campaign._meta.get_field("vop_not_possible").help_text,
        choices=VOP_ACTIONS_WITHOUT_ASK,
        initial=VopAction.PAY,
        required=False,
    )
    # Asked last, folded under "advanced": what is rewarded, the money and the dates come first.
    ADVANCED = ("vop_no_match", "vop_close_match", "vop_not_possible")

    def __init__(self, *args, live: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["starts_at"].initial = timezone.localtime().replace(second=0, microsecond=0)
        if live:
            for name in ("slug", "mode", "currency", "starts_at", "timezone"):
                self.fields[name].disabled = True

    def main_fields(self) -> list:
        return [f for f in self if f.name not in self.ADVANCED]

    def advanced_fields(self) -> list:
        return [f for f in self if f.name in self.ADVANCED]

    def clean(self):
        data = super().clean()
        if not data.get("slug") and data.get("name"):
            data["slug"] = slugify(data["name"])[:80]
        starts, ends = data.get("starts_at"), data.get("ends_at")
        if starts and ends and ends <= starts:
            self.add_error("ends_at", _("The end must be after the start."))
        if data.get("payout_mode") == PayoutMode.AGGREGATE and not data.get("aggregate_minutes"):
            self.add_error("aggregate_minutes", _("Aggregate payouts need an interval in minutes."))
        data["aggregate_minutes"] = data.get("aggregate_minutes") or 0
        for name in self.ADVANCED:
            # A form posted without the policy (an older page) keeps what is set, or the default.
            data[name] = data.get(name) or self.initial.get(name) or self.fields[name].initial
        return data


class RuleForm(forms.Form):
    """One reward rule. ``rule_fields()`` returns the keyword arguments of ``rule_create``."""

    trigger = forms.ChoiceField(label=_("Trigger"), choices=Trigger.choices)
    custom_name = forms.SlugField(
        label=_("Custom name"), max_length=60, required=False, help_text=_("Only for custom triggers.")
    )
    name = forms.CharField(label=_("Name"), max_length=200, required=False)
    amount_type = forms.ChoiceField(label=_("Amount type"), choices=AmountType.choices, initial=AmountType.FIXED)
    amount = _money_field(_("Fixed amount"), _("What the person receives, e.g. 5.00."))
    percent = forms.DecimalField(
        label=_("Percent of the purchase"),
        required=False,
        max_digits=5,
        decimal_places=2,
        min_value=Decimal("0.01"),
        max_value=Decimal(100),
    )
    min_amount = _money_field(_("At least"), _("Percent rules: the smallest reward."))
    max_amount = _money_field(_("At most"), _("Percent rules: the largest reward."))
    min_purchase = _money_field(_("Minimum purchase"))
    hold_days = forms.IntegerField(
        label=_("Hold days"),
        min_value=0,
        max_value=365,
        initial=0,
        help_text=_("Days before the reward is paid (a return window)."),
    )
    required_code = forms.CharField(
        label=_("Required code"), max_length=60, required=False, help_text=_("Hashtag or code, e.g. #summerjoy.")
    )
    view_threshold = forms.IntegerField(label=_("View threshold"), min_value=1, required=False)
    allowed_iban_countries = forms.CharField(
        label=_("Allowed IBAN countries"),
        required=False,
        help_text=_("Two-letter codes separated by commas, e.g. IT, NL. Empty: any SEPA country."),
    )
    new_people_only = forms.BooleanField(label=_("New people only"), required=False)
    person_count_per_campaign = forms.IntegerField(
        min_value=1, required=False, initial=1, label=_("Rewards per person")
    )
    person_count_per_day = forms.IntegerField(min_value=1, required=False, label=_("Rewards per person per day"))
    iban_count_per_campaign = forms.IntegerField(min_value=1, required=False, label=_("Rewards per IBAN"))
    campaign_count = forms.IntegerField(min_value=1, required=False, label=_("Rewards in total"))
    campaign_count_per_day = forms.IntegerField(min_value=1, required=False, label=_("Rewards in total per day"))
    approval_policy = forms.ChoiceField(
        label=_("Approval policy"), choices=ApprovalPolicy.choices, initial=ApprovalPolicy.AUTO
    )
    review_above = _money_field(_("Review above"))
    verification = forms.ChoiceField(
        label=_("Verification"),
        choices=[("", _("The trigger's default")), *Verification.choices],
        required=False,
        help_text=_("Purchases, likes and comments: partner-attested; logins, opt-ins and videos: first-party."),
    )

    def __init__(self, *args, currency: str = "EUR", **kwargs):
        super().__init__(*args, **kwargs)
        self.currency = currency

    def _minor(self, value) -> int | None:
        return None if value in (None, "") else to_minor(value, self.currency)

    def clean(self):
        data = super().clean()
        try:
            fields = self.rule_fields(data)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from exc
        # Run the model's own checks here so errors land on the right fields before saving.
        from django.core.exceptions import ValidationError

        rule = RewardRule(**fields)
        try:
            rule.clean()
        except ValidationError as exc:
            mapping = {
                "fixed_minor": "amount",
                "percent_bps": "percent",
                "min_minor": "min_amount",
                "max_minor": "max_amount",
                "review_above_minor": "review_above",
                "min_purchase_minor": "min_purchase",
            }
            for field, messages in exc.message_dict.items():
                target = mapping.get(field, field)
                for message in messages:
                    self.add_error(target if target in self.fields else None, message)
        self.cleaned_fields = fields
        return data

    def rule_fields(self, data=None) -> dict:
        data = data if data is not None else self.cleaned_data
        countries = [c.strip().upper() for c in (data.get("allowed_iban_countries") or "").split(",") if c.strip()]
        percent = data.get("percent")
        fixed = data.get("amount_type") == AmountType.FIXED
        return {
            "trigger": data.get("trigger"),
            "custom_name": data.get("custom_name") or "",
            "name": data.get("name") or "",
            "amount_type": data.get("amount_type"),
            "fixed_minor": self._minor(data.get("amount")) if fixed else None,
            "percent_bps": None if fixed or percent is None else int(percent * 100),
            "min_minor": None if fixed else self._minor(data.get("min_amount")),
            "max_minor": None if fixed else self._minor(data.get("max_amount")),
            "min_purchase_minor": self._minor(data.get("min_purchase")),
            "hold_days": data.get("hold_days") or 0,
            "required_code": (data.get("required_code") or "").strip(),
            "view_threshold": data.get("view_threshold"),
            "allowed_iban_countries": countries,
            "new_people_only": bool(data.get("new_people_only")),
            "person_count_per_campaign": data.get("person_count_per_campaign"),
            "person_count_per_day": data.get("person_count_per_day"),
            "iban_count_per_campaign": data.get("iban_count_per_campaign"),
            "campaign_count": data.get("campaign_count"),
            "campaign_count_per_day": data.get("campaign_count_per_day"),
            "approval_policy": data.get("approval_policy"),
            "review_above_minor": self._minor(data.get("review_above"))
            if data.get("approval_policy") == ApprovalPolicy.REVIEW_ABOVE
            else None,
            "verification": data.get("verification") or verification_default(data.get("trigger") or ""),
        }

    @classmethod
    def initial_from(cls, rule: RewardRule) -> dict:
        cur = rule.campaign.currency

        def major(v):
            return None if v is None else minor_to_decimal(v, cur)

        return {
            "trigger": rule.trigger,
            "custom_name": rule.custom_name,
            "name": rule.name,
            "amount_type": rule.amount_type,
            "amount": major(rule.fixed_minor),
            "percent": None if rule.percent_bps is None else Decimal(rule.percent_bps) / 100,
            "min_amount": major(rule.min_minor),
            "max_amount": major(rule.max_minor),
            "min_purchase": major(rule.min_purchase_minor),
            "hold_days": rule.hold_days,
            "required_code": rule.required_code,
            "view_threshold": rule.view_threshold,
            "allowed_iban_countries": ", ".join(rule.allowed_iban_countries),
            "new_people_only": rule.new_people_only,
            "person_count_per_campaign": rule.person_count_per_campaign,
            "person_count_per_day": rule.person_count_per_day,
            "iban_count_per_campaign": rule.iban_count_per_campaign,
            "campaign_count": rule.campaign_count,
            "campaign_count_per_day": rule.campaign_count_per_day,
            "approval_policy": rule.approval_policy,
            "review_above": major(rule.review_above_minor),
            "verification": rule.verification,
        }


class AllocateForm(forms.Form):
    amount = forms.DecimalField(label=_("Amount to move from your funds to this campaign"), **MONEY)


class InviteForm(forms.Form):
    email = forms.EmailField(label=_("Email"))
    role = forms.ChoiceField(label=_("Role"), choices=BrandRole.choices, initial=BrandRole.ANALYST)


class RoleForm(forms.Form):
    role = forms.ChoiceField(label=_("Role"), choices=BrandRole.choices)


class BrandLanguageForm(forms.Form):
    language = forms.ChoiceField(label=_("Language of our e-mails to you"), choices=settings.LANGUAGES)


class FundingForm(forms.Form):
    amount = forms.DecimalField(label=_("Amount (optional, for the QR code)"), required=False, **MONEY)


def aware(value: datetime | None) -> datetime | None:
    if value is not None and timezone.is_naive(value):
        return timezone.make_aware(value)
    return value


class UpgradeRequestForm(forms.Form):
    plan = forms.ModelChoiceField(label=_("Plan you would like"), queryset=Plan.objects.none())
    message = forms.CharField(
        label=_("Anything we should know"), required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 3})
    )

    def __init__(self, *args, plans=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["plan"].queryset = Plan.objects.filter(pk__in=[p.pk for p in plans]).order_by("position", "id")


class ReleaseForm(forms.Form):
    amount = forms.DecimalField(label=_("Amount to move back to your funds"), **MONEY)
    # Drawn when the confirmation page was rendered: a replayed POST moves the money once.
    idempotency_key = forms.RegexField(regex=r"^[0-9a-f]{32}$", widget=forms.HiddenInput)


class ConfirmForm(forms.Form):
    """A confirmation with nothing to type: the key makes a replayed POST change nothing more."""

    idempotency_key = forms.RegexField(regex=r"^[0-9a-f]{32}$", widget=forms.HiddenInput)


class RejectForm(forms.Form):
    reason = forms.CharField(label=_("Why is it rejected?"), max_length=200)


class BankAccountForm(forms.Form):
    iban = forms.CharField(label=_("IBAN"), max_length=50)
    holder_name = forms.CharField(label=_("Account holder (your company's name at the bank)"), max_length=140)


class WithdrawForm(forms.Form):
    bank_account = forms.TypedChoiceField(label=_("To the bank account"), coerce=int, choices=())
    amount = forms.DecimalField(label=_("Amount to withdraw"), **MONEY)
    idempotency_key = forms.RegexField(regex=r"^[0-9a-f]{32}$", widget=forms.HiddenInput)

    def __init__(self, *args, accounts=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["bank_account"].choices = [(a.pk, f"{a.masked} · {a.holder_name}") for a in accounts]
