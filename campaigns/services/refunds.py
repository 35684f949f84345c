"""Refund by order id (the Cashback API): what a refunded order earned is voided, clawed back or
reduced, per reward, each by the one service that owns that transition.

A full refund (no amount, or the whole purchase) voids a reward still in review or held
(``reward_void``: the hold is released) and claws back a payable one (``reward_claw_back``: the
commit entry is reversed, the fee returned). A partial refund reduces a reserved reward by the
refunded share of the purchase (``core.money.split_largest_remainder``, the one splitting
helper), its fee recomputed under the brand's plan; maturing then commits the smaller sum. Money
already paid to the buyer is not recovered here, and neither is part of a payable reward (a
claw-back is all or nothing): the result says so per reward.

Idempotent: the refund's ``key`` (the API's Idempotency-Key) is kept on each reduction's audit
row, voids and claw-backs of a reward already voided or clawed back change nothing, and
refunding more than the purchase in total refunds it in full.
"""

from dataclasses import dataclass

from campaigns.evaluation import fee_for, reward_amount
from campaigns.models import Brand, Reward, RewardEvent, RewardStatus, TriggerEvent
from campaigns.selectors import brand_plan_current
from campaigns.services.rewards import reward_claw_back, reward_reduce, reward_void
from core.exceptions import InvalidInput, InvalidTransition, NotFound
from core.money import split_largest_remainder


@dataclass(frozen=True)
class RewardRefund:
    reward: Reward
    # voided, clawed_back, reduced, unchanged (a reward already voided/clawed back, or a partial
    # refund that takes nothing off), paid (money sent: not recovered), payable_partial (a payable
    # reward is clawed back only in full), in_payout (its payout is running: retry when it ends).
    outcome: str


@dataclass(frozen=True)
class RefundResult:
    order_id: str
    purchase_amount_minor: int
    refunded_minor: int  # this order's refunds so far, this one included
    rewards: list[RewardRefund]


def order_refund(
    *, brand: Brand, order_id: str, key: str, amount_minor: int | None = None, actor=None, reason: str = ""
) -> RefundResult:
    """Refund ``amount_minor`` (None: all) of the brand's order ``order_id``, for what each of
    its rewards earned (see the module docstring). ``key`` makes a retry change nothing.
    Raises NotFound (``order_not_found``: no purchase of this brand names it), InvalidInput
    (``invalid_amount``). Each reward changes in its own durable transaction (its service's)."""
    if amount_minor is not None and (type(amount_minor) is not int or amount_minor <= 0):
        raise InvalidInput("amount_minor is a positive integer (minor units).", code="invalid_amount")
    events = list(
        TriggerEvent.objects.filter(brand=brand, order_id=order_id, purchase_amount_minor__isnull=False)
        .select_related("reward__rule", "reward__campaign")
        .order_by("id")
    )
    if not events:
        raise NotFound(f"No purchase with order id {order_id!r}.", code="order_not_found")
    purchase = max(e.purchase_amount_minor for e in events)
    earlier = _refunded_before(events, key=key)
    refunded = min(purchase, earlier + (purchase if amount_minor is None else amount_minor))
    plan = brand_plan_current(brand=brand)
    reason = reason or f"Order {order_id} refunded"
    rewards = []
    for event in events:
        reward = getattr(event, "reward", None)
        if reward is not None:
            rewards.append(
                RewardRefund(
                    reward, _refund_one(reward, purchase, refunded, key=key, plan=plan, actor=actor, reason=reason)
                )
            )
    return RefundResult(order_id=order_id, purchase_amount_minor=purchase, refunded_minor=refunded, rewards=rewards)


def _refunded_before(events: list[TriggerEvent], *, key: str) -> int:
    """What earlier refunds (other keys) of the order took, from the reductions' audit rows."""
    rows = RewardEvent.objects.filter(
        reward__event__in=events, kind="reward.reduced", data__has_key="refunded_minor"
    ).exclude(data__key=key)
    return max((row.data["refunded_minor"] for row in rows), default=0)


def _refund_one(reward: Reward, purchase: int, refunded: int, *, key: str, plan, actor, reason: str) -> str:
    if reward.status == RewardStatus.PAID:
        return "paid"
    if reward.status not in (RewardStatus.REVIEW, RewardStatus.HELD, RewardStatus.PAYABLE):
        return "unchanged"
    try:
        if refunded >= purchase:
            if reward.status == RewardStatus.PAYABLE:
                reward_claw_back(reward=reward, actor=actor, reason=reason)
                return "clawed_back"
            reward_void(reward=reward, actor=actor, reason=reason)
            return "voided"
        if reward.status == RewardStatus.PAYABLE:
            return "payable_partial"
        original = reward_amount(rule=reward.rule, purchase_amount_minor=purchase, currency=reward.currency)
        taken, _ = split_largest_remainder(original, [refunded, purchase - refunded])
        amount = original - taken
        if amount <= 0:
            reward_void(reward=reward, actor=actor, reason=reason)
            return "voided"
        if amount >= reward.amount_minor:
            return "unchanged"
        fee = min(reward.fee_minor, fee_for(plan=plan, amount_minor=amount, currency=reward.currency))
        reward_reduce(
            reward=reward,
            amount_minor=amount,
            fee_minor=fee,
            key=key,
            actor=actor,
            reason=reason,
            note={"refunded_minor": refunded},
        )
        return "reduced"
    except InvalidTransition as exc:
        if exc.code == "reward_in_payout":
            return "in_payout"
        # Its status moved since it was read (matured, paid): the refund is sent again by the
        # partner with the same key and finds it as it is now.
        raise
