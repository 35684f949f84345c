"""Actions undone during their hold (issue 29): the re-check before maturing through the platform
seam, TikTok's deauthorization webhook and WhatsApp's STOP, all voiding through one path with the
reason kept, the money back on the budget, the person told and the brand shown why. TikTok is the
fake on a real socket; WhatsApp and TikTok deliveries are signed here, as the providers document."""

import hashlib
import hmac
import json
import time
from datetime import timedelta

import pytest
import requests
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.api_keys import api_key_create
from campaigns.models import (
    UNDO_POLICY_FIELDS,
    ActionWithdrawal,
    PlatformCredential,
    Reward,
    RewardEvent,
    RewardStatus,
    UndoneReason,
    WebhookEvent,
)
from campaigns.platforms.tiktok import tiktok_authorization_revoke
from campaigns.platforms.whatsapp import whatsapp_optin_code_issue, whatsapp_optin_withdraw
from campaigns.selectors import campaign_budget, withdrawal_account
from campaigns.services import event_ingest, reward_mark_paid, rewards_mature
from campaigns.services.undone import RECHECK_MAX_FAILURES, RECHECK_REVIEW_REASON, rewards_recheck
from campaigns.webhooks import webhook_endpoint_create, webhook_events_collect
from core.models import InboundWebhook
from recipients.models import Notice, NoticeKind
from recipients.models_consent import MarketingConsent
from reconciliation.selectors import ledger_verify_report
from tests.api.conftest import client_for
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign
from tests.claim.conftest import tiktok_login
from tests.portal.conftest import member
from tests.recipients.test_marketing_consent import contact, give

pytestmark = pytest.mark.django_db

TIKTOK_SECRET = "tt-client-secret"
TIKTOK_KEY = "tt-client-key"
WA_SECRET = "wa-app-secret"
WA_NUMBER = "393331234567"
LATER = timedelta(days=8)  # past every hold below


@pytest.fixture(autouse=True)
def secrets_(settings):
    settings.TIKTOK_CLIENT_SECRET = TIKTOK_SECRET
    settings.TIKTOK_CLIENT_KEY = TIKTOK_KEY
    settings.WHATSAPP_APP_SECRET = WA_SECRET


def post_tiktok(payload: dict):
    body = json.dumps(payload).encode()
    t = int(time.time())
    s = hmac.new(TIKTOK_SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return Client().post(
        "/api/webhooks/tiktok/", body, content_type="application/json", HTTP_TIKTOK_SIGNATURE=f"t={t},s={s}"
    )


def deauthorized(open_id: str, at: int | None = None) -> dict:
    """TikTok's documented ``authorization.removed`` delivery (reason 1: the user disconnected)."""
    return {
        "client_key": TIKTOK_KEY,
        "event": "authorization.removed",
        "create_time": at or int(time.time()),
        "user_openid": open_id,
        "content": json.dumps({"reason": 1}),
    }


def post_wa(text: str, message_id: str):
    body = json.dumps({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "contacts": [{"profile": {"name": "Sheena Nelson"}, "wa_id": WA_NUMBER}],
            "messages": [{"from": WA_NUMBER, "id": message_id, "timestamp": str(int(time.time())),
                          "type": "text", "text": {"body": text}}],
        }}]}],
    }).encode()  # fmt: skip
    signature = "sha256=" + hmac.new(WA_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return Client().post(
        "/api/webhooks/whatsapp/", body, content_type="application/json", HTTP_X_HUB_SIGNATURE_256=signature
    )


def tiktok_reward(brand, *, open_id: str = "act.person-1", hold_days: int = 7, slug: str = "login", **campaign):
    """A held ``tiktok_login`` reward of the account ``open_id``."""
    funded_campaign(
        brand=brand,
        amount_minor=10_000,
        slug=slug,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 500, "hold_days": hold_days}],
        **campaign,
    )
    result = event_ingest(
        brand=brand,
        payload=event(campaign=slug, social_provider="tiktok", social_uid=open_id, email=f"{slug}@example.com"),
    )
    return result.reward


