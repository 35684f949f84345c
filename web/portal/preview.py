"""The rule preview: in plain words, exactly what a person receives, when, and what it costs the
brand. Computed with the same functions the engine uses (``campaigns.evaluation``), so the
preview cannot promise anything the engine would not pay."""

from dataclasses import dataclass

from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from campaigns.evaluation import fee_for, reward_amount
from campaigns.models import AmountType, ApprovalPolicy, Brand, PayoutMode, RewardRule, Trigger
from campaigns.selectors import brand_plan_current
from campaigns.triggers import trigger_spec
from core.money import format_minor


@dataclass(frozen=True)
class Preview:
    lines: list[str]
    examples: list[tuple[str, str, str]]  # purchase, reward, cost to the brand
    warning: str = ""  # the platform-terms warning of a paid-engagement rule


def rule_preview(*, rule: RewardRule, brand: Brand, currency: str, payout_mode: str = PayoutMode.INSTANT) -> Preview:
    """The lines in the active language; amounts and counts formatted for it."""

    def money(v: int) -> str:
        return format_minor(v, currency)

    plan = brand_plan_current(brand=brand)

    lines: list[str] = []
    spec = trigger_spec(rule.trigger)
    # The spec's ``action`` completes "A person who … receives": the sentence is translated whole.
    action = spec.action if spec else rule.trigger
    if rule.amount_type == AmountType.FIXED:
        amount = rule.fixed_minor or 0
        fee = fee_for(plan=plan, amount_minor=amount, currency=currency)
        lines.append(_("A person who %(action)s receives %(amount)s.") % {"action": action, "amount": money(amount)})
        lines.append(
            _("Each reward uses %(cost)s of the budget (%(fee)s platform fee).")
            % {"cost": money(amount + fee), "fee": money(fee)}
        )
    else:
        pct = (rule.percent_bps or 0) / 100
        pct = number_format(pct, decimal_pos=0 if pct.is_integer() else None)
        bounds = []
        if rule.min_minor:
            bounds.append(_("at least %(amount)s") % {"amount": money(rule.min_minor)})
        if rule.max_minor:
            bounds.append(_("at most %(amount)s") % {"amount": money(rule.max_minor)})
        extra = f" ({', '.join(bounds)})" if bounds else ""
        lines.append(
            _("A person who %(action)s receives %(pct)s%% of the purchase%(bounds)s, rounded to the cent.")
            % {"action": action, "pct": pct, "bounds": extra}
        )
    if rule.min_purchase_minor:
        lines.append(_("Only purchases of %(amount)s or more count.") % {"amount": money(rule.min_purchase_minor)})
    if rule.required_code:
        lines.append(_("The event must carry %(code)s (any capitalisation).") % {"code": rule.required_code})
    if rule.trigger == Trigger.VIEW_THRESHOLD and rule.view_threshold:
        lines.append(
            _("The video must reach %(views)s views; we check its count through TikTok.")
            % {"views": number_format(rule.view_threshold, force_grouping=True)}
        )
    if spec and spec.unverifiable:
        lines.append(_("TikTok cannot tell us who liked or commented: these rewards rely on your report or a review."))
    if rule.hold_days:
        lines.append(
            ngettext(
                "The money is reserved at once and paid %(days)s day later, if the action was not undone "
                "(a refunded order voids it).",
                "The money is reserved at once and paid %(days)s days later, if the action was not undone "
                "(a refunded order voids it).",
                rule.hold_days,
            )
            % {"days": rule.hold_days}
        )
    else:
        lines.append(_("The money is paid right away, as soon as the person has given their IBAN."))
    if rule.approval_policy == ApprovalPolicy.ALWAYS_REVIEW:
        lines.append(_("Every reward waits for a review by our team before it is paid."))
    elif rule.approval_policy == ApprovalPolicy.REVIEW_ABOVE and rule.review_above_minor:
        lines.append(
            _("Rewards above %(amount)s wait for a review before they are paid.")
            % {"amount": money(rule.review_above_minor)}
        )
    if payout_mode == PayoutMode.AGGREGATE:
        lines.append(_("Payouts are grouped: one transfer per person for all their rewards in the interval."))
    else:
        lines.append(_("Payment is an instant SEPA transfer: usually in the person's account within seconds."))
    caps = []
    if rule.person_count_per_campaign:
        caps.append(_("%(n)s per person") % {"n": rule.person_count_per_campaign})
    if rule.person_count_per_day:
        caps.append(_("%(n)s per person per day") % {"n": rule.person_count_per_day})
    if rule.iban_count_per_campaign:
        caps.append(_("%(n)s per IBAN") % {"n": rule.iban_count_per_campaign})
    if rule.campaign_count:
        caps.append(_("%(n)s in total") % {"n": rule.campaign_count})
    if rule.campaign_count_per_day:
        caps.append(_("%(n)s in total per day") % {"n": rule.campaign_count_per_day})
    if caps:
        lines.append(
            _("Limits: %(limits)s. A person over a limit is told so on the claim page.") % {"limits": ", ".join(caps)}
        )
    if rule.allowed_iban_countries:
        lines.append(
            _("Only bank accounts from %(countries)s are paid.") % {"countries": ", ".join(rule.allowed_iban_countries)}
        )
    if rule.new_people_only:
        lines.append(_("Only people you never rewarded before."))

    examples = []
    if rule.amount_type == AmountType.PERCENT:
        for purchase in (2_000, 5_000, 20_000):
            amount = reward_amount(rule=rule, purchase_amount_minor=purchase, currency=currency)
            fee = fee_for(plan=plan, amount_minor=amount, currency=currency)
            examples.append((money(purchase), money(amount), money(amount + fee)))
    return Preview(lines=lines, examples=examples, warning=rule.terms_warning)
