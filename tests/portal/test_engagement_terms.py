"""Honesty about paid engagement (issue 18): a rule paying for likes, comments or views carries a
platform-terms warning wherever it is made or read — the portal's rule form and preview, the
campaign page (in English and Italian) and the admin's campaign and rule."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from campaigns.models import ENGAGEMENT_TRIGGERS, Trigger
from tests.campaigns.factories import funded_campaign

pytestmark = pytest.mark.django_db

WARNING = "may breach TikTok"  # no apostrophe: pages escape it
AVVISO = "può violare i termini di TikTok"
LIKE_RULE = {
    "trigger": "like", "amount_type": "fixed", "amount": "1.00", "hold_days": "0", "approval_policy": "auto",
    "verification": "partner_attested", "preview": "1",
}  # fmt: skip


@pytest.fixture
def owner(owner_a):
    client = Client()
    client.force_login(owner_a)
    return client


@pytest.fixture
def engaging(brand_a):
    return funded_campaign(
        brand=brand_a, amount_minor=10_000, slug="views",
        rules=[{"trigger": "view_threshold", "fixed_minor": 300, "view_threshold": 1000}],
    )  # fmt: skip


def test_the_engagement_triggers_are_like_comment_and_views():
    assert set(ENGAGEMENT_TRIGGERS) == {Trigger.LIKE, Trigger.COMMENT, Trigger.VIEW_THRESHOLD}


def test_the_rule_form_and_its_preview_warn_about_a_like_rule(owner, campaign_a):
    url = f"/portal/alpha/campaigns/{campaign_a.pk}/rules/new/"

    page = owner.post(url, LIKE_RULE)

    assert page.status_code == 200
    assert WARNING in page.context["preview"].warning
    assert page.content.decode().count('data-testid="terms-warning"') == 1
    assert "cannot be verified" in page.content.decode()


def test_a_purchase_rule_gets_no_warning(owner, campaign_a):
    url = f"/portal/alpha/campaigns/{campaign_a.pk}/rules/new/"

    page = owner.post(url, {**LIKE_RULE, "trigger": "purchase"})

    assert page.context["preview"].warning == ""
    assert WARNING not in page.content.decode()
    assert WARNING not in owner.get(url).content.decode()


def test_the_campaign_page_warns_only_on_an_engagement_rule(owner, engaging, campaign_a):
    assert WARNING in owner.get(f"/portal/alpha/campaigns/{engaging.pk}/").content.decode()
    assert WARNING not in owner.get(f"/portal/alpha/campaigns/{campaign_a.pk}/").content.decode()


def test_the_warning_is_italian_in_the_italian_portal(owner, engaging):
    owner.cookies["django_language"] = "it"

    page = owner.get(f"/portal/alpha/campaigns/{engaging.pk}/").content.decode()

    assert AVVISO in page and WARNING not in page


def test_the_admin_shows_the_warning_on_the_campaign_and_its_rule(client, engaging, campaign_a):
    client.force_login(get_user_model().objects.create_superuser("ops-terms", "ops@example.com", "x"))

    page = client.get(reverse("admin:campaigns_campaign_change", args=[engaging.pk])).content.decode()
    plain = client.get(reverse("admin:campaigns_campaign_change", args=[campaign_a.pk])).content.decode()

    assert page.count(WARNING) == 2  # the campaign's field and the rule's
    assert WARNING not in plain