@pytest.fixture
def optin_reward(brand, django_capture_on_commit_callbacks):
    """A held WhatsApp opt-in reward of ``WA_NUMBER``, earned through the signed webhook."""
    campaign = funded_campaign(
        brand=brand,
        amount_minor=10_000,
        slug="wa",
        rules=[{"trigger": "whatsapp_optin", "fixed_minor": 300, "hold_days": 7}],
    )
    code = whatsapp_optin_code_issue(campaign=campaign)
    with django_capture_on_commit_callbacks(execute=True):
        assert post_wa(f"my code {code.code}", "wamid.OPTIN").status_code == 200
    reward = Reward.objects.get(campaign=campaign)
    assert reward.status == RewardStatus.HELD
    return reward


def _video_reward(client, fake_base, brand, settings, django_capture_on_commit_callbacks, rules):
    campaign = funded_campaign(brand=brand, amount_minor=10_000, slug="ugc", rules=rules)
    settings.FAKE_TIKTOK_VIEWS_PER_MINUTE = 0  # the fake video stays at 120 views
    tiktok_login(client, fake_base=fake_base, next_url="/c/alpha/ugc/videos/", scope="video.list")
    video = next(v for v in client.get("/c/alpha/ugc/videos/").context["videos"] if v.has_tag("#joyback"))
    form = {"name": "Luca", "email": "luca@example.com", "iban": "DE89370400440532013000", "consent": "on"}
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/c/alpha/ugc/videos/", {**form, "video_id": video.id})
    return campaign, video, Reward.objects.get(campaign=campaign, rule__trigger="ugc_share")


# --- the re-check before maturing ----------------------------------------------------------------


