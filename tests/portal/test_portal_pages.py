"""The portal's own behaviour: campaigns and rules with the preview, money moved to a campaign
once per form, launch/pause, funding instructions with the SEPA QR payload, the CSV export, the
team (invitations and the last owner), API keys shown once."""

import re
from datetime import date, timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from campaigns.models import ApiKey, BrandMembership, Campaign, RewardRule
from campaigns.services import brand_topup_record, campaign_allocate, campaign_resume, event_ingest
from tests.campaigns.conftest import event
from tests.portal.conftest import make_user
from web.portal.charts import axis_top, bar_chart_svg
from web.portal.history import campaign_history
from web.portal.qr import epc_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(owner_a):
    client = Client()
    client.force_login(owner_a)
    return client


def test_create_campaign_add_rule_with_preview_and_launch(owner, brand_a):
    created = owner.post(
        "/portal/alpha/campaigns/new/",
        {
            "name": "Winter",
            "mode": "cashback",
            "currency": "EUR",
            "starts_at": "2026-01-01T00:00",
            "timezone": "Europe/Rome",
            "payout_mode": "instant",
            "aggregate_minutes": "0",
        },
    )
    campaign = Campaign.objects.get(brand=brand_a, slug="winter")
    assert created["Location"].endswith(f"/campaigns/{campaign.pk}/rules/new/")
    rule = {
        "trigger": "purchase",
        "amount_type": "percent",
        "percent": "10",
        "min_amount": "1.00",
        "max_amount": "20.00",
        "hold_days": "14",
        "approval_policy": "auto",
        "verification": "partner_attested",
    }
    # preview: nothing saved, the person's terms spelled out
    preview = owner.post(f"/portal/alpha/campaigns/{campaign.pk}/rules/new/", {**rule, "preview": "1"})
    lines = preview.context["preview"].lines
    assert "10% of the purchase (at least €1.00, at most €20.00)" in lines[0]
    assert any("paid 14 days later" in line for line in lines)
    assert preview.context["preview"].examples[1][:2] == ("€50.00", "€5.00")
    assert not RewardRule.objects.filter(campaign=campaign).exists()
    # save; launching with no budget is refused with a word (it would pause at its first event)
    owner.post(f"/portal/alpha/campaigns/{campaign.pk}/rules/new/", {**rule, "save": "1"})
    assert RewardRule.objects.filter(campaign=campaign, percent_bps=1000).exists()
    refused = owner.post(f"/portal/alpha/campaigns/{campaign.pk}/launch/", follow=True)
    assert "allocate money to the campaign first" in refused.content.decode()
    campaign.refresh_from_db()
    assert campaign.status == "draft"
    brand_topup_record(
        brand=brand_a, amount_minor=5_000, currency="EUR", bank_account_code="NL00", idempotency_key="w-topup"
    )
    campaign_allocate(campaign=campaign, amount_minor=5_000, idempotency_key="w-alloc")
    owner.post(f"/portal/alpha/campaigns/{campaign.pk}/launch/")
    campaign.refresh_from_db()
    assert campaign.status == "active"


def test_an_invalid_rule_is_refused_on_its_fields(owner, brand_a):
    campaign = Campaign.objects.create(
        brand=brand_a, name="X", slug="x", mode="joyback", currency="EUR", starts_at="2026-01-01T00:00Z"
    )
    page = owner.post(
        f"/portal/alpha/campaigns/{campaign.pk}/rules/new/",
        {
            "trigger": "tiktok_login",
            "amount_type": "percent",
            "percent": "5",
            "hold_days": "0",
            "approval_policy": "auto",
            "verification": "first_party",
            "save": "1",
        },
    )
    assert "Only purchase rules can pay a percentage" in str(page.context["form"].errors)
    assert not RewardRule.objects.filter(campaign=campaign).exists()


def test_allocating_twice_with_the_same_form_moves_money_once(owner, brand_a, campaign_a):
    from campaigns.services import brand_topup_record

    brand_topup_record(
        brand=brand_a, amount_minor=5000, currency="EUR", bank_account_code="NL00TEST0000000001", idempotency_key="t2"
    )
    form = {"amount": "20.00", "idempotency_key": "same-form"}
    owner.post(f"/portal/alpha/campaigns/{campaign_a.pk}/allocate/", form)
    owner.post(f"/portal/alpha/campaigns/{campaign_a.pk}/allocate/", form)
    campaign_a.tally.refresh_from_db()
    assert campaign_a.tally.funded_minor == 100_000 + 2000


