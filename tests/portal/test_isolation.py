"""Tenant isolation: a member of brand A gets 404 for every page of brand B and for every object
of brand B reached through brand A's URLs, and nothing of B changes."""

import pytest
from django.test import Client
from django.utils import timezone

from campaigns.api_keys import api_key_create
from campaigns.models import ApiKey, BrandInvitation, BrandMembership, Campaign, RewardRule, WebhookEndpoint
from campaigns.webhooks import webhook_endpoint_create
from tests.portal.conftest import make_user
from web.portal.services import invitation_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def b_objects(brand_b, owner_b, campaign_b):
    rule = RewardRule.objects.get(campaign=campaign_b)
    key = api_key_create(brand=brand_b, name="B key", scopes=["read"]).key
    endpoint = webhook_endpoint_create(brand=brand_b, url="https://b.example/hook", event_types=[]).endpoint
    # Disabled for failing, so a leaking "enable" would show in the snapshot.
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(is_active=False, disabled_at=timezone.now())
    invitation = invitation_create(
        brand=brand_b, email="new@b.example", role="analyst", invited_by=owner_b, accept_url_base="http://x/i"
    )
    membership = BrandMembership.objects.get(brand=brand_b, user=owner_b)
    return {
        "campaign": campaign_b.pk,
        "rule": rule.pk,
        "key": key.pk,
        "endpoint": endpoint.pk,
        "invitation": invitation.pk,
        "membership": membership.pk,
    }


def page_urls(brand: str, o: dict) -> list[str]:
    c = f"/portal/{brand}/campaigns/{o['campaign']}"
    return [
        f"/portal/{brand}/",
        f"/portal/{brand}/campaigns/",
        f"/portal/{brand}/campaigns/new/",
        f"{c}/",
        f"{c}/edit/",
        f"{c}/analytics/",
        f"{c}/analytics.csv",
        f"{c}/rules/new/",
        f"{c}/rules/{o['rule']}/edit/",
        f"/portal/{brand}/analytics/",
        f"/portal/{brand}/funding/",
        f"/portal/{brand}/rewards/",
        f"/portal/{brand}/rewards/?format=csv",
        f"/portal/{brand}/payouts/",
        f"/portal/{brand}/payouts/?format=csv",
        f"/portal/{brand}/team/",
        f"/portal/{brand}/api-keys/",
        f"/portal/{brand}/webhooks/",
        f"/portal/{brand}/webhooks/{o['endpoint']}/",
    ]


def post_urls(brand: str, o: dict) -> list[str]:
    c = f"/portal/{brand}/campaigns/{o['campaign']}"
    return [
        f"{c}/allocate/",
        f"{c}/pause/",
        f"{c}/end/",
        f"{c}/rules/{o['rule']}/retire/",
        f"{c}/rules/new/",
        f"/portal/{brand}/team/invite/",
        f"/portal/{brand}/team/invitations/{o['invitation']}/revoke/",
        f"/portal/{brand}/team/members/{o['membership']}/",
        f"/portal/{brand}/api-keys/{o['key']}/revoke/",
        f"/portal/{brand}/webhooks/{o['endpoint']}/rotate/",
        f"/portal/{brand}/webhooks/{o['endpoint']}/delete/",
        f"/portal/{brand}/webhooks/{o['endpoint']}/enable/",
        f"/portal/{brand}/api-keys/",
        f"/portal/{brand}/webhooks/",
    ]


def _snapshot(brand):
    return (
        list(Campaign.objects.filter(brand=brand).values_list("status", "name")),
        list(RewardRule.objects.filter(campaign__brand=brand).values_list("is_active", flat=True)),
        list(ApiKey.objects.filter(brand=brand).values_list("revoked_at", flat=True)),
        list(BrandInvitation.objects.filter(brand=brand).values_list("status", flat=True)),
        list(BrandMembership.objects.filter(brand=brand).values_list("role", flat=True)),
        list(brand.webhook_endpoints.values_list("secret_ciphertext", "is_active")),
    )


def test_a_member_sees_404_for_every_page_of_another_brand(brand_b, owner_a, campaign_a, b_objects):
    client = Client()
    client.force_login(owner_a)
    for url in page_urls("beta", b_objects):
        assert client.get(url).status_code == 404, url


def test_another_brands_objects_behind_my_brand_slug_are_404(brand_b, owner_a, campaign_a, b_objects):
    # given A's owner, who may see every page of A
    client = Client()
    client.force_login(owner_a)
    for url in page_urls("alpha", b_objects)[3:7] + [page_urls("alpha", b_objects)[-1]]:
        # when they put B's ids behind A's slug, then nothing is found
        assert client.get(url).status_code == 404, url


def test_posts_into_another_brand_change_nothing(brand_b, owner_a, campaign_a, b_objects):
    client = Client()
    client.force_login(owner_a)
    before = _snapshot(brand_b)
    for url in post_urls("beta", b_objects) + post_urls("alpha", b_objects)[:5] + post_urls("alpha", b_objects)[6:11]:
        response = client.post(
            url,
            {
                "amount": "10",
                "role": "owner",
                "email": "x@y.z",
                "name": "k",
                "scopes": ["read"],
                "url": "https://evil.example",
                "idempotency_key": "k1",
            },
        )
        assert response.status_code == 404, url
    assert _snapshot(brand_b) == before


def test_the_pages_of_my_own_brand_answer(owner_a, campaign_a, brand_a):
    client = Client()
    client.force_login(owner_a)
    rule = RewardRule.objects.get(campaign=campaign_a)
    own = {"campaign": campaign_a.pk, "rule": rule.pk, "endpoint": 0}
    for url in page_urls("alpha", own)[:-1]:
        if "/rules/" in url and "edit" in url:
            continue  # a launched campaign's rules are not editable (covered in test_campaigns)
        assert client.get(url).status_code == 200, url


def test_an_analyst_reads_but_cannot_write(brand_a, analyst_a, campaign_a):
    client = Client()
    client.force_login(analyst_a)
    assert client.get("/portal/alpha/").status_code == 200
    assert client.get(f"/portal/alpha/campaigns/{campaign_a.pk}/").status_code == 200
    assert client.post(f"/portal/alpha/campaigns/{campaign_a.pk}/pause/").status_code == 404
    assert client.get("/portal/alpha/campaigns/new/").status_code == 404
    assert client.post("/portal/alpha/team/invite/", {"email": "a@b.c", "role": "owner"}).status_code == 404
    client.post("/portal/alpha/api-keys/", {"name": "k", "scopes": ["read"]})
    campaign_a.refresh_from_db()
    assert campaign_a.status == "active" and not ApiKey.objects.filter(brand=brand_a).exists()


def test_anonymous_visitors_are_sent_to_the_login(campaign_a):
    response = Client().get("/portal/alpha/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_user_in_no_brand_gets_404(brand_a, campaign_a):
    client = Client()
    client.force_login(make_user("nobody@example.com"))
    assert client.get("/portal/alpha/").status_code == 404
