"""What a person sees on their status page: one of held / payable / paid / returned (or
cancelled, or expired: gone back unclaimed), with the date they can expect, derived from the
reward and its latest payout."""

from dataclasses import dataclass
from datetime import datetime

from campaigns.models import Reward, RewardStatus
from payouts.models import PayoutItem, PayoutStatus
from recipients.selectors import person_current_bank_account


@dataclass(frozen=True)
class ClaimStatus:
    state: str  # held | review | payable | paid | returned | cancelled | expired
    reward: Reward
    expected_at: datetime | None
    iban_masked: str
    needs_iban: bool
    reason: str = ""


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
    if reward.status == RewardStatus.PAID or (payout and payout.status == PayoutStatus.SETTLED):
        return ClaimStatus("paid", reward, payout.settled_at if payout else reward.updated_at, iban, False)
    if reward.status == RewardStatus.REVIEW:
        return ClaimStatus("review", reward, reward.matures_at, iban, bank is None)
    if reward.status == RewardStatus.HELD:
        return ClaimStatus("held", reward, reward.matures_at, iban, bank is None)
    return ClaimStatus("payable", reward, payout.created_at if payout else None, iban, bank is None)
