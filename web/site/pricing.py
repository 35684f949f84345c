"""The packages as the pricing page shows them: names and texts in the active language (the
Italian field when ops filled it, else the English one), fees in the active locale's money format."""

from dataclasses import dataclass
from decimal import Decimal

from babel.numbers import format_decimal, format_percent
from django.utils import translation
from django.utils.translation import gettext as _
from djmoney.money import get_current_locale

from campaigns.models import Plan
from campaigns.models.plans import Channel
from campaigns.models.rules import Trigger
from core.money import format_minor


@dataclass(frozen=True)
class PlanCard:
    slug: str
    name: str
    tagline: str
    highlights: list[str]
    monthly_fee: str
    fee_per_reward: str
    allowances: list[str]
    triggers: list[str]
    channels: list[str]
    api_only: bool


def plan_cards(plans) -> list[PlanCard]:
    italian = translation.get_language() == "it"
    return [_card(plan, italian) for plan in plans]


def _card(plan: Plan, italian: bool) -> PlanCard:
    def pick(english: str, italian_text: str) -> str:
        return italian_text if italian and italian_text.strip() else english

    highlights = pick(plan.highlights, plan.highlights_it)
    trigger_labels = dict(Trigger.choices)
    channel_labels = dict(Channel.choices)
    return PlanCard(
        slug=plan.slug,
        name=pick(plan.name, plan.name_it),
        tagline=pick(plan.tagline, plan.tagline_it),
        highlights=[line.strip() for line in highlights.splitlines() if line.strip()],
        monthly_fee=format_minor(plan.monthly_fee_minor, plan.currency),
        fee_per_reward=_fee_per_reward(plan),
        allowances=_allowances(plan),
        triggers=[str(trigger_labels.get(code, code)) for code in plan.triggers],
        channels=[str(channel_labels.get(code, code)) for code in plan.channels],
        api_only=list(plan.channels) == [Channel.API],
    )


def _percent(bps: int) -> str:
    return format_percent(Decimal(bps) / 10000, format="#,##0.##%", locale=get_current_locale())


def _fee_per_reward(plan: Plan) -> str:
    fixed = format_minor(plan.fee_fixed_minor, plan.currency) if plan.fee_fixed_minor else ""
    percent = _percent(plan.fee_bps) if plan.fee_bps else ""
    if fixed and percent:
        return _("%(percent)s + %(fixed)s per reward") % {"percent": percent, "fixed": fixed}
    if percent:
        return _("%(percent)s of each reward") % {"percent": percent}
    if fixed:
        return _("%(fixed)s per reward") % {"fixed": fixed}
    return _("No fee per reward")


def _allowances(plan: Plan) -> list[str]:
    lines = []
    if plan.monthly_actions is not None:
        count = format_decimal(plan.monthly_actions, locale=get_current_locale())
        lines.append(_("Up to %(count)s rewarded actions a month") % {"count": count})
    if plan.monthly_payouts_minor is not None:
        amount = format_minor(plan.monthly_payouts_minor, plan.currency)
        lines.append(_("Up to %(amount)s paid to people a month") % {"amount": amount})
    return lines
