"""Payout-form links for rewards earned through a partner's event (run by ``campaigns.tasks``,
scheduled, idempotent): people who have not given an IBAN yet are told where to give it."""

import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from campaigns.entitlements import claim_page_available
from campaigns.models import EventSource, Reward, RewardStatus
from campaigns.selectors import brand_plans_current
from recipients.models import BankAccount, NoticeKind
from recipients.selectors import person_current_bank_account
from recipients.services.notices import NoticeNew, notices_record

# Far below the ticks' 60 s task timeout (Q_CLUSTER): no batch starts after it; the next run goes on.
CLAIM_LINKS_BUDGET_SECONDS = 10.0


def claim_links_send_due(*, limit: int = 500, budget_seconds: float = CLAIM_LINKS_BUDGET_SECONDS) -> int:
    """Record the payout-form link notice (``claim_link``) once per reward earned through a
    partner's event (purchases and custom triggers) whose person has no bank account yet; the
    notice outbox sends it. A campaign with no claim page (an API-only plan, the Cashback API
    alone, without ``buyer_claim_links``) sends none: its shop gives the buyer's account itself.
    Batches of ``limit`` in id order, each in its own transaction, until none is left or
    ``budget_seconds`` are spent: rewards passed over (no claim page) never hold back the ones
    after them. Returns how many were recorded."""
    deadline = time.monotonic() + budget_seconds
    recorded, after = 0, 0
    while True:
        rewards = list(claim_links_due_rewards(after=after)[:limit])
        recorded += _links_record(rewards)
        if len(rewards) < limit or time.monotonic() >= deadline:
            return recorded
        after = rewards[-1].pk


def claim_links_due_rewards(*, after: int = 0) -> QuerySet[Reward]:
    """Rewards from a partner's event, not settled, not told yet, after id ``after``, whose person's
    cluster (the root and everyone merged into it) has no current bank account. Each test is a
    lookup on an index (``bank_account_one_current``, ``merged_into``): the same test as one
    comparison of two COALESCE expressions had none, and on stale statistics (a campaign's
    rewards all paid at the last ANALYZE, thousands held now) the planner compared every reward
    with every account: 57 s for 20,000, over the task timeout."""
    accounts = BankAccount.objects.filter(is_current=True)
    return (
        Reward.objects.filter(
            status__in=[RewardStatus.REVIEW, RewardStatus.HELD, RewardStatus.PAYABLE],
            event__source__in=[EventSource.API, EventSource.ADMIN],
            created_at__gte=timezone.now() - timedelta(days=settings.CLAIM_LINK_MAX_AGE_DAYS),
            pk__gt=after,
        )
        .exclude(notices__kind=NoticeKind.CLAIM_LINK)
        .annotate(root=Coalesce("person__merged_into_id", "person_id"))
        .exclude(Exists(accounts.filter(person_id=OuterRef("root"))))
        .exclude(Exists(accounts.filter(person__merged_into_id=OuterRef("root"))))
        .select_related("person", "campaign")
        .order_by("id")
    )


def _links_record(rewards: list[Reward]) -> int:
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
