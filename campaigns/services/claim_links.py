"""Payout-form links for rewards earned through a partner's event (run by ``campaigns.tasks``,
scheduled, idempotent): people who have not given an IBAN yet are told where to give it."""

import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from campaigns.entitlements import claim_page_available_q
from campaigns.models import EventSource, Reward, RewardStatus
from recipients.models import BankAccount, NoticeKind
from recipients.services.notices import NoticeNew, notices_record

# Far below the ticks' 60 s task timeout (Q_CLUSTER): no batch starts after it; the next run goes on.
CLAIM_LINKS_BUDGET_SECONDS = 10.0


def claim_links_send_due(*, limit: int = 500, budget_seconds: float = CLAIM_LINKS_BUDGET_SECONDS) -> int:
    """Record the payout-form link notice (``claim_link``) once per reward earned through a
    partner's event (purchases and custom triggers) whose person has no bank account yet; the
    notice outbox sends it. A campaign with no claim page (an API-only plan, the Cashback API
    alone, without ``buyer_claim_links``) sends none: its shop gives the buyer's account itself.
    Batches of ``limit`` in id order (``claim_links_due``: every one of them is told), each in its
    own transaction, until none is left or ``budget_seconds`` are spent. Returns how many were
    recorded."""
    deadline = time.monotonic() + budget_seconds
    recorded, after = 0, 0
    while True:
        due = list(claim_links_due().filter(pk__gt=after).values_list("pk", "person_id")[:limit])
        with transaction.atomic():
            notices_record(
                notices=[
                    NoticeNew(
                        person_id=person_id, kind=NoticeKind.CLAIM_LINK, key=f"reward:{pk}:claim_link", reward_id=pk
                    )
                    for pk, person_id in due
                ]
            )
        recorded += len(due)
        if len(due) < limit or time.monotonic() >= deadline:
            return recorded
        after = due[-1][0]


def claim_links_due() -> QuerySet[Reward]:
    """Rewards to tell, oldest first: from a partner's event, not settled, not told yet, of a
    campaign with a claim page, whose person's cluster (the root and everyone merged into it) has
    no current bank account — the account ``person_current_bank_account`` would pay. Each test
    is a lookup on an index (``bank_account_one_current``, ``merged_into``): the same test as one
    comparison of two COALESCE expressions had none, and on stale statistics (a campaign's
    rewards all paid at the last ANALYZE, thousands held now) the planner compared every reward
    with every account: 57 s for 20,000, over the task timeout."""
    accounts = BankAccount.objects.filter(is_current=True)
    return (
        Reward.objects.filter(
            claim_page_available_q(campaign="campaign"),
            status__in=[RewardStatus.REVIEW, RewardStatus.HELD, RewardStatus.PAYABLE],
            event__source__in=[EventSource.API, EventSource.ADMIN],
            created_at__gte=timezone.now() - timedelta(days=settings.CLAIM_LINK_MAX_AGE_DAYS),
        )
        .exclude(notices__kind=NoticeKind.CLAIM_LINK)
        .annotate(root=Coalesce("person__merged_into_id", "person_id"))
        .exclude(Exists(accounts.filter(person_id=OuterRef("root"))))
        .exclude(Exists(accounts.filter(person__merged_into_id=OuterRef("root"))))
        .order_by("id")
    )
