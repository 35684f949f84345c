"""Another brand's data never decides or reveals (issue 25, DESIGN §5): Joy Shoes registers Vera
with her IBAN; Rival Shop sends people and events with that IBAN (and Vera's IP). Rival's word
alone moves none of Joy's outcomes, and nothing Rival reads names a signal made of Joy's data;
ops read every signal in the admin."""

import pytest

from campaigns.models import Reward, RewardEvent, RewardStatus, TriggerEvent, WebhookEvent
from campaigns.services import reward_void
from campaigns.webhooks import webhook_endpoint_create, webhook_events_collect
from recipients.models import BankAccount, Person
from tests.api.conftest import ingest
from tests.recipients.factories import iban

pytestmark = pytest.mark.django_db

VERA_EMAIL = "vera@example.com"
VERA_IBAN = iban("NL", 21)
VERA_IP = "203.0.113.9"


@pytest.fixture
def vera(api, campaign):
    created = api.post("/api/v1/people/", {"name": "Vera", "email": VERA_EMAIL, "iban": VERA_IBAN}, format="json")
    assert created.status_code == 201, created.content
    return Person.objects.get(pk=created.json()["id"])


def rival_event(rival_api, external_id: str, **fields) -> dict:
    response = rival_api.post(
        "/api/v1/events/",
        {"external_id": external_id, "campaign": "summer", "type": "tiktok_login", **fields},
        format="json",
    )
    assert response.status_code in (200, 201), response.content
    return response.json()["event"]


def seen_by_brand(event: dict) -> tuple:
    return event["outcome"], event["reason"], event["review_reasons"]


def test_rival_registrations_of_her_iban_do_not_push_her_next_reward_into_review(vera, campaign, rival_api):
    # given Rival registers five "people" with Vera's IBAN (above the default of 3 per IBAN)
    for n in range(5):
        mule = {"email": f"mule{n}@example.com", "iban": VERA_IBAN}
        response = rival_api.post("/api/v1/people/", mule, format="json")
        assert response.status_code in (200, 201), response.content  # one person at Rival, five e-mails
    # when Joy rewards Vera
    result = ingest(campaign, email=VERA_EMAIL)
    # then her reward is not in review: Rival's word proves no one is paid into her IBAN
    assert result.reward.person_id == vera.pk
    assert result.reward.status == RewardStatus.HELD and result.reward.review_reasons == []


def test_rival_events_with_her_iban_answer_as_with_a_fresh_iban(vera, rival_campaign, rival_api):
    rival_campaign.fraud_max_people_per_iban = 1
    rival_campaign.save(update_fields=["fraud_max_people_per_iban"])

    with_hers = rival_event(rival_api, "r-1", email="someone@example.com", iban=VERA_IBAN)
    with_fresh = rival_event(rival_api, "r-2", email="another@example.com", iban=iban("NL", 22))

    assert seen_by_brand(with_hers) == seen_by_brand(with_fresh) == ("rewarded", "", [])
    assert not TriggerEvent.objects.exclude(review_reasons=[]).exists()


def test_a_holder_paid_at_her_brand_counts_and_the_rival_reads_only_review(
    vera, rival_campaign, rival_api, admin_client
):
    # given Vera's bank confirmed her name on her account (Verification of Payee)
    BankAccount.objects.filter(person=vera).update(payee_check_result="match")
    rival_campaign.fraud_max_people_per_iban = 1
    rival_campaign.save(update_fields=["fraud_max_people_per_iban"])

    # when Rival sends an event with her IBAN for another e-mail
    seen = rival_event(rival_api, "r-1", email="someone@example.com", iban=VERA_IBAN)

    # then ops see why it waits, Rival reads only that it waits
    stored = TriggerEvent.objects.get(brand=rival_campaign.brand, external_id="r-1")
    assert stored.review_reasons == ["iban_shared_by_many_people"]
    assert seen_by_brand(seen) == ("review", "", ["review"])
    reward = Reward.objects.get(event=stored)
    read = rival_api.get(f"/api/v1/rewards/{reward.pk}/").json()
    assert read["status"] == "review" and read["review_reasons"] == ["review"]
    assert rival_api.get(f"/api/v1/events/{stored.pk}/").json()["review_reasons"] == ["review"]
    listed = rival_api.get("/api/v1/rewards/").json()
    assert "iban_shared" not in str(listed) and "iban_shared" not in str(rival_api.get("/api/v1/events/").json())
    page = admin_client.get(f"/admin/campaigns/rewardinreview/{reward.pk}/change/")
    assert page.status_code == 200 and b"iban_shared_by_many_people" in page.content
    queue = admin_client.get("/admin/campaigns/rewardinreview/")
    assert queue.status_code == 200 and b"iban_shared_by_many_people" in queue.content


