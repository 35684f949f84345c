"""The Verification of Payee policy of a campaign: sensible defaults, a database that refuses an
action an answer cannot take, editable by the brand in the portal (its own campaigns only) and
the admin, read-only in the partner API."""

import pytest
from django.db import IntegrityError, transaction
from django.test import Client

from campaigns.api_keys import api_key_create
from campaigns.models import UNDO_POLICY_FIELDS, Campaign, CampaignEvent, VopAction
from tests.api.conftest import client_for
from tests.portal.conftest import brand_a, brand_b, campaign_a, member  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def test_defaults_review_a_mismatch_ask_about_a_close_one_and_pay_when_no_check_is_possible(campaign_a):  # noqa: F811
    assert (campaign_a.vop_no_match, campaign_a.vop_close_match, campaign_a.vop_not_possible) == (
        VopAction.REVIEW,
        VopAction.ASK,
        VopAction.PAY,
    )


@pytest.mark.parametrize("field", ["vop_no_match", "vop_not_possible"])
def test_the_database_refuses_asking_about_an_answer_without_a_name(campaign_a, field):  # noqa: F811
    with pytest.raises(IntegrityError), transaction.atomic():
        Campaign.objects.filter(pk=campaign_a.pk).update(**{field: VopAction.ASK})


def test_the_database_refuses_an_unknown_action(campaign_a):  # noqa: F811
    with pytest.raises(IntegrityError), transaction.atomic():
        Campaign.objects.filter(pk=campaign_a.pk).update(vop_close_match="maybe")


def _edit_form(campaign: Campaign, **policy) -> dict:
    """The edit form as the browser posts it: what the campaign has, with ``policy`` changed (a
    ticked checkbox is sent, an unticked one is not)."""
    return {
        "name": campaign.name,
        "ends_at": "",
        "payout_mode": campaign.payout_mode,
        "aggregate_minutes": "0",
        **{field: "on" for field in UNDO_POLICY_FIELDS if getattr(campaign, field)},
        **policy,
    }


def test_the_brand_changes_the_policy_of_its_live_campaign(brand_a, campaign_a):  # noqa: F811
    owner = Client()
    owner.force_login(member(brand_a))

    response = owner.post(
        f"/portal/alpha/campaigns/{campaign_a.pk}/edit/",
        _edit_form(campaign_a, vop_no_match="block", vop_close_match="review", vop_not_possible="review"),
    )

    assert response.status_code == 302
    campaign_a.refresh_from_db()
    assert (campaign_a.vop_no_match, campaign_a.vop_close_match, campaign_a.vop_not_possible) == (
        "block",
        "review",
        "review",
    )
    changed = CampaignEvent.objects.filter(campaign=campaign_a, kind="campaign.updated").latest("id")
    assert changed.data["fields"] == ["vop_close_match", "vop_no_match", "vop_not_possible"]


def test_asking_is_refused_for_a_mismatch_in_the_portal(brand_a, campaign_a):  # noqa: F811
    owner = Client()
    owner.force_login(member(brand_a))

    response = owner.post(f"/portal/alpha/campaigns/{campaign_a.pk}/edit/", _edit_form(campaign_a, vop_no_match="ask"))

    assert response.status_code == 200 and "vop_no_match" in response.context["form"].errors
    campaign_a.refresh_from_db()
    assert campaign_a.vop_no_match == VopAction.REVIEW


def test_another_brand_can_neither_see_nor_change_the_policy(brand_b, campaign_a):  # noqa: F811
    intruder = Client()
    intruder.force_login(member(brand_b))

    response = intruder.post(
        f"/portal/beta/campaigns/{campaign_a.pk}/edit/", _edit_form(campaign_a, vop_no_match="pay")
    )

    assert response.status_code == 404
    campaign_a.refresh_from_db()
    assert campaign_a.vop_no_match == VopAction.REVIEW
    assert not CampaignEvent.objects.filter(campaign=campaign_a, kind="campaign.updated").exists()


def test_the_partner_api_shows_the_policy(brand_a, campaign_a):  # noqa: F811
    api = client_for(api_key_create(brand=brand_a, name="backend", scopes=["read"]).token)

    shown = api.get(f"/api/v1/campaigns/{campaign_a.pk}/").json()

    assert (shown["vop_no_match"], shown["vop_close_match"], shown["vop_not_possible"]) == ("review", "ask", "pay")


def test_staff_edit_the_policy_in_the_admin(admin_client, campaign_a):  # noqa: F811
    page = admin_client.get(f"/admin/campaigns/campaign/{campaign_a.pk}/change/")

    assert page.status_code == 200
    for field in ("vop_no_match", "vop_close_match", "vop_not_possible"):
        assert f'name="{field}"' in page.content.decode()
