"""Four-eyes across the whole chain of one payment (issue 25, DESIGN §5): whoever approved a
reward in review cannot give the payout (or the pain.001 file) that pays it its second approval;
a different person can. The services refuse with ``four_eyes`` and the database refuses too."""

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.models import Reward
from campaigns.services import event_ingest, reward_approve, rewards_mature
from core.exceptions import PermissionDenied
from payouts.models import AttemptOutcome, Payout, PayoutBatch, PayoutEvent, PayoutStatus, RouteRule
from payouts.services import (
    payout_approve,
    payout_batch_approve,
    payout_batch_create,
    payout_execute,
    payouts_create_for_payable,
)
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import iban, staff

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

REVIEWED_1200 = {"trigger": "tiktok_login", "fixed_minor": 120_000, "approval_policy": "always_review"}


@pytest.fixture
def reviewed_campaign(brand):
    return funded_campaign(brand=brand, amount_minor=1_000_000, rules=[REVIEWED_1200])


def reviewed_payout(brand, reviewer) -> Payout:
    """A 1,200.00 reward approved in review by ``reviewer``, then its payout (above the threshold)."""
    result = event_ingest(brand=brand, payload=event(iban=iban(), name="Giulia Rossi"))
    reward_approve(reward=result.reward, actor=reviewer)
    rewards_mature()
    assert Reward.objects.get(pk=result.reward.pk).decided_by == reviewer
    (payout_id,) = payouts_create_for_payable().created
    payout = Payout.objects.get(pk=payout_id)
    assert payout.requires_approval and payout.amount_minor == 120_000
    return payout


def test_the_reward_approver_cannot_also_approve_its_payout(sandbox, debtor, brand, reviewed_campaign):
    rita = staff("rita", "approve_payout")
    payout = reviewed_payout(brand, rita)
    # when the same login gives the payout its "second" approval
    with pytest.raises(PermissionDenied) as refused:
        payout_approve(payout=payout, approver=rita)
    # then it is refused with a stable code, and nothing changed or was sent
    assert refused.value.code == "four_eyes"
    payout.refresh_from_db()
    assert payout.approved_by is None and payout.approved_at is None and payout.status == PayoutStatus.CREATED
    assert not PayoutEvent.objects.filter(payout=payout, kind="payout.approved").exists()
    assert payout_execute(payout_id=payout.pk) == "not_claimed" and sandbox.total_transfers() == 0
    # a different person approves it, and it is sent
    olga = staff("olga", "approve_payout")
    payout_approve(payout=payout, approver=olga)
    assert payout_execute(payout_id=payout.pk) == AttemptOutcome.SETTLED
    payout.refresh_from_db()
    assert payout.approved_by == olga and sandbox.total_transfers() == 1


def test_the_database_refuses_the_reward_approver_as_payout_approver(sandbox, debtor, brand, reviewed_campaign):
    rita = staff("rita", "approve_payout")
    payout = reviewed_payout(brand, rita)
    with pytest.raises(IntegrityError, match="four-eyes"), transaction.atomic():
        Payout.objects.filter(pk=payout.pk).update(approved_by=rita, approved_at=timezone.now())
    payout.refresh_from_db()
    assert payout.approved_by is None
    Payout.objects.filter(pk=payout.pk).update(approved_by=staff("olga"), approved_at=timezone.now())


def test_the_reward_approver_cannot_approve_the_file_that_pays_it(sandbox, debtor, brand, reviewed_campaign, settings):
    settings.PAYOUT_APPROVAL_THRESHOLD_MINOR = 10_000_000  # the file's approval is the four-eyes step
    settings.PAYOUT_BATCH_APPROVAL_THRESHOLD_MINOR = 1_000
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    rita = staff("rita", "approve_payoutbatch")
    result = event_ingest(brand=brand, payload=event(iban=iban(), name="Giulia Rossi"))
    reward_approve(reward=result.reward, actor=rita)
    rewards_mature()
    payouts_create_for_payable()
    batch = payout_batch_create(actor=staff("ugo"))
    assert batch.requires_approval
    with pytest.raises(PermissionDenied) as refused:
        payout_batch_approve(batch=batch, approver=rita)
    assert refused.value.code == "four_eyes"
    batch.refresh_from_db()
    assert batch.approved_by is None and not batch.events.filter(kind="batch.approved").exists()
    with pytest.raises(IntegrityError, match="four-eyes"), transaction.atomic():
        PayoutBatch.objects.filter(pk=batch.pk).update(approved_by=rita, approved_at=timezone.now())
    payout_batch_approve(batch=batch, approver=staff("piero", "approve_payoutbatch"))
    batch.refresh_from_db()
    assert batch.approved_by.username == "piero"
