"""The maturing task is scheduled every minute and only calls the service."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule

from campaigns.models import RewardStatus
from campaigns.services import event_ingest
from campaigns.tasks import MATURE_SCHEDULE_NAME, rewards_mature_task
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign

pytestmark = pytest.mark.django_db


def test_maturing_is_scheduled_every_minute():
    schedule = Schedule.objects.get(name=MATURE_SCHEDULE_NAME)
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == ("campaigns.tasks.rewards_mature_task", "I", 1)


def test_task_makes_due_rewards_payable_and_leaves_the_rest(free_brand):
    funded_campaign(brand=free_brand, amount_minor=5_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}])
    due = event_ingest(brand=free_brand, payload=event()).reward
    later = event_ingest(brand=free_brand, payload=event(occurred_at=timezone.now() + timedelta(minutes=4))).reward
    assert rewards_mature_task() == 1
    due.refresh_from_db()
    later.refresh_from_db()
    assert (due.status, later.status) == (RewardStatus.PAYABLE, RewardStatus.HELD)
