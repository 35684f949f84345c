"""Unclaimed money: a campaign with ``claim_window_days`` gives a person that many days to give
a usable bank account once a reward is owed to them — since it became payable, or since its
payout came back (failed, returned, cancelled: a new period starts, with new reminders).

The daily sweep (``rewards_unclaimed_process``, schedule ``payouts.unclaimed``) looks at every
owed reward of such a campaign whose person has no usable account (``account_usable``):

* a reminder after a third and after two thirds of the window (a ``reminder`` notice on their
  channels with their payout-form link, stating the date the money goes back); when both are due
  at once — a window set on old money — only the second is sent;
* the money goes back (``campaigns.services.reward_expire``) once the window is over and the
  date the last reminder stated has passed — never less than a third of the window after a
  reminder, however the window was set or changed.

Each reward is decided on its own: one that cannot expire (the person gave an account meanwhile,
a payout took it) is skipped and looked at again the next day. The sweep pages by reward id and
stops after ``BUDGET_SECONDS``, handing the rest to a follow-up task.
"""

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import DateTimeField, OuterRef, Subquery
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from campaigns.models import Reward, RewardEvent
from campaigns.services import reward_expire
from core.exceptions import InvalidTransition
from payouts.models import PayoutItem
from payouts.selectors import rewards_awaiting_payout
from payouts.services.create import account_usable
from recipients.models import Notice, NoticeKind, Person
from recipients.selectors import person_current_bank_account
from recipients.services.notices import NoticeNew, notices_record

logger = logging.getLogger(__name__)

REMINDERS = 2  # after 1/3 and 2/3 of the window
PAGE = 200
BUDGET_SECONDS = 20.0


@dataclass(frozen=True)
class UnclaimedResult:
    reminded: int
    expired: int
    last_id: int  # the highest reward id looked at
    done: bool  # False: the budget ran out; go on after ``last_id``


def rewards_unclaimed(*, after_id: int = 0):
    """Owed rewards of campaigns with a claim window, by id, each with ``owed_since``: when it
    became payable, or when its latest payout came back if that is later."""
    payable_since = (
        RewardEvent.objects.filter(reward=OuterRef("pk"), to_status="payable").order_by("-id").values("created_at")[:1]
    )
    came_back = (
        PayoutItem.objects.filter(reward=OuterRef("pk"), active=False)
        .annotate(at=Coalesce("payout__returned_at", "payout__failed_at", "payout__cancelled_at"))
        .order_by("-at")
        .values("at")[:1]
    )
    since = Subquery(payable_since, output_field=DateTimeField())
    return (
        rewards_awaiting_payout()
        .filter(campaign__claim_window_days__isnull=False, pk__gt=after_id)
        .annotate(owed_since=Greatest(since, Coalesce(Subquery(came_back, output_field=DateTimeField()), since)))
        .select_related("campaign__brand", "person")
        .order_by("pk")
    )


def _reminder_key(reward: Reward, step: int) -> str:
    return f"reward:{reward.pk}:reminder:{step}:{int(reward.owed_since.timestamp())}"


def rewards_unclaimed_process(
    *, now: datetime | None = None, after_id: int = 0, budget_seconds: float = BUDGET_SECONDS
) -> UnclaimedResult:
    """Remind, or return the money of, the owed rewards after ``after_id`` (see the module
    docstring). Idempotent: a reminder is a notice unique per reward, step and owed period; an
    expiry is ``reward_expire``'s. Each reward expires in its own transaction; a page's reminders
    are recorded in one. Returns what it did and where it stopped."""
    now = now or timezone.now()
    deadline = time.monotonic() + budget_seconds
    reminded = expired = 0
    last_id = after_id
    while True:
        page = list(rewards_unclaimed(after_id=last_id)[:PAGE])
        if not page:
            return UnclaimedResult(reminded, expired, last_id, done=True)
        accounts = _unusable_accounts({(r.person_id, r.currency) for r in page})
        keys = [_reminder_key(r, step) for r in page if r.owed_since for step in range(1, REMINDERS + 1)]
        sent = {n.key: n for n in Notice.objects.filter(key__in=keys)}
        reminders = []
        for reward in page:
            last_id = reward.pk
            owed = (reward.person_id, reward.currency)
            if owed not in accounts or reward.owed_since is None:
                continue  # the person can be paid: the payout sweep does it
            last_step, last = _last_reminder(reward, sent)
            step = min(REMINDERS, int((now - reward.owed_since) / (_window(reward) / 3)))
            if step > last_step:
                reminders.append(_reminder(reward, step=step, now=now))
            elif last is not None and _expiry_due(reward, now=now, last=last):
                expired += _expire(reward, account_seen=accounts[owed], now=now)
        with transaction.atomic():
            notices_record(notices=reminders)
        reminded += len(reminders)
        if len(page) < PAGE:
            return UnclaimedResult(reminded, expired, last_id, done=True)
        if time.monotonic() >= deadline:
            return UnclaimedResult(reminded, expired, last_id, done=False)


def _unusable_accounts(owed: set[tuple[int, str]]) -> dict[tuple[int, str], int | None]:
    """(person id, currency) → the current account found unusable for it (None: none), for the
    people who cannot be paid that currency."""
    people = Person.objects.in_bulk({person_id for person_id, _ in owed})
    unusable = {}
    for person_id, currency in owed:
        bank = person_current_bank_account(person=people[person_id])
        if not account_usable(bank, currency=currency):
            unusable[(person_id, currency)] = bank.pk if bank else None
    return unusable


def _window(reward: Reward) -> timedelta:
    return timedelta(days=reward.campaign.claim_window_days)


def _last_reminder(reward: Reward, sent: dict[str, Notice]) -> tuple[int, Notice | None]:
    """The latest reminder of this owed period: (its step, the notice), or (0, None)."""
    for step in range(REMINDERS, 0, -1):
        notice = sent.get(_reminder_key(reward, step))
        if notice is not None:
            return step, notice
    return 0, None


def _reminder(reward: Reward, *, step: int, now: datetime) -> NoticeNew:
    # The date the money goes back: the window's end, and never sooner than a third of it from now.
    goes_back = max(reward.owed_since + _window(reward), now + _window(reward) / 3)
    return NoticeNew(
        person_id=reward.person_id,
        kind=NoticeKind.REMINDER,
        key=_reminder_key(reward, step),
        reward_id=reward.pk,
        data={"deadline": goes_back.isoformat(), "step": step, "owed_since": reward.owed_since.isoformat()},
    )


def _expiry_due(reward: Reward, *, now: datetime, last: Notice) -> bool:
    stated = datetime.fromisoformat(last.data["deadline"])
    return now >= max(stated, reward.owed_since + _window(reward))


def _expire(reward: Reward, *, account_seen: int | None, now: datetime) -> int:
    try:
        reward_expire(reward=reward, account_seen=account_seen, now=now)
    except InvalidTransition as exc:
        # Decided differently under the locks (an account given, a payout started): tomorrow again.
        logger.info("reward %s not expired: %s", reward.pk, exc.code)
        return 0
    return 1