def test_a_video_deleted_before_maturity_voids_its_reward_and_refunds_the_budget(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    rules = [{"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback", "hold_days": 7}]
    campaign, video, reward = _video_reward(
        Client(), fake_tiktok, brand_a, settings, django_capture_on_commit_callbacks, rules
    )
    assert reward.status == RewardStatus.HELD
    before = campaign_budget(campaign=campaign)
    assert before.held_minor == reward.reserved_minor
    # the key to the person's videos is kept for the re-check
    assert PlatformCredential.objects.get().access_ciphertext

    # the person deletes the video (or makes it private) during the hold
    settings.FAKE_TIKTOK_REMOVED_VIDEOS = [video.id]
    with django_capture_on_commit_callbacks(execute=True):
        outcome = rewards_recheck(now=timezone.now() + LATER)
    assert outcome.voided == [reward.pk]
    reward.refresh_from_db()
    assert reward.status == RewardStatus.VOIDED and reward.undone_reason == UndoneReason.CONTENT_REMOVED
    audit = RewardEvent.objects.get(reward=reward, kind="reward.voided")
    assert audit.data == {"undone": "content_removed"}
    after = campaign_budget(campaign=campaign)
    assert after.held_minor == 0 and after.available_minor == before.available_minor + reward.reserved_minor
    assert ledger_verify_report().ok
    # nothing left to mature, the person is told, the key to their videos dropped
    assert rewards_mature(now=timezone.now() + LATER) == 0
    notice = Notice.objects.get(kind=NoticeKind.ACTION_UNDONE)
    assert notice.reward_id == reward.pk and notice.data == {"undone": "content_removed"}
    assert not PlatformCredential.objects.exists()


def test_a_video_still_public_matures_after_its_recheck(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    rules = [{"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback", "hold_days": 7}]
    _, _, reward = _video_reward(Client(), fake_tiktok, brand_a, settings, django_capture_on_commit_callbacks, rules)
    # due, but not re-checked yet: maturing leaves it
    assert rewards_mature(now=timezone.now() + LATER) == 0
    assert rewards_recheck(now=timezone.now() + LATER).standing == [reward.pk]
    assert rewards_mature(now=timezone.now() + LATER) == 1
    reward.refresh_from_db()
    assert reward.status == RewardStatus.PAYABLE and reward.undone_reason == ""
    assert not PlatformCredential.objects.exists()


def test_views_fallen_below_the_threshold_void_only_where_the_campaign_says_so(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    rules = [
        {"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback", "hold_days": 7},
        {"trigger": "view_threshold", "fixed_minor": 1500, "view_threshold": 100, "required_code": "#joyback",
         "hold_days": 7},
    ]  # fmt: skip
    campaign, _, share = _video_reward(
        Client(), fake_tiktok, brand_a, settings, django_capture_on_commit_callbacks, rules
    )
    views = Reward.objects.get(campaign=campaign, rule__trigger="view_threshold")
    # TikTok purges bought views: the video is back under the threshold
    campaign.rules.filter(trigger="view_threshold").update(view_threshold=1000)
    outcome = rewards_recheck(now=timezone.now() + LATER)
    assert outcome.voided == [views.pk] and outcome.standing == [share.pk]
    views.refresh_from_db()
    assert views.undone_reason == UndoneReason.VIEWS_DROPPED


def test_a_platform_timeout_never_voids(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks, monkeypatch
):
    rules = [{"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback", "hold_days": 7}]
    campaign, video, reward = _video_reward(
        Client(), fake_tiktok, brand_a, settings, django_capture_on_commit_callbacks, rules
    )
    settings.FAKE_TIKTOK_REMOVED_VIDEOS = [video.id]  # gone, but TikTok cannot say so now

    def timeout(*args, **kwargs):
        raise requests.Timeout("read timed out")

    monkeypatch.setattr("campaigns.platforms.tiktok.requests.post", timeout)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = rewards_recheck(now=timezone.now() + LATER)
    assert outcome.failed == [reward.pk] and outcome.voided == []
    reward.refresh_from_db()
    assert reward.status == RewardStatus.HELD and reward.undone_reason == "" and reward.rechecked_at is None
    assert campaign_budget(campaign=campaign).held_minor == reward.reserved_minor
    assert not Notice.objects.filter(kind=NoticeKind.ACTION_UNDONE).exists()
    assert rewards_mature(now=timezone.now() + LATER) == 0  # still waits for its re-check
    # TikTok answers again: the next try after the wait finds the video gone
    monkeypatch.undo()
    assert rewards_recheck(now=timezone.now() + LATER + timedelta(hours=1)).voided == [reward.pk]


def test_a_platform_outage_keeps_the_reward_held_and_never_blocks_the_others(
    brand_a, brand, fake_tiktok, settings, django_capture_on_commit_callbacks, optin_reward
):
    rules = [{"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback", "hold_days": 7}]
    campaign, _, video_reward = _video_reward(
        Client(), fake_tiktok, brand_a, settings, django_capture_on_commit_callbacks, rules
    )
    held_before = campaign_budget(campaign=campaign).held_minor
    settings.FAKE_TIKTOK_OUTAGE = True  # TikTok answers 503
    now = timezone.now() + LATER
    outcome = rewards_recheck(now=now)
    assert outcome.failed == [video_reward.pk] and outcome.standing == [optin_reward.pk]
    video_reward.refresh_from_db()
    assert video_reward.status == RewardStatus.HELD and video_reward.undone_reason == ""
    assert video_reward.recheck_failures == 1 and video_reward.recheck_after > now
    assert campaign_budget(campaign=campaign).held_minor == held_before
    # the opt-in matured; the video waits for its next try
    assert rewards_mature(now=now) == 1
    assert Reward.objects.get(pk=video_reward.pk).status == RewardStatus.HELD
    assert not Notice.objects.filter(kind=NoticeKind.ACTION_UNDONE).exists()
    # not before its wait is over
    assert rewards_recheck(now=now).failed == []
    # bounded: after the last try it goes to review, still reserved, never voided
    for _attempt in range(2, RECHECK_MAX_FAILURES + 1):
        now += timedelta(hours=2)
        outcome = rewards_recheck(now=now)
    assert outcome.to_review == [video_reward.pk]
    video_reward.refresh_from_db()
    assert video_reward.status == RewardStatus.REVIEW and RECHECK_REVIEW_REASON in video_reward.review_reasons
    assert campaign_budget(campaign=campaign).held_minor == held_before
    assert ledger_verify_report().ok


# --- TikTok's deauthorization --------------------------------------------------------------------


def test_a_tiktok_deauthorization_voids_the_accounts_pending_rewards_once(brand, django_capture_on_commit_callbacks):
    reward = tiktok_reward(brand, open_id="act.person-1")
    other = tiktok_reward(brand, open_id="act.someone-else", slug="other")
    budget_before = campaign_budget(campaign=reward.campaign)
    payload = deauthorized("act.person-1")
    with django_capture_on_commit_callbacks(execute=True):
        assert post_tiktok(payload).status_code == 200
    reward.refresh_from_db()
    assert reward.status == RewardStatus.VOIDED and reward.undone_reason == UndoneReason.AUTHORIZATION_REVOKED
    assert Reward.objects.get(pk=other.pk).status == RewardStatus.HELD
    budget = campaign_budget(campaign=reward.campaign)
    assert budget.available_minor == budget_before.available_minor + reward.reserved_minor
    assert ledger_verify_report().ok
    withdrawal = ActionWithdrawal.objects.get()
    assert withdrawal.kind == "authorization_revoked" and "act.person-1" not in withdrawal.account + withdrawal.ref
    assert withdrawal.data == {"reason": 1}

    webhook_events_collect()
    events_before = (RewardEvent.objects.count(), Notice.objects.count(), WebhookEvent.objects.count())
    # TikTok delivers again (at least once), and a copy with a fresh signature
    with django_capture_on_commit_callbacks(execute=True):
        assert post_tiktok(payload).status_code == 200
    again = tiktok_authorization_revoke(open_id="act.person-1", create_time=payload["create_time"], reason=1)
    assert again.recorded is False and again.voided == [] and again.noted == []
    webhook_events_collect()
    assert (RewardEvent.objects.count(), Notice.objects.count(), WebhookEvent.objects.count()) == events_before
    assert ActionWithdrawal.objects.count() == 1 and InboundWebhook.objects.count() == 1


def test_a_reward_already_paid_is_noted_not_voided(brand, django_capture_on_commit_callbacks):
    reward = tiktok_reward(brand, hold_days=0)  # no hold: nothing to re-check, payable at once
    assert rewards_mature() == 1
    reward_mark_paid(reward_ids=[reward.pk], payout_ref="po-1")
    with django_capture_on_commit_callbacks(execute=True):
        post_tiktok(deauthorized("act.person-1"))
    reward.refresh_from_db()
    assert reward.status == RewardStatus.PAID and reward.undone_reason == ""
    note = RewardEvent.objects.get(reward=reward, kind="reward.undone_noted")
    assert note.data["undone"] == "authorization_revoked" and note.to_status == "paid"
    assert not Notice.objects.filter(kind=NoticeKind.ACTION_UNDONE).exists()
    assert ledger_verify_report().ok


def test_a_campaign_that_does_not_void_on_revocation_keeps_the_reward(brand, django_capture_on_commit_callbacks):
    reward = tiktok_reward(brand, undo_void_authorization_revoked=False)
    with django_capture_on_commit_callbacks(execute=True):
        post_tiktok(deauthorized("act.person-1"))
    assert Reward.objects.get(pk=reward.pk).status == RewardStatus.HELD
    # the re-check reads the revocation too, and the campaign still says no
    assert rewards_recheck(now=timezone.now() + LATER).standing == [reward.pk]


def test_a_revocation_the_webhook_missed_is_found_by_the_recheck(brand):
    reward = tiktok_reward(brand)
    ActionWithdrawal.objects.create(
        platform="tiktok",
        kind="authorization_revoked",
        account=withdrawal_account(platform="tiktok", uid="act.person-1"),
        occurred_at=timezone.now(),
        ref="missed",
    )
    assert rewards_recheck(now=timezone.now() + LATER).voided == [reward.pk]


# --- WhatsApp STOP -------------------------------------------------------------------------------


def test_whatsapp_stop_voids_the_optin_reward_and_tells_the_person_by_email_only(
    optin_reward, django_capture_on_commit_callbacks
):
    budget_before = campaign_budget(campaign=optin_reward.campaign)
    with django_capture_on_commit_callbacks(execute=True):
        assert post_wa("Stop", "wamid.STOP").status_code == 200
    optin_reward.refresh_from_db()
    assert optin_reward.status == RewardStatus.VOIDED
    assert optin_reward.undone_reason == UndoneReason.OPTIN_WITHDRAWN
    budget = campaign_budget(campaign=optin_reward.campaign)
    assert budget.available_minor == budget_before.available_minor + optin_reward.reserved_minor
    notice = Notice.objects.get(kind=NoticeKind.ACTION_UNDONE)
    assert notice.data == {"undone": "optin_withdrawn", "channels": ["email"]}
    assert ledger_verify_report().ok
    # the same STOP again, by Meta or by another door: nothing changes
    counts = (RewardEvent.objects.count(), Notice.objects.count(), ActionWithdrawal.objects.count())
    again = whatsapp_optin_withdraw(wa_number=WA_NUMBER, ref="wamid.STOP")
    assert again.recorded is False and again.voided == []
    assert (RewardEvent.objects.count(), Notice.objects.count(), ActionWithdrawal.objects.count()) == counts


def test_a_stop_also_ends_every_marketing_consent_given_through_the_number(db, django_capture_on_commit_callbacks):
    """The WhatsApp number is ours, not a brand's: a STOP withdraws the person's marketing consent
    at every brand that knows the number, at once; someone else's consent stays."""
    alpha, beta = BrandFactory(slug="alpha-stop"), BrandFactory(slug="beta-stop")
    at_alpha = contact(alpha, email="s1@example.com", whatsapp=f"+{WA_NUMBER}")
    at_beta = contact(beta, email="s2@example.com", whatsapp=f"+{WA_NUMBER}")
    other = contact(alpha, email="o@example.com", whatsapp="+393339999999")
    for person in (at_alpha, at_beta, other):
        give(person)
    with django_capture_on_commit_callbacks(execute=True):
        assert post_wa("STOP", "wamid.STOP-CONSENT").status_code == 200
    active = MarketingConsent.objects.filter(withdrawn_at__isnull=True)
    assert list(active.values_list("person_id", flat=True)) == [other.pk]
    assert set(MarketingConsent.objects.exclude(person=other).values_list("withdrawal_channel", flat=True)) == {
        "whatsapp"
    }


def test_a_message_that_only_mentions_stop_withdraws_nothing(optin_reward, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post_wa("please don't stop the music", "wamid.CHAT")
    assert Reward.objects.get(pk=optin_reward.pk).status == RewardStatus.HELD
    assert not ActionWithdrawal.objects.exists()


def test_an_optin_after_a_stop_is_a_new_action(optin_reward):
    whatsapp_optin_withdraw(wa_number=WA_NUMBER, ref="wamid.OLD", at=optin_reward.event.occurred_at - timedelta(days=1))
    assert Reward.objects.get(pk=optin_reward.pk).status == RewardStatus.HELD
    assert rewards_recheck(now=timezone.now() + LATER).standing == [optin_reward.pk]


# --- what the brand sees -------------------------------------------------------------------------


def test_the_brand_sees_why_in_the_api_the_portal_and_the_webhook_and_no_other_brand_does(
    brand_a, brand_b, django_capture_on_commit_callbacks
):
    reward = tiktok_reward(brand_a)
    webhook_endpoint_create(brand=brand_a, url="https://alpha.example/hooks", event_types=["reward.voided"])
    with django_capture_on_commit_callbacks(execute=True):
        post_tiktok(deauthorized("act.person-1"))
    webhook_events_collect()
    sent = WebhookEvent.objects.get(brand=brand_a, type="reward.voided")
    assert sent.data["undone_reason"] == "authorization_revoked" and sent.data["reward"]["id"] == reward.pk

    api = client_for(api_key_create(brand=brand_a, name="shop", scopes=["read"]).token)
    assert api.get(f"/api/v1/rewards/{reward.pk}/").json()["undone_reason"] == "authorization_revoked"
    rival = client_for(api_key_create(brand=brand_b, name="rival", scopes=["read"]).token)
    assert rival.get(f"/api/v1/rewards/{reward.pk}/").status_code == 404

    owner = Client()
    owner.force_login(member(brand_a))
    page = owner.get("/portal/alpha/rewards/")
    assert page.status_code == 200 and "The TikTok authorization was revoked" in page.content.decode()
    other = Client()
    other.force_login(member(brand_b))
    assert "The TikTok authorization was revoked" not in other.get("/portal/beta/rewards/").content.decode()


def test_the_undo_settings_are_edited_in_the_portal_while_live(brand_a):
    campaign = funded_campaign(
        brand=brand_a, amount_minor=1_000, slug="live", rules=[{"trigger": "tiktok_login", "fixed_minor": 100}]
    )
    owner = Client()
    owner.force_login(member(brand_a))
    form = owner.get(f"/portal/alpha/campaigns/{campaign.pk}/edit/").context["form"]
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    data.update({"undo_void_content_removed": "on", "undo_void_views_dropped": "on", "undo_void_optin_withdrawn": "on"})
    data.pop("undo_void_authorization_revoked")
    response = owner.post(f"/portal/alpha/campaigns/{campaign.pk}/edit/", data)
    assert response.status_code == 302, response.context["form"].errors if response.context else response
    campaign.refresh_from_db()
    assert campaign.undo_void_authorization_revoked is False and campaign.undo_void_content_removed is True


def test_the_api_sets_the_undo_settings_when_it_creates_a_campaign_and_shows_them(brand_a):
    api = client_for(api_key_create(brand=brand_a, name="shop", scopes=["read", "write"]).token)
    body = {"name": "Lenient", "slug": "lenient", "mode": "joyback", "starts_at": "2026-01-01T00:00:00Z",
            "undo_void_views_dropped": False}  # fmt: skip
    created = api.post("/api/v1/campaigns/", body, format="json")
    assert created.status_code == 201, created.content
    data = api.get(f"/api/v1/campaigns/{created.json()['id']}/").json()
    assert data["undo_void_views_dropped"] is False and data["undo_void_content_removed"] is True
    assert data["undo_void_authorization_revoked"] is True and data["undo_void_optin_withdrawn"] is True


def test_ops_see_and_change_the_undo_settings_in_the_admin(brand_a):
    campaign = funded_campaign(
        brand=brand_a, amount_minor=1_000, slug="ops", rules=[{"trigger": "tiktok_login", "fixed_minor": 100}]
    )
    admin = get_user_model().objects.create_superuser("olga", "olga@example.com", "pw-Secret-123")
    client = Client()
    client.force_login(admin)
    page = client.get(reverse("admin:campaigns_campaign_change", args=[campaign.pk])).content.decode()
    assert all(f'name="{name}"' in page for name in UNDO_POLICY_FIELDS)
