"""What a person sees on their status page: one of held / review / payable / check_details /
paid / returned (or cancelled, or expired: gone back unclaimed), with the date they can expect,
derived from the reward and its latest payout.

How fast the money travels is said only once the rail that carries it has said so
(``Payout.service_level``, recorded when the payout is sent): "instant" or "1 business day".
Before that nothing is promised. ``check_details``: the payout waits for the person after the
Verification of Payee (a close match to confirm with the bank's name, or details to correct)."""

from dataclasses import dataclass
from datetime import datetime, time

from django.utils import timezone

from campaigns.models import Reward, RewardStatus, VopAction
from payouts.models import Payout, PayoutItem, PayoutStatus
from payouts.selectors import business_days_after
from payouts.services.payee import payout_waits_for_person
from recipients.selectors import person_current_bank_account


@dataclass(frozen=True)
class ClaimStatus:
    state: str  # held | review | payable | check_details | paid | returned | cancelled | expired
    reward: Reward
    expected_at: datetime | None
    iban_masked: str
    needs_iban: bool
    reason: str = ""
    speed: str = ""  # instant | standard, once the rail carrying the payout said so; "" before
    suggested_name: str = ""  # check_details, close match: the name the person's bank holds
    can_confirm: bool = False  # check_details: the person may confirm ``suggested_name``


def _arrival(payout: Payout) -> datetime | None:
    """When a sent payout reaches the person's account: at once (instant), or by the end of the
    next business day (standard)."""
    if not payout.submitted_at or not payout.service_level:
        return None
    if payout.service_level == "instant":
        return payout.submitted_at
    day = business_days_after(timezone.localdate(payout.submitted_at), 1)
    return timezone.make_aware(datetime.combine(day, time(18)))


def reward_claim_status(*, reward: Reward) -> ClaimStatus:
    item = (
        PayoutItem.objects.filter(reward=reward).select_related("payout").order_by("-payout__created_at", "-id").first()
    )
    bank = person_current_bank_account(person=reward.person)
    iban = bank.masked if bank else ""
    payout = item.payout if item else None
    came_back = payout is not None and payout.status in (PayoutStatus.RETURNED, PayoutStatus.FAILED)
    if reward.status in (RewardStatus.VOIDED, RewardStatus.CLAWED_BACK):
        return ClaimStatus("cancelled", reward, None, iban, False, reward.decision_reason)
    if reward.status == RewardStatus.EXPIRED:
        return ClaimStatus("expired", reward, reward.updated_at, iban, False)
    if came_back and not (item and item.active):
        return ClaimStatus("returned", reward, None, iban, True, payout.reason_text or payout.reason_code)
    if payout is not None and item.active and payout_waits_for_person(payout):
        ask = payout.vop_action == VopAction.ASK and bool(payout.vop_suggested_name)
        return ClaimStatus(
            "check_details",
            reward,
            None,
            iban,
            True,
            payout.vop_result,
            suggested_name=payout.vop_suggested_name if ask else "",
            can_confirm=ask,
        )
    if reward.status == RewardStatus.PAID or (payout and payout.status == PayoutStatus.SETTLED):
        speed = payout.service_level if payout else ""
        return ClaimStatus("paid", reward, payout.settled_at if payout else reward.updated_at, iban, False, speed=speed)
    if reward.status == RewardStatus.REVIEW:
        return ClaimStatus("review", reward, reward.matures_at, iban, bank is None)
    if reward.status == RewardStatus.HELD:
        return ClaimStatus("held", reward, reward.matures_at, iban, bank is None)
    sent = payout is not None and payout.status == PayoutStatus.SUBMITTED
    return ClaimStatus(
        "payable",
        reward,
        _arrival(payout) if sent else (payout.created_at if payout else None),
        iban,
        bank is None,
        speed=payout.service_level if sent else "",
    )
