"""The rule preview: in plain words, exactly what a person receives, when, and what it costs the
brand. Computed with the same functions the engine uses (``campaigns.evaluation``), so the
preview cannot promise anything the engine would not pay."""

from dataclasses import dataclass

from campaigns.evaluation import fee_for, reward_amount
from campaigns.models import AmountType, ApprovalPolicy, Brand, PayoutMode, RewardRule, Trigger
from core.money import format_minor

ACTION_WORDS = {
    Trigger.PURCHASE: "buys from you (the purchase confirmed by your system)",
    Trigger.TIKTOK_LOGIN: "logs in with TikTok on the claim page",
    Trigger.WHATSAPP_OPTIN: "opts in on WhatsApp by sending the code from the claim page",
    Trigger.UGC_SHARE: "posts a TikTok video with your hashtag and picks it on the claim page",
    Trigger.LIKE: "likes your content (reported by your system or checked by hand)",
    Trigger.COMMENT: "comments on your content (reported by your system or checked by hand)",
    Trigger.VIEW_THRESHOLD: "posts a TikTok video that passes the view count",
    Trigger.CUSTOM: "does the custom action your system reports",
}


@dataclass(frozen=True)
class Preview:
    lines: list[str]
    examples: list[tuple[str, str, str]]  # purchase, reward, cost to the brand


def rule_preview(*, rule: RewardRule, brand: Brand, currency: str, payout_mode: str = PayoutMode.INSTANT) -> Preview:
    def money(v: int) -> str:
        return format_minor(v, currency)

    lines: list[str] = []
    action = ACTION_WORDS.get(rule.trigger, rule.trigger)
    if rule.amount_type == AmountType.FIXED:
        amount = rule.fixed_minor or 0
        fee = fee_for(brand=brand, amount_minor=amount, currency=currency)
        lines.append(f"A person who {action} receives {money(amount)}.")
        lines.append(f"Each reward uses {money(amount + fee)} of the budget ({money(fee)} platform fee).")
    else:
        pct = (rule.percent_bps or 0) / 100
        bounds = []
        if rule.min_minor:
            bounds.append(f"at least {money(rule.min_minor)}")
        if rule.max_minor:
            bounds.append(f"at most {money(rule.max_minor)}")
        extra = f" ({', '.join(bounds)})" if bounds else ""
        lines.append(f"A person who {action} receives {pct:g}% of the purchase{extra}, rounded to the cent.")
    if rule.min_purchase_minor:
        lines.append(f"Only purchases of {money(rule.min_purchase_minor)} or more count.")
    if rule.required_code:
        lines.append(f"The event must carry {rule.required_code!s} (any capitalisation).")
    if rule.trigger == Trigger.VIEW_THRESHOLD and rule.view_threshold:
        lines.append(f"The video must reach {rule.view_threshold:,} views; we check its count through TikTok.")
    if rule.trigger in (Trigger.LIKE, Trigger.COMMENT):
        lines.append("TikTok cannot tell us who liked or commented: these rewards rely on your report or a review.")
    if rule.hold_days:
        lines.append(
            f"The money is reserved at once and paid {rule.hold_days} days later, if the action was not undone "
            "(a refunded order voids it)."
        )
    else:
        lines.append("The money is paid right away, as soon as the person has given their IBAN.")
    if rule.approval_policy == ApprovalPolicy.ALWAYS_REVIEW:
        lines.append("Every reward waits for a review by our team before it is paid.")
    elif rule.approval_policy == ApprovalPolicy.REVIEW_ABOVE and rule.review_above_minor:
        lines.append(f"Rewards above {money(rule.review_above_minor)} wait for a review before they are paid.")
    if payout_mode == PayoutMode.AGGREGATE:
        lines.append("Payouts are grouped: one transfer per person for all their rewards in the interval.")
    else:
        lines.append("Payment is an instant SEPA transfer: usually in the person's account within seconds.")
    caps = []
    if rule.person_count_per_campaign:
        caps.append(f"{rule.person_count_per_campaign} per person")
    if rule.person_count_per_day:
        caps.append(f"{rule.person_count_per_day} per person per day")
    if rule.iban_count_per_campaign:
        caps.append(f"{rule.iban_count_per_campaign} per IBAN")
    if rule.campaign_count:
        caps.append(f"{rule.campaign_count} in total")
    if rule.campaign_count_per_day:
        caps.append(f"{rule.campaign_count_per_day} in total per day")
    if caps:
        lines.append("Limits: " + ", ".join(caps) + ". A person over a limit is told so on the claim page.")
    if rule.allowed_iban_countries:
        lines.append("Only bank accounts from " + ", ".join(rule.allowed_iban_countries) + " are paid.")
    if rule.new_people_only:
        lines.append("Only people you never rewarded before.")

    examples = []
    if rule.amount_type == AmountType.PERCENT:
        for purchase in (2_000, 5_000, 20_000):
            amount = reward_amount(rule=rule, purchase_amount_minor=purchase, currency=currency)
            fee = fee_for(brand=brand, amount_minor=amount, currency=currency)
            examples.append((money(purchase), money(amount), money(amount + fee)))
    return Preview(lines=lines, examples=examples)
