"""The cross-object audit view: one list over reward, payout, campaign and person events, with
filters and a CSV export that keeps them (issue 18)."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model

from campaigns.services import event_ingest, reward_void
from recipients.models import PersonEvent, PersonEventKind
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("auditor", password="x")
    client.force_login(user)
    return client, user


@pytest.fixture
def voided(admin_client):
    _, user = admin_client
    brand = BrandFactory(name="Audit Admin", slug="audit-admin")
    funded_campaign(brand=brand, amount_minor=10_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 100}])
    reward = event_ingest(brand=brand, payload=event()).reward
    reward_void(reward=reward, actor=user, reason="refund, ticket 81")
    PersonEvent.objects.create(person=reward.person, kind=PersonEventKind.LINK_REFUSED, detail={"kinds": ["email"]})
    return reward


def test_the_trail_lists_events_of_every_kind_of_object(admin_client, voided):
    client, _ = admin_client

    page = client.get("/admin/core/audittrail/")

    assert page.status_code == 200
    text = page.content.decode()
    for kind in ("reward.voided", "reward.held", "campaign.launched", "link_refused"):
        assert kind in text


def test_filters_narrow_the_list_and_the_csv_keeps_them(admin_client, voided):
    client, user = admin_client

    page = client.get("/admin/core/audittrail/", {"object_type": "reward", "actor__id__exact": user.pk})
    export = client.get("/admin/core/audittrail/export/", {"object_type": "reward", "actor__id__exact": user.pk})

    assert [row.kind for row in page.context["cl"].result_list] == ["reward.voided"]
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [(r["object_type"], r["object_id"], r["kind"], r["actor"], r["reason"]) for r in rows] == [
        ("reward", str(voided.pk), "reward.voided", "auditor", "refund, ticket 81")
    ]


def test_staff_without_the_permission_get_no_export(client, voided):
    client.force_login(get_user_model().objects.create_user("clerk", password="x", is_staff=True))

    assert client.get("/admin/core/audittrail/export/").status_code == 403