def test_allocating_more_than_the_funds_says_so(owner, campaign_a):
    page = owner.post(
        f"/portal/alpha/campaigns/{campaign_a.pk}/allocate/",
        {"amount": "99999.00", "idempotency_key": "k"},
        follow=True,
    )
    assert any("insufficient" in str(m).lower() or "funds" in str(m).lower() for m in page.context["messages"])
    campaign_a.tally.refresh_from_db()
    assert campaign_a.tally.funded_minor == 100_000


def test_funding_page_shows_reference_and_sepa_qr(owner, brand_a):
    page = owner.get("/portal/alpha/funding/?amount=250.00")
    assert brand_a.funding_reference.encode() in page.content
    assert b"<svg" in page.content
    payload = epc_payload(
        name="JoyBack Payouts B.V.",
        iban="NL91ABNA0417164300",
        bic="ABNANL2A",
        reference=brand_a.funding_reference,
        amount_minor=25000,
    )
    assert payload.split("\n") == [
        "BCD",
        "002",
        "1",
        "SCT",
        "ABNANL2A",
        "JoyBack Payouts B.V.",
        "NL91ABNA0417164300",
        "EUR250.00",
        "",
        "",
        brand_a.funding_reference,
    ]


def test_rewards_csv_streams_only_my_rewards(owner, brand_a, campaign_a, brand_b, campaign_b):
    event_ingest(brand=brand_a, payload=event(email="a@example.com"))
    event_ingest(brand=brand_b, payload=event(email="b@example.com"))
    response = owner.get("/portal/alpha/rewards/?format=csv&status=held")
    body = b"".join(response.streaming_content).decode()
    rows = body.strip().splitlines()
    assert rows[0].startswith("id,created_at,campaign") and len(rows) == 2
    assert ",summer,tiktok_login,held,5.00," in rows[1]


def test_the_tables_filter_by_every_field_and_a_bad_value_filters_nothing(owner, brand_a, campaign_a):
    event_ingest(brand=brand_a, payload=event(email="a@example.com"))
    today = timezone.localdate().isoformat()

    def rows(query: str) -> int:
        response = owner.get(f"/portal/alpha/rewards/?format=csv&{query}")
        return len(b"".join(response.streaming_content).decode().strip().splitlines()) - 1

    assert rows(f"campaign=summer&status=held&trigger=tiktok_login&date_from={today}&date_to={today}") == 1
    assert rows("status=paid") == 0
    assert rows("trigger=purchase") == 0
    assert rows("campaign=other") == 0
    assert rows("date_from=2999-01-01") == 0
    assert rows("date_from=not-a-date") == 1  # ignored, never a 500
    page = owner.get("/portal/alpha/payouts/?status=settled&date_to=garbage")
    assert page.status_code == 200


