"""Creating payouts (instant, aggregated, minimum amounts), four-eyes approval, cancel and retry,
and the messages people get."""

from datetime import timedelta

import pytest
from django.core import mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.exceptions import InvalidTransition, PermissionDenied
from payouts.models import AttemptOutcome, Payout, PayoutItem, PayoutStatus
from payouts.services import (
    payout_approve,
    payout_cancel,
    payout_execute,
    payout_mark_returned,
    payout_retry,
    payouts_create_for_payable,
)
from payouts.tasks import payout_settled_followup_task
from recipients.models import Notice
from recipients.services.notices import notices_send_due
from recipients.whatsapp_cloud import FakeWhatsAppSender
from tests.campaigns.factories import funded_campaign
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import (
    LOGIN_500,
    assert_books_ok,
    iban,
    payable_minor,
    payable_reward,
    staff,
)

pytestmark = pytest.mark.django_db


def test_aggregate_campaign_pays_once_per_interval_and_not_below_the_minimum(sandbox, debtor, brand):
    # given an aggregating campaign: one payout per person every 30 minutes, at least 10.00
    funded_campaign(
        brand=brand,
        amount_minor=100_000,
        rules=[LOGIN_500],
        slug="summer",
        payout_mode="aggregate",
        aggregate_minutes=30,
        min_payout_minor=1_000,
    )
    account, email = iban(), "anna@example.com"
    first = payable_reward(brand, account_iban=account, email=email, social_provider="tiktok", social_uid="a1")
    # when the sweep runs at once: nothing (not due, and 5.00 is below the minimum)
    assert payouts_create_for_payable().created == []
    payable_reward(brand, account_iban=account, email=email, social_provider="tiktok", social_uid="a2")
    assert payouts_create_for_payable().created == []
    # then after the interval, one payout carries both rewards
    (payout_id,) = payouts_create_for_payable(now=timezone.now() + timedelta(minutes=31)).created
    payout = Payout.objects.get(pk=payout_id)
    assert payout.amount_minor == 1_000 and payout.items.count() == 2 and payout.person_id == first.person_id


def test_below_minimum_waits(sandbox, debtor, brand):
    funded_campaign(brand=brand, amount_minor=100_000, rules=[LOGIN_500], slug="summer", min_payout_minor=600)
    reward = payable_reward(brand, account_iban=iban())
    result = payouts_create_for_payable()
    assert result.created == [] and result.waiting == 1 and payable_minor(reward.person_id) == 500


def test_four_eyes_above_the_threshold(sandbox, debtor, brand, campaign, settings):
    settings.PAYOUT_APPROVAL_THRESHOLD_MINOR = 500
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    payout = Payout.objects.get(pk=payout_id)
    assert payout.requires_approval and payout_execute(payout_id=payout.pk) == "not_claimed"
    # staff without the permission cannot approve; the approval is recorded with its approver
    with pytest.raises(PermissionDenied):
        payout_approve(payout=payout, approver=staff("intern"))
    olga = staff("olga", "approve_payout")
    payout_approve(payout=payout, approver=olga)
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.SETTLED
    payout.refresh_from_db()
    assert payout.approved_by == olga and payout.events.filter(kind="payout.approved", actor=olga).exists()
    with pytest.raises(InvalidTransition):
        payout_approve(payout=payout, approver=olga)


def test_the_creator_cannot_approve_their_own_payout(sandbox, debtor, brand, campaign, settings):
    settings.PAYOUT_APPROVAL_THRESHOLD_MINOR = 500
    olga = staff("olga", "approve_payout")
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable(actor=olga).created
    payout = Payout.objects.get(pk=payout_id)
    with pytest.raises(PermissionDenied):
        payout_approve(payout=payout, approver=olga)
    # and the database refuses it too
    with pytest.raises(IntegrityError), transaction.atomic():
        Payout.objects.filter(pk=payout.pk).update(approved_by=olga, approved_at=timezone.now())
    payout.refresh_from_db()
    assert payout.approved_by is None and payout.status == PayoutStatus.CREATED


