"""The tenant-isolation matrix: a key of brand A gets 404 for brand B's ids on every endpoint
that takes an id, for every method, and B's objects never appear in A's lists."""

import pytest
from django.urls import get_resolver
from django.utils import timezone

from campaigns.models import WebhookEndpoint, WebhookEndpointEvent
from campaigns.webhooks import webhook_endpoint_create, webhook_events_collect
from payouts.models import Payout, PayoutItem
from recipients.models import BankAccount, Person
from tests.api.conftest import assert_problem, ingest

# Every /api/v1/ route with an id, the methods it answers, and the rival object its id names.
ID_ROUTES = {
    "campaigns/<int:pk>/": (["get"], "campaign"),
    "campaigns/<int:pk>/status/": (["post"], "campaign"),
    "campaigns/<int:pk>/rules/": (["get", "post"], "campaign"),
    "campaigns/<int:pk>/stats/": (["get"], "campaign"),
    "campaigns/<int:pk>/stats.csv": (["get"], "campaign"),
    "rules/<int:pk>/": (["get"], "rule"),
    "events/<int:pk>/": (["get"], "event"),
    "people/<int:pk>/": (["get", "patch"], "person"),
    "rewards/<int:pk>/": (["get"], "reward"),
    "rewards/<int:pk>/approve/": (["post"], "reward"),
    "rewards/<int:pk>/void/": (["post"], "reward"),
    "payouts/<int:pk>/": (["get"], "payout"),
    "webhook-endpoints/<int:pk>/": (["get", "delete"], "endpoint"),
    "webhook-endpoints/<int:pk>/rotate-secret/": (["post"], "endpoint"),
    "webhook-endpoints/<int:pk>/enable/": (["post"], "endpoint"),
    "webhook-endpoints/<int:pk>/deliveries/": (["get"], "endpoint"),
    "webhook-deliveries/<int:pk>/redeliver/": (["post"], "delivery"),
}
LIST_ROUTES = ["campaigns/", "events/", "rewards/", "payouts/", "webhook-endpoints/"]
BODIES = {
    "post": {"status": "paused", "reason": "x", "trigger": "like", "fixed_minor": 1},
    "patch": {"email": "x@example.com"},
}


def make_payout(rewards) -> Payout:
    """A created payout carrying ``rewards`` (the read side only needs the rows)."""
    now = timezone.now()
    person = rewards[0].person
    payout = Payout.objects.create(
        person=person, amount_minor=sum(r.amount_minor for r in rewards), currency="EUR", rail="sandbox",
        end_to_end_id=f"E2E{rewards[0].pk:010d}", creditor_name="Fan", creditor_country="NL",
        debtor_account_code="platform:bank:NL91ABNA0417164300:EUR", created_at=now, updated_at=now,
    )  # fmt: skip
    for reward in rewards:
        PayoutItem.objects.create(payout=payout, reward=reward, amount_minor=reward.amount_minor)
    return payout


def test_every_id_route_is_in_the_matrix():
    """A new endpoint with an id must be added above, or this fails."""
    v1 = next(p for p in get_resolver("config.api_urls").url_patterns if str(p.pattern) == "v1/")
    routes = {str(p.pattern) for p in v1.url_patterns if "<int:pk>" in str(p.pattern)}
    assert routes == set(ID_ROUTES)


@pytest.fixture
def rival_objects(rival, rival_campaign):
    result = ingest(rival_campaign, email="rival-fan@example.com")
    endpoint = webhook_endpoint_create(brand=rival, url="https://rival.example/h", event_types=[]).endpoint
    webhook_events_collect()
    # Disabled for failing, so a leaking "enable" would show in the snapshot.
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        is_active=False, disabled_at=timezone.now(), disabled_reason="failing", failure_streak=3
    )
    return {
        "campaign": rival_campaign.pk,
        "rule": rival_campaign.rules.get().pk,
        "event": result.event.pk,
        "person": result.event.person_id,
        "reward": result.reward.pk,
        "payout": make_payout([result.reward]).pk,
        "endpoint": endpoint.pk,
        "delivery": endpoint.deliveries.first().pk,
    }


@pytest.mark.parametrize(
    ("route", "method"), [(route, method) for route, (methods, _) in ID_ROUTES.items() for method in methods]
)
def test_rival_ids_are_404(api, campaign, rival_objects, route, method):
    """Brand A's key (with every scope) names brand B's object: 404, and B's object is unchanged."""
    kind = ID_ROUTES[route][1]
    url = "/api/v1/" + route.replace("<int:pk>", str(rival_objects[kind]))
    before = _snapshot()
    response = getattr(api, method)(url, BODIES.get(method, {}), format="json")
    assert response.status_code == 404, response.content
    assert response.json()["code"] in ("not_found", "campaign_not_found")
    assert _snapshot() == before


@pytest.mark.parametrize("route", LIST_ROUTES)
def test_lists_never_show_rival_objects(api, campaign, rival_objects, route):
    ingest(campaign)
    results = api.get(f"/api/v1/{route}").json()["results"]
    own = {"campaigns/": "campaign", "events/": "event", "rewards/": "reward", "payouts/": "payout",
           "webhook-endpoints/": "endpoint"}[route]  # fmt: skip
    assert rival_objects[own] not in {r["id"] for r in results}


def test_balances_show_only_own_campaigns(api, campaign, rival_objects):
    assert [c["campaign_id"] for c in api.get("/api/v1/balances/").json()["campaigns"]] == [campaign.pk]


def test_events_cannot_target_a_rival_campaign_by_slug(api, brand, rival_campaign):
    response = api.post(
        "/api/v1/events/", {"external_id": "x", "campaign": rival_campaign.slug, "type": "tiktok_login",
                            "email": "a@example.com"}, format="json",
    )  # fmt: skip
    assert_problem(response, 404, "campaign_not_found")


def _snapshot():
    from campaigns.models import Campaign, Reward, RewardRule, WebhookDelivery

    return (
        list(Campaign.objects.values_list("id", "status").order_by("id")),
        list(RewardRule.objects.values_list("id").order_by("id")),
        list(Reward.objects.values_list("id", "status").order_by("id")),
        list(Person.objects.values_list("id", "merged_into_id").order_by("id")),
        BankAccount.objects.count(),
        list(
            WebhookEndpoint.objects.values_list("id", "is_active", "failure_streak", "secret_ciphertext").order_by("pk")
        ),
        list(WebhookDelivery.objects.values_list("id", "status", "next_attempt_at").order_by("id")),
        WebhookEndpointEvent.objects.count(),
    )
