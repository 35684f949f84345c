"""Payout-form links for rewards earned through a partner's event (run by ``campaigns.tasks``,
scheduled, idempotent): people who have not given an IBAN yet are told where to give it."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.db.models.functions import Coalesce
from django.utils import timezone

from campaigns.entitlements import claim_page_available
from campaigns.models import EventSource, Reward, RewardStatus
from campaigns.selectors import brand_plans_current
from recipients.models import BankAccount, NoticeKind
from recipients.selectors import person_current_bank_account
from recipients.services.notices import NoticeNew, notices_record


def claim_links_send_due(*, limit: int = 500) -> int:
    """Record the payout-form link notice (``claim_link``) once per reward earned through a
    partner's event (purchases and custom triggers) whose person has no bank account yet; the
    notice outbox sends it. A campaign with no claim page (an API-only plan, the Cashback API
    alone, without ``buyer_claim_links``) sends none: its shop gives the buyer's account itself.
    Returns how many were recorded."""
    people_with_account = (
        BankAccount.objects.filter(is_current=True)
        .annotate(root=Coalesce("person__merged_into_id", "person_id"))
        .filter(root=OuterRef("root"))
    )
    rewards = (
        Reward.objects.filter(
            status__in=[RewardStatus.REVIEW, RewardStatus.HELD, RewardStatus.PAYABLE],
            event__source__in=[EventSource.API, EventSource.ADMIN],
            created_at__gte=timezone.now() - timedelta(days=settings.CLAIM_LINK_MAX_AGE_DAYS),
        )
        .exclude(notices__kind=NoticeKind.CLAIM_LINK)
        .annotate(root=Coalesce("person__merged_into_id", "person_id"))
        .exclude(Exists(people_with_account))
        .select_related("person", "campaign")
        .order_by("id")[:limit]
    )
    plans = brand_plans_current(brand_ids={r.campaign.brand_id for r in rewards})
    notices = [
        NoticeNew(
            person_id=reward.person_id,
            kind=NoticeKind.CLAIM_LINK,
            key=f"reward:{reward.pk}:claim_link",
            reward_id=reward.pk,
        )
        for reward in rewards
        if claim_page_available(campaign=reward.campaign, plan=plans.get(reward.campaign.brand_id))
        and person_current_bank_account(person=reward.person) is None
    ]
    with transaction.atomic():
        notices_record(notices=notices)
    return len(notices)