def test_cancel_releases_the_rewards_and_moves_no_money(sandbox, debtor, brand, campaign):
    reward = payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    payout = Payout.objects.get(pk=payout_id)
    with pytest.raises(PermissionDenied):
        payout_cancel(payout=payout, actor=staff("intern"), reason="wrong person")
    payout_cancel(payout=payout, actor=staff("olga", "cancel_payout"), reason="wrong person")
    payout.refresh_from_db()
    assert (
        payout.status == PayoutStatus.CANCELLED and not PayoutItem.objects.filter(reward=reward, active=True).exists()
    )
    assert payable_minor(reward.person_id) == 500 and payout.sent_entry is None
    assert payout_execute(payout_id=payout.pk) == "not_claimed"


def test_sent_payout_cannot_be_cancelled(sandbox, debtor, brand, campaign):
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    with pytest.raises(InvalidTransition):
        payout_cancel(payout=Payout.objects.get(pk=payout_id), actor=staff("olga", "cancel_payout"), reason="late")


def test_retry_a_failed_payout_creates_a_new_one(sandbox, debtor, brand, campaign, settings):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "rejected:AG01"}
    payable_reward(brand, account_iban=account)
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    settings.SANDBOX_FAILING_IBANS = {}
    result = payout_retry(payout=Payout.objects.get(pk=payout_id), actor=staff("olga", "retry_payout"))
    (new_id,) = result.created
    assert new_id != payout_id and payout_execute(payout_id=new_id) == AttemptOutcome.SETTLED
    assert_books_ok()


def test_people_are_told_when_paid_returned_or_an_iban_is_needed(sandbox, debtor, brand, campaign):
    reward = payable_reward(brand, account_iban=iban(), email="giulia@example.com", whatsapp="+39 347 123 4567")
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    payout_settled_followup_task(payout_id)
    # when the notice recorded with the settlement is delivered twice (task and sweep)
    notices_send_due()
    notices_send_due()
    # then the reward is paid and the person got one email and one WhatsApp message
    reward.refresh_from_db()
    assert reward.status == "paid" and reward.payout_ref == Payout.objects.get(pk=payout_id).end_to_end_id
    assert [m.to for m in mail.outbox] == [["giulia@example.com"]] and "5.00" in mail.outbox[0].body
    assert [(m.to, m.template) for m in FakeWhatsAppSender.sent] == [("+393471234567", "payout_paid")]
    payout_mark_returned(payout=Payout.objects.get(pk=payout_id), reason_code="AC04", source="test")
    notices_send_due()
    assert FakeWhatsAppSender.sent[-1].template == "payout_returned"
    # a person without an IBAN is asked for one, once, however often the sweep looks
    waiting = payable_reward(brand, email="marco@example.com")
    payouts_create_for_payable()
    payouts_create_for_payable()
    notices_send_due()
    assert Notice.objects.filter(kind="iban_needed", person_id=waiting.person_id).count() == 1
    assert mail.outbox[-1].to == ["marco@example.com"] and "IBAN" in mail.outbox[-1].body


def test_a_reward_in_a_live_payout_is_not_clawed_back_until_the_payout_is_cancelled(sandbox, debtor, brand, campaign):
    from campaigns.models import RewardStatus
    from campaigns.services import reward_claw_back

    reward = payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created

    with pytest.raises(InvalidTransition) as refused:
        reward_claw_back(reward=reward, reason="fraud found late")

    assert refused.value.code == "reward_in_payout"
    reward.refresh_from_db()
    assert reward.status == RewardStatus.PAYABLE and reward.clawback_entry is None
    assert payable_minor(reward.person_id) == 500

    payout_cancel(payout=Payout.objects.get(pk=payout_id), actor=staff("olga", "cancel_payout"), reason="fraud")
    reward_claw_back(reward=reward, reason="fraud found late")
    reward.refresh_from_db()
    assert reward.status == RewardStatus.CLAWED_BACK and payable_minor(reward.person_id) == 0
    assert payout_execute(payout_id=payout_id) == "not_claimed"  # the cancelled payout sends nothing
    assert_books_ok()
