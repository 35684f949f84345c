"""Refund by order id (the Cashback API): what a refunded order earned is voided, clawed back or
reduced, per reward, each by the one service that owns that transition.

A full refund (no amount, or the whole purchase) voids a reward still in review or held
(``reward_void``: the hold is released) and claws back a payable one (``reward_claw_back``: the
commit entry is reversed, the fee returned). A partial refund reduces a reserved reward by the
refunded share of the purchase (``core.money.split_largest_remainder``, the one splitting
helper), its fee recomputed under the brand's plan; maturing then commits the smaller sum. Money
already paid to the buyer is not recovered here, and neither is part of a payable reward (a
claw-back is all or nothing): the result says so per reward.

Once per key, and refunds add up (``OrderRefund``): under the lock of the order's purchase
events the refund is recorded with what it adds to the order's refunded total (never past the
purchase: refunding more refunds it in full) and the total after it; a replay of the key finds
its row and adds nothing. The rewards are then brought to what the order's refunds add up to so
far, each in its own durable transaction (its service's), on the first call and again on every
replay, so a crash between the two is finished by the partner's retry. A reward a later refund
already took further is left as it is.
"""

from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from campaigns.evaluation import fee_for, reward_amount
from campaigns.models import Brand, OrderRefund, Reward, RewardStatus, TriggerEvent
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
    reason = reason or f"Order {order_id} refunded"
    purchase, refunded = _record(
        brand=brand, order_id=order_id, key=key, amount_minor=amount_minor, actor=actor, reason=reason
    )
    # What every refund of the order adds up to now: a later refund that committed first already
    # counts, so each reward goes straight to where the order stands.
    total = _total(brand=brand, order_id=order_id)
    events = (
        TriggerEvent.objects.filter(brand=brand, order_id=order_id, purchase_amount_minor__isnull=False)
        .select_related("reward__rule", "reward__campaign")
        .order_by("id")
    )
    plan = brand_plan_current(brand=brand)
    rewards = []
    for event in events:
        reward = getattr(event, "reward", None)
        if reward is not None:
            outcome = _refund_one(reward, purchase, total, key=key, plan=plan, actor=actor, reason=reason)
            reward.refresh_from_db()  # the answer shows the reward as the refund left it
            rewards.append(RewardRefund(reward, outcome))
    return RefundResult(order_id=order_id, purchase_amount_minor=purchase, refunded_minor=refunded, rewards=rewards)


def _record(*, brand: Brand, order_id: str, key: str, amount_minor: int | None, actor, reason: str) -> tuple[int, int]:
    """The purchase amount and the order's refunded total after the refund ``key`` names,
    recording the refund first if the key is new. Raises NotFound (``order_not_found``)."""
    with transaction.atomic():
        query = TriggerEvent.objects.filter(brand=brand, order_id=order_id, purchase_amount_minor__isnull=False)
        if connection.vendor == "postgresql":
            query = query.select_for_update()  # two refunds of one order take turns here
        amounts = list(query.order_by("id").values_list("purchase_amount_minor", flat=True))
        if not amounts:
            raise NotFound(f"No purchase with order id {order_id!r}.", code="order_not_found")
        purchase = max(amounts)
        seen = list(
            OrderRefund.objects.filter(brand=brand, order_id=order_id, key=key).values_list("total_minor", flat=True)
        )
        if seen:
            return purchase, seen[0]
        before = _total(brand=brand, order_id=order_id)
        added = max(0, min(purchase if amount_minor is None else amount_minor, purchase - before))
        OrderRefund.objects.create(
            brand=brand,
            order_id=order_id,
            key=key,
            amount_minor=added,
            total_minor=before + added,
            purchase_amount_minor=purchase,
            reason=reason[:200],
            actor=actor,
            created_at=timezone.now(),
        )
        return purchase, before + added


def _total(*, brand: Brand, order_id: str) -> int:
    return OrderRefund.objects.filter(brand=brand, order_id=order_id).aggregate(t=Sum("amount_minor"))["t"] or 0


def _refund_one(
    reward: Reward, purchase: int, refunded: int, *, key: str, plan, actor, reason: str, again: bool = True
) -> str:
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
            return "unchanged"  # as far as this total takes it, or further (a later refund)
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
    except InvalidInput as exc:
        if exc.code == "invalid_reduction":  # a later refund, committed meanwhile, took it further
            return "unchanged"
        raise
    except InvalidTransition as exc:
        if exc.code == "reward_in_payout":
            return "in_payout"
        # Its status moved since it was read (it matured, was paid or decided meanwhile): decide
        # once more on the reward as it is now, so one reward's race never stops the others.
        if not again:
            raise
        reward.refresh_from_db()
        return _refund_one(reward, purchase, refunded, key=key, plan=plan, actor=actor, reason=reason, again=False)