def test_invitation_by_email_then_accept(owner, brand_a, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        owner.post("/portal/alpha/team/invite/", {"email": "new@alpha.example", "role": "admin"})
    link = re.search(r"https?://[^/]+(/portal/invitations/[^/\s]+/)", mail.outbox[-1].body).group(1)
    newcomer = Client()
    newcomer.force_login(make_user("new@alpha.example"))
    newcomer.post(link)
    assert BrandMembership.objects.get(brand=brand_a, user__email="new@alpha.example").role == "admin"
    # used once
    newcomer.post(link)
    assert BrandMembership.objects.filter(brand=brand_a, user__email="new@alpha.example").count() == 1


def test_an_invitation_for_someone_else_is_refused(owner, brand_a, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        owner.post("/portal/alpha/team/invite/", {"email": "new@alpha.example", "role": "admin"})
    link = re.search(r"https?://[^/]+(/portal/invitations/[^/\s]+/)", mail.outbox[-1].body).group(1)
    stranger = Client()
    stranger.force_login(make_user("stranger@example.com"))
    stranger.post(link)
    assert not BrandMembership.objects.filter(brand=brand_a, user__email="stranger@example.com").exists()


def test_the_last_owner_cannot_leave(owner, owner_a, brand_a):
    membership = BrandMembership.objects.get(brand=brand_a, user=owner_a)
    owner.post(f"/portal/alpha/team/members/{membership.pk}/", {"remove": "1"})
    owner.post(f"/portal/alpha/team/members/{membership.pk}/", {"role": "analyst"})
    assert BrandMembership.objects.get(pk=membership.pk).role == "owner"


def test_api_key_is_shown_once_then_revoked(owner, brand_a):
    page = owner.post("/portal/alpha/api-keys/", {"name": "Shop", "scopes": ["events"]})
    token = page.context["created"].token
    assert token.startswith("jbk_") and token.encode() in page.content
    assert token.encode() not in owner.get("/portal/alpha/api-keys/").content
    key = ApiKey.objects.get(brand=brand_a)
    owner.post(f"/portal/alpha/api-keys/{key.pk}/revoke/")
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_webhook_endpoint_on_a_private_address_is_refused_with_a_message(owner, brand_a, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    page = owner.post("/portal/alpha/webhooks/", {"url": "https://169.254.169.254/latest/meta-data/"}, follow=True)
    assert "169.254.169.254 is a link-local address" in page.content.decode()
    assert page.context["created"] is None and not brand_a.webhook_endpoints.exists()


def test_webhook_endpoint_secret_shown_once_and_rotated(owner, brand_a):
    page = owner.post("/portal/alpha/webhooks/", {"url": "https://shop.example/hooks", "event_types": ["reward.held"]})
    first = page.context["created"].secret
    endpoint = brand_a.webhook_endpoints.get()
    rotated = owner.post(f"/portal/alpha/webhooks/{endpoint.pk}/rotate/")
    assert rotated.context["secret"] != first
    assert first.encode() not in owner.get(f"/portal/alpha/webhooks/{endpoint.pk}/").content


def test_campaign_history_reads_in_words(owner, campaign_a):
    page = owner.get(f"/portal/alpha/campaigns/{campaign_a.pk}/").content.decode()
    history = page.split("<h2>History</h2>", 1)[1]
    assert "Launched: the claim page is live" in history
    assert "€1,000.00 added to the budget (now €1,000.00)" in history
    assert "campaign.launched" not in history and "amount_minor" not in history and "{" not in history


def test_campaign_history_names_who_acted(owner, owner_a, brand_a, campaign_a, admin_user):
    """Issue 29: the brand's own actions showed as "JoyBack (automatic)"."""
    owner_a.first_name, owner_a.last_name = "Anna", "Bianchi"
    owner_a.save()
    # given a campaign the owner pauses in the portal and our staff resume in the admin
    owner.post(f"/portal/alpha/campaigns/{campaign_a.pk}/pause/")
    campaign_resume(campaign=campaign_a, actor=admin_user)
    # and one the owner creates in the portal
    owner.post("/portal/alpha/campaigns/new/", {**NEW_CAMPAIGN, "timezone": "Europe/Rome"})
    created = Campaign.objects.get(brand=brand_a, slug="winter")
    # then each line names who acted: the brand's user by name, our staff as the team, the
    # system (the fixture set the campaign up without a user) as automatic
    who = {line.what: line.who for line in campaign_history(campaign=campaign_a)}
    assert who["Paused"] == "Anna Bianchi"
    assert who["Resumed"] == "JoyBack team" and admin_user.email not in who.values()
    assert who["Created as a draft"] == "JoyBack (automatic)"
    assert [line.who for line in campaign_history(campaign=created)] == ["Anna Bianchi"]
    page = owner.get(f"/portal/alpha/campaigns/{campaign_a.pk}/").content.decode()
    assert "Anna Bianchi" in page.split("<h2>History</h2>", 1)[1]


def test_chart_axes_are_whole_numbers():
    assert [axis_top(n) for n in (1, 3, 7, 9, 11, 450, 999)] == [2, 4, 8, 10, 20, 600, 1000]
    days = [date(2026, 11, 1) + timedelta(days=i) for i in range(3)]
    svg = bar_chart_svg(title="t", days=days, values=[0, 1, 0])
    assert [label for label in ("0", "1", "2") if f'text-anchor="end">{label}<' in svg] == ["0", "1", "2"]


def test_every_surface_has_a_favicon(client, admin_user, campaign_a):
    assert client.get("/favicon.ico")["Location"].endswith("favicon.svg")
    assert 'rel="icon"' in client.get(f"/c/alpha/{campaign_a.slug}/").content.decode()
    client.force_login(admin_user)
    assert 'rel="icon"' in client.get("/admin/").content.decode()


def test_an_invitee_who_signs_up_finds_the_invitation_after_confirming(
    owner, brand_a, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        owner.post("/portal/alpha/team/invite/", {"email": "fresh@alpha.example", "role": "analyst"})
    link = re.search(r"https?://[^/]+(/portal/invitations/[^/\s]+/)", mail.outbox[-1].body).group(1)
    invitee = Client()
    signup = invitee.get(link)  # not signed in: to the login page, then on to sign up
    assert signup.status_code == 302
    invitee.post(
        f"/accounts/signup/?next={link}",
        {"email": "fresh@alpha.example", "password1": "a-long-new-password-1", "password2": "a-long-new-password-1"},
    )
    confirm = re.search(r"https?://[^/]+(/accounts/confirm-email/[^/\s]+/)", mail.outbox[-1].body).group(1)
    # The confirmation link opened elsewhere (the phone's mail app): the invitation link is gone.
    elsewhere = Client()
    elsewhere.post(confirm)
    landed = elsewhere.post(
        "/accounts/login/", {"login": "fresh@alpha.example", "password": "a-long-new-password-1"}, follow=True
    )
    assert landed.request["PATH_INFO"] == "/portal/"
    assert 'data-testid="pending-invitation"' in landed.content.decode()
    elsewhere.post(link)
    assert BrandMembership.objects.get(brand=brand_a, user__email="fresh@alpha.example").role == "analyst"


def test_the_sign_up_email_speaks_as_joyback_not_the_host(settings):
    """Issue 29: the confirmation greeted "from 127.0.0.1:8651" (the request's host)."""
    settings.CLAIM_BASE_URL = "https://pay.joyback.example"
    Client(HTTP_HOST="127.0.0.1").post(
        "/accounts/signup/",
        {"email": "new@brand.example", "password1": "a-long-new-password-1", "password2": "a-long-new-password-1"},
    )
    (email,) = mail.outbox
    assert email.subject.startswith("[JoyBack] ")
    assert "Hello from JoyBack!" in email.body and "Thank you for using JoyBack!" in email.body
    assert "pay.joyback.example" in email.body
    assert "127.0.0.1" not in email.body.replace(
        re.search(r"https?://\S+/accounts/confirm-email/\S+", email.body).group(0), ""
    )


NEW_CAMPAIGN = {
    "name": "Winter", "mode": "joyback", "currency": "EUR", "starts_at": "2026-01-01T00:00",
    "payout_mode": "instant", "aggregate_minutes": "0",
}  # fmt: skip


def test_campaign_form_asks_what_is_rewarded_and_dates_first_and_payee_checks_last(owner):
    """Issue 29: the Verification-of-Payee questions came before what is rewarded; the time zone
    was free text."""
    page = owner.get("/portal/alpha/campaigns/new/").content.decode()
    advanced = page.index('data-testid="campaign-advanced"')
    for name in ("mode", "currency", "starts_at", "ends_at", "timezone"):
        assert page.index(f'name="{name}"') < advanced, name
    for name in ("vop_no_match", "vop_close_match", "vop_not_possible"):
        assert page.index(f'name="{name}"') > advanced, name
    assert '<select name="timezone"' in page and '<option value="Europe/Rome" selected>' in page


def test_a_time_zone_not_in_the_list_is_refused_and_nothing_is_created(owner, brand_a):
    page = owner.post("/portal/alpha/campaigns/new/", {**NEW_CAMPAIGN, "timezone": "Mars/Olympus"})
    assert page.status_code == 200 and page.context["form"].errors["timezone"]
    assert not Campaign.objects.filter(brand=brand_a, slug="winter").exists()
    created = owner.post("/portal/alpha/campaigns/new/", {**NEW_CAMPAIGN, "timezone": "America/New_York"})
    assert created.status_code == 302
    assert Campaign.objects.get(brand=brand_a, slug="winter").timezone == "America/New_York"