def test_the_rivals_own_registrations_count_for_the_rival(vera, rival_campaign, rival_api):
    """Within a brand every holder counts: a brand's own data may decide its own outcomes."""
    rival_campaign.fraud_max_people_per_iban = 1
    rival_campaign.save(update_fields=["fraud_max_people_per_iban"])
    rival_api.post("/api/v1/people/", {"email": "first@example.com", "iban": VERA_IBAN}, format="json")

    seen = rival_event(rival_api, "r-1", email="second@example.com", iban=VERA_IBAN)

    assert seen_by_brand(seen) == ("review", "", ["review"])
    assert TriggerEvent.objects.get(external_id="r-1").review_reasons == ["iban_shared_by_many_people"]


@pytest.mark.parametrize(
    ("threshold", "rival_fields"),
    [
        ({"fraud_max_events_per_ip_hour": 2}, {"ip": VERA_IP}),
        ({"fraud_max_events_per_device_hour": 2}, {"device_fingerprint": "veras-phone"}),
        ({"fraud_max_iban_claims_per_day": 2}, {"iban": VERA_IBAN}),
    ],
)
def test_rival_velocity_does_not_push_her_reward_into_review(
    vera, campaign, rival_campaign, rival_api, threshold, rival_fields
):
    # given Rival rewarded three events with her IP, her device or her IBAN in the last hour
    for n in range(3):
        seen = rival_event(rival_api, f"r-{n}", email=f"fan{n}@example.com", **rival_fields)
        assert seen["outcome"] == "rewarded"
    for name, value in threshold.items():
        setattr(campaign, name, value)
    campaign.save(update_fields=list(threshold))

    # when Joy rewards Vera from the same IP and device
    result = ingest(campaign, email=VERA_EMAIL, ip=VERA_IP, device_fingerprint="veras-phone")

    # then only Joy's own events and rewards counted: none before this one
    assert result.reward.status == RewardStatus.HELD and result.reward.review_reasons == []


def test_a_webhook_never_names_a_fraud_signal(vera, rival_campaign, rival_api, receiver):
    """A reward voided with the stored reasons (as a sweep voiding what waited in review would)
    is announced with what the brand may read."""
    BankAccount.objects.filter(person=vera).update(payee_check_result="match")
    rival_campaign.fraud_max_people_per_iban = 1
    rival_campaign.save(update_fields=["fraud_max_people_per_iban"])
    webhook_endpoint_create(brand=rival_campaign.brand, url=receiver.url, event_types=["reward.voided"])
    rival_event(rival_api, "r-1", email="someone@example.com", iban=VERA_IBAN)
    reward = Reward.objects.get(event__external_id="r-1")

    reward_void(reward=reward, reason=",".join(reward.review_reasons))
    webhook_events_collect()

    (announced,) = WebhookEvent.objects.filter(brand=rival_campaign.brand, type="reward.voided")
    assert announced.data["reason"] == "review"
    assert RewardEvent.objects.filter(reward=reward, kind="reward.voided").get().reason == "iban_shared_by_many_people"
