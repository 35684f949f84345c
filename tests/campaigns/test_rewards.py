"""After ingestion: review decisions, maturing, refunds (void), claw-backs and paid."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from campaigns.models import Reward, RewardEvent, RewardStatus
from campaigns.selectors import campaign_budget, review_queue
from campaigns.services import (
    event_ingest,
    reward_approve,
    reward_claw_back,
    reward_mark_paid,
    reward_reject,
    reward_void,
    rewards_approve_bulk,
    rewards_mature,
    rewards_reject_bulk,
)
from campaigns.services.rewards import recipient_payable_account
from core.exceptions import InvalidInput, InvalidTransition
from reconciliation.models import Account, HoldStatus, JournalEntry
from reconciliation.selectors import account_balance_by_code, ledger_verify_report
from reconciliation.services import account_set_active
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign

pytestmark = pytest.mark.django_db

CASHBACK = {
    "trigger": "purchase",
    "amount_type": "percent",
    "percent_bps": 1000,
    "hold_days": 14,
    "verification": "partner_attested",
}


@pytest.fixture
def reviewer(db):
    return get_user_model().objects.create_user("rita", password="x", is_staff=True)


def purchase(amount_minor: int, **fields):
    return event(type="purchase", source="api", purchase_amount_minor=amount_minor, **fields)


def test_refund_voids_the_held_reward_and_returns_the_money(brand):
    # given a cashback of 10 % (4.99 + 0.20 fee) held for the 14-day return window
    campaign = funded_campaign(brand=brand, amount_minor=10_000, mode="cashback", rules=[CASHBACK])
    reward = event_ingest(brand=brand, payload=purchase(4_990)).reward
    assert reward.status == RewardStatus.HELD and campaign_budget(campaign=campaign).available_minor == 10_000 - 519
    # when the order is refunded
    reward_void(reward=reward, reason="order refunded")
    # then the hold is voided and the budget has everything back; nothing was posted
    reward.refresh_from_db()
    assert reward.status == RewardStatus.VOIDED and reward.hold.status == HoldStatus.VOIDED
    assert campaign_budget(campaign=campaign).available_minor == 10_000
    assert not JournalEntry.objects.filter(kind="reward_payable").exists()
    assert [a.kind for a in reward.audit.order_by("id")] == ["reward.held", "reward.voided"]
    # and voiding again is a no-op
    reward_void(reward=reward, reason="again")
    assert reward.audit.count() == 2
    assert ledger_verify_report().ok


def test_maturing_makes_matured_rewards_payable(brand):
    campaign = funded_campaign(brand=brand, amount_minor=10_000, mode="cashback", rules=[CASHBACK])
    reward = event_ingest(brand=brand, payload=purchase(5_000)).reward
    # not yet: the return window is open
    assert rewards_mature() == 0
    # fourteen days later: budget → the person's payable 5.00 and platform fees 0.20
    assert rewards_mature(now=timezone.now() + timedelta(days=14, minutes=1)) == 1
    reward.refresh_from_db()
    assert reward.status == RewardStatus.PAYABLE and reward.commit_entry is not None
    assert account_balance_by_code(code=f"recipient:{reward.person_id}:payable:EUR").posted_minor == 500
    assert account_balance_by_code(code="platform:fees:EUR").posted_minor == 20
    budget = campaign_budget(campaign=campaign)
    assert (budget.held_minor, budget.available_minor, budget.spent_minor) == (0, 10_000 - 520, 520)
    # running it again changes nothing
    assert rewards_mature(now=timezone.now() + timedelta(days=15)) == 0
    assert ledger_verify_report().ok


def test_claw_back_reverses_a_payable_reward(brand):
    campaign = funded_campaign(
        brand=brand, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )
    reward = event_ingest(brand=brand, payload=event()).reward
    rewards_mature()
    reward.refresh_from_db()
    reward_claw_back(reward=reward, reason="fake account")
    reward.refresh_from_db()
    assert reward.status == RewardStatus.CLAWED_BACK and reward.clawback_entry.reverses_id == reward.commit_entry_id
    assert campaign_budget(campaign=campaign).available_minor == 10_000
    assert account_balance_by_code(code=f"recipient:{reward.person_id}:payable:EUR").posted_minor == 0
    assert ledger_verify_report().ok


def test_held_reward_cannot_be_clawed_back_and_paid_cannot_be_voided(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}])
    reward = event_ingest(brand=brand, payload=event()).reward
    with pytest.raises(InvalidTransition):
        reward_claw_back(reward=reward, reason="x")
    rewards_mature()
    assert reward_mark_paid(reward_ids=[reward.pk], payout_ref="payout-1") == 1
    assert reward_mark_paid(reward_ids=[reward.pk], payout_ref="payout-1") == 0
    for action in (lambda: reward_void(reward=reward, reason="x"), lambda: reward_claw_back(reward=reward, reason="x")):
        with pytest.raises(InvalidTransition):
            action()
    reward.refresh_from_db()
    assert reward.status == RewardStatus.PAID and reward.payout_ref == "payout-1"


def test_mark_paid_is_all_or_nothing(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}])
    payable = event_ingest(brand=brand, payload=event()).reward
    rewards_mature()
    held_later = funded_campaign(brand=brand, amount_minor=1_000, slug="later", mode="cashback", rules=[CASHBACK])
    held = event_ingest(brand=brand, payload=purchase(1_000, campaign=held_later.slug)).reward
    with pytest.raises(InvalidTransition):
        reward_mark_paid(reward_ids=[payable.pk, held.pk], payout_ref="p-2")
    payable.refresh_from_db()
    assert payable.status == RewardStatus.PAYABLE


def test_review_queue_approve_and_reject_are_audited(brand, reviewer):
    campaign = funded_campaign(
        brand=brand,
        amount_minor=10_000,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 500, "approval_policy": "always_review"}],
    )
    first = event_ingest(brand=brand, payload=event()).reward
    second = event_ingest(brand=brand, payload=event()).reward
    assert list(review_queue(brand=brand)) == [first, second]
    # approving a reward with no hold period makes it payable at once
    reward_approve(reward=first, actor=reviewer)
    first.refresh_from_db()
    assert first.status == RewardStatus.PAYABLE and first.decided_by == reviewer
    assert [(a.kind, a.actor_id) for a in first.audit.order_by("id")] == [
        ("reward.review", None),
        ("reward.approved", reviewer.pk),
        ("reward.payable", reviewer.pk),
    ]
    with pytest.raises(InvalidInput):
        reward_reject(reward=second, actor=reviewer, reason=" ")
    reward_reject(reward=second, actor=reviewer, reason="duplicate account")
    second.refresh_from_db()
    assert second.status == RewardStatus.VOIDED and second.decision_reason == "duplicate account"
    assert second.audit.order_by("id").last().kind == "reward.rejected"
    assert campaign_budget(campaign=campaign).available_minor == 10_000 - 520
    with pytest.raises(InvalidTransition):
        reward_approve(reward=second, actor=reviewer)


def test_bulk_review_decisions_report_each(brand, reviewer):
    funded_campaign(
        brand=brand,
        amount_minor=10_000,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 500, "approval_policy": "always_review"}],
    )
    ids = [event_ingest(brand=brand, payload=event()).reward.pk for _ in range(3)]
    approved = rewards_approve_bulk(reward_ids=ids[:2], actor=reviewer)
    assert approved.done == ids[:2] and approved.failed == {}
    rejected = rewards_reject_bulk(reward_ids=ids[1:] + [999_999], actor=reviewer, reason="bot")
    assert rejected.done == [ids[2]]
    assert rejected.failed == {ids[1]: "invalid_transition", 999_999: "not_found"}
    assert ledger_verify_report().ok


def test_fee_account_is_income(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}])
    event_ingest(brand=brand, payload=event())
    rewards_mature()
    assert Account.objects.get(code="platform:fees:EUR").kind == "income"


def test_a_reward_the_books_refuse_does_not_block_maturing_of_the_others(free_brand):
    from reconciliation.services import account_set_active

    blocked = funded_campaign(
        brand=free_brand, amount_minor=1_000, slug="blocked", rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )
    funded_campaign(
        brand=free_brand, amount_minor=1_000, slug="fine", rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )
    stuck = event_ingest(brand=free_brand, payload=event(campaign="blocked")).reward
    fine = event_ingest(brand=free_brand, payload=event(campaign="fine")).reward
    account_set_active(account=blocked.budget_account, is_active=False)
    assert rewards_mature() == 1
    stuck.refresh_from_db()
    fine.refresh_from_db()
    assert (stuck.status, fine.status) == (RewardStatus.HELD, RewardStatus.PAYABLE)


@pytest.mark.parametrize("column", ["commit_entry_id", "clawback_entry_id"])
def test_the_database_refuses_two_rewards_on_one_ledger_entry(brand, column):
    """One entry moves one reward's money: a second reward pointing at it (raw SQL, around the
    services) would count that money twice. The partial unique indexes refuse it."""
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}])
    first, second = (event_ingest(brand=brand, payload=event()).reward for _ in range(2))
    rewards_mature()
    reward_claw_back(reward=first, reason="fake account")
    if column == "clawback_entry_id":
        reward_claw_back(reward=second, reason="fake account")
    first.refresh_from_db()
    with (
        pytest.raises(IntegrityError, match=column.removesuffix("_id")),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            f"UPDATE campaigns_reward SET {column} = %s WHERE id = %s",  # noqa: S608 - parametrised column
            [getattr(first, column), second.pk],
        )
    second.refresh_from_db()
    assert getattr(second, column) != getattr(first, column)


# --- maturing in batches ---------------------------------------------------------------------------

INSTANT = {"trigger": "tiktok_login", "fixed_minor": 500}


def due_rewards(brand, n):
    """``n`` people, each with a reward due now (no hold period)."""
    return [event_ingest(brand=brand, payload=event()).reward for _ in range(n)]


def statuses(rewards):
    return [Reward.objects.get(pk=r.pk).status for r in rewards]


def test_maturing_given_people_leaves_everyone_else_held(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[INSTANT])
    first, second, third = due_rewards(brand, 3)

    assert rewards_mature(person_ids=[first.person_id, third.person_id]) == 2

    assert statuses([first, second, third]) == [RewardStatus.PAYABLE, RewardStatus.HELD, RewardStatus.PAYABLE]
    assert ledger_verify_report().ok


def test_a_maturing_run_out_of_time_leaves_the_rest_to_the_next_run(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[INSTANT])
    rewards = due_rewards(brand, 5)

    # no time left after the first batch: only that batch matures …
    assert rewards_mature(batch_size=2, budget_seconds=0) == 2
    assert statuses(rewards) == [RewardStatus.PAYABLE] * 2 + [RewardStatus.HELD] * 3
    # … and the next run takes the rest
    assert rewards_mature(batch_size=2) == 3
    assert statuses(rewards) == [RewardStatus.PAYABLE] * 5
    assert ledger_verify_report().ok


def test_a_reward_the_books_refuse_does_not_hold_up_its_batch(brand):
    campaign = funded_campaign(brand=brand, amount_minor=10_000, rules=[INSTANT])
    first, refused, third = due_rewards(brand, 3)
    # the person's payable account is closed: the books refuse to credit it
    account_set_active(account=recipient_payable_account(person_id=refused.person_id, currency="EUR"), is_active=False)

    assert rewards_mature() == 2

    assert statuses([first, refused, third]) == [RewardStatus.PAYABLE, RewardStatus.HELD, RewardStatus.PAYABLE]
    refused.refresh_from_db()
    assert refused.hold.status == HoldStatus.PENDING and refused.commit_entry is None
    assert not JournalEntry.objects.filter(idempotency_key=f"reward:{refused.pk}:commit").exists()
    assert campaign_budget(campaign=campaign).held_minor == refused.amount_minor + refused.fee_minor
    paid_to = [
        account_balance_by_code(code=f"recipient:{r.person_id}:payable:EUR").posted_minor
        for r in (first, refused, third)
    ]
    assert paid_to == [first.amount_minor, 0, third.amount_minor]
    assert ledger_verify_report().ok


def test_maturing_twice_changes_nothing_the_second_time(brand):
    funded_campaign(brand=brand, amount_minor=10_000, rules=[INSTANT])
    rewards = due_rewards(brand, 4)
    assert rewards_mature(batch_size=3) == 4
    entries = JournalEntry.objects.count()
    audit = RewardEvent.objects.count()

    assert rewards_mature(batch_size=3) == 0

    assert (JournalEntry.objects.count(), RewardEvent.objects.count()) == (entries, audit)
    for reward in rewards:
        reward.refresh_from_db()
        # each hold committed once, by its own entry, and one audit row for the change
        assert reward.status == RewardStatus.PAYABLE
        assert (reward.hold.status, reward.hold.commit_entry_id) == (HoldStatus.COMMITTED, reward.commit_entry_id)
        assert reward.commit_entry.idempotency_key == f"reward:{reward.pk}:commit"
        assert reward.audit.filter(kind="reward.payable").count() == 1
    assert ledger_verify_report().ok
