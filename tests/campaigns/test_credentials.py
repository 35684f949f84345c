"""TikTok's stored tokens (issue 29): a login's refresh token kept with its expiries, the access
token renewed before a re-check or a views poll needs it (TikTok's tokens expire long before a
hold ends), the rotated refresh token saved, a renewal refused for good sending to review
what a revocation would void (never a void), an outage never voiding, two workers never
spending the same refresh token, and the tokens deleted once nothing is left to read and on
erasure. TikTok is the fake on a real socket, rotating and expiring tokens as TikTok documents."""

from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest
import requests
from django.test import Client
from django.utils import timezone
from django_q.models import Schedule

from campaigns.models import (
    ActionWithdrawal,
    PlatformCredential,
    Reward,
    RewardStatus,
    UndoneReason,
    VideoStatus,
    VideoSubmission,
)
from campaigns.platforms import AuthorizationRefused, TokenGrant, tiktok_fake
from campaigns.platforms.tiktok import tiktok_authorization_revoke, tiktok_token_refresh
from campaigns.selectors import campaign_budget, withdrawal_account
from campaigns.services import reward_void, rewards_mature
from campaigns.services.credentials import (
    platform_credential_refused_clear,
    platform_credential_store,
    platform_credentials_prune,
    platform_token_use,
)
from campaigns.services.undone import rewards_recheck
from campaigns.services.videos import video_views_poll
from recipients import crypto
from recipients.services.privacy import person_erase
from reconciliation.selectors import ledger_verify_report
from tests.campaigns.factories import funded_campaign
from tests.claim.conftest import tiktok_login
from tests.reconciliation.test_ledger_concurrency import run_concurrently

LATER = timedelta(days=8)  # past every hold below
DAYS_PASS = 2 * 86400  # the fake's clock this far ahead: every access token it issued has expired
UGC = {"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback", "hold_days": 7}
VIEWS = {"trigger": "view_threshold", "fixed_minor": 1500, "view_threshold": 1000, "required_code": "#joyback"}
FORM = {"name": "Luca", "email": "luca@example.com", "iban": "DE89370400440532013000", "consent": "on"}


def video_reward(client, fake_base, brand, capture, *, slug="ugc", rules=(UGC,), name="Giulia Rossi", **campaign):
    """A campaign, the person's TikTok login and their video submitted: the held reward."""
    campaign = funded_campaign(brand=brand, amount_minor=10_000, slug=slug, rules=list(rules), **campaign)
    tiktok_login(client, fake_base=fake_base, next_url=f"/c/alpha/{slug}/videos/", scope="video.list", name=name)
    video = next(v for v in client.get(f"/c/alpha/{slug}/videos/").context["videos"] if v.has_tag("#joyback"))
    with capture(execute=True):
        client.post(f"/c/alpha/{slug}/videos/", {**FORM, "video_id": video.id})
    return campaign, video, Reward.objects.get(campaign=campaign, rule__trigger="ugc_share")


def a_day_passes(settings) -> None:
    """TikTok's access tokens expire (the fake's clock moves on) and ours says so too."""
    settings.FAKE_TIKTOK_CLOCK_OFFSET_SECONDS = DAYS_PASS
    PlatformCredential.objects.update(access_expires_at=timezone.now() - timedelta(hours=1))


@pytest.fixture(autouse=True)
def still_views(settings):
    settings.FAKE_TIKTOK_VIEWS_PER_MINUTE = 0  # the fake video stays at 120 views


@pytest.mark.django_db
def test_the_login_keeps_its_refresh_token_and_both_expiries(brand_a, fake_tiktok, django_capture_on_commit_callbacks):
    video_reward(Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks)
    credential = PlatformCredential.objects.get()
    now = timezone.now()
    assert crypto.decrypt(credential.access_ciphertext).startswith("act.")
    assert crypto.decrypt(credential.refresh_ciphertext).startswith("rft.")
    # TikTok's expires_in (a day) and refresh_expires_in (a year), as the fake answered them
    assert abs(credential.access_expires_at - (now + timedelta(days=1))) < timedelta(minutes=1)
    assert abs(credential.refresh_expires_at - (now + timedelta(days=365))) < timedelta(minutes=1)
    # named by a keyed fingerprint, never the open_id
    assert credential.account == withdrawal_account(platform="tiktok", uid=tiktok_fake.open_id_for("Giulia Rossi"))


@pytest.mark.django_db
def test_a_recheck_after_the_token_expired_renews_it_and_voids_the_deleted_video(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    campaign, video, reward = video_reward(Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks)
    before = campaign_budget(campaign=campaign)
    spent = len(tiktok_fake._spent)
    # given days pass (the access token is dead) and the person deletes the video
    a_day_passes(settings)
    settings.FAKE_TIKTOK_REMOVED_VIDEOS = [video.id]
    # when the hold is over and the reward re-checked
    with django_capture_on_commit_callbacks(execute=True):
        outcome = rewards_recheck(now=timezone.now() + LATER)
    # then the token was renewed once, the video read with the new one: voided, the money back
    assert len(tiktok_fake._spent) == spent + 1
    assert outcome.voided == [reward.pk]
    reward.refresh_from_db()
    assert reward.status == RewardStatus.VOIDED and reward.undone_reason == UndoneReason.CONTENT_REMOVED
    after = campaign_budget(campaign=campaign)
    assert after.held_minor == 0 and after.available_minor == before.available_minor + reward.reserved_minor
    assert ledger_verify_report().ok
    # and the last hold of the account ended: its tokens are gone
    assert not PlatformCredential.objects.exists()


@pytest.mark.django_db
def test_a_token_tiktok_refuses_before_its_stated_expiry_is_renewed_once_and_used(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    _, video, reward = video_reward(Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks)
    # given TikTok's clock moved on while ours still holds the token for good
    settings.FAKE_TIKTOK_CLOCK_OFFSET_SECONDS = DAYS_PASS
    settings.FAKE_TIKTOK_REMOVED_VIDEOS = [video.id]
    with django_capture_on_commit_callbacks(execute=True):
        assert rewards_recheck(now=timezone.now() + LATER).voided == [reward.pk]


@pytest.mark.django_db
def test_the_views_poll_renews_the_token_and_keeps_the_rotated_refresh_token(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    video_reward(Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks, rules=(UGC, VIEWS))
    old = PlatformCredential.objects.get()
    a_day_passes(settings)
    # when the poll reads the views with the dead token's account
    settings.FAKE_TIKTOK_VIEWS_PER_MINUTE = 10_000_000
    assert video_views_poll() == 1
    # then it renewed the pair first: a new access token and a new refresh token, both kept
    new = PlatformCredential.objects.get()  # the share reward still waits for its re-check
    assert new.version == old.version + 1 and new.refresh_claimed_until is None
    assert crypto.decrypt(new.access_ciphertext) != crypto.decrypt(old.access_ciphertext)
    assert crypto.decrypt(new.refresh_ciphertext) != crypto.decrypt(old.refresh_ciphertext)
    assert new.access_expires_at > timezone.now() + timedelta(hours=23)
    # the old refresh token no longer works (TikTok rotates them); the new one does
    with pytest.raises(AuthorizationRefused):
        tiktok_token_refresh(refresh_token=crypto.decrypt(old.refresh_ciphertext))
    assert tiktok_token_refresh(refresh_token=crypto.decrypt(new.refresh_ciphertext)).access_token


@pytest.mark.django_db
@pytest.mark.parametrize("voids", [True, False], ids=["revocation voids", "revocation does not void"])
def test_a_renewal_refused_voids_nothing_and_sends_to_review_where_a_revocation_would_void(
    voids, brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    """A refused renewal looks like a revocation, but also like a pair we lost (a worker killed
    between TikTok rotating it and our saving it): it never voids, ops decide."""
    campaign, _, reward = video_reward(
        Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks, undo_void_authorization_revoked=voids
    )
    before = campaign_budget(campaign=campaign)
    # given the person removed our app on TikTok (no webhook reached us) and the token expired
    settings.FAKE_TIKTOK_REVOKED = [tiktok_fake.open_id_for("Giulia Rossi")]
    a_day_passes(settings)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = rewards_recheck(now=timezone.now() + LATER)
    reward.refresh_from_db()
    # nothing recorded as revoked, nothing voided, the money still reserved; the dead tokens are gone
    assert not ActionWithdrawal.objects.exists()
    assert not PlatformCredential.objects.exists()
    assert reward.undone_reason == "" and campaign_budget(campaign=campaign).available_minor == before.available_minor
    if voids:
        assert outcome.to_review == [reward.pk] and reward.status == RewardStatus.REVIEW
        assert reward.review_reasons[-1] == "authorization_unrenewable"
        assert rewards_mature(now=timezone.now() + LATER) == 0
    else:
        assert outcome.standing == [reward.pk] and reward.status == RewardStatus.HELD
        assert rewards_mature(now=timezone.now() + LATER) == 1


@pytest.mark.django_db
def test_an_outage_during_renewal_never_voids_and_is_tried_again(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    _, video, reward = video_reward(Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks)
    a_day_passes(settings)
    settings.FAKE_TIKTOK_REMOVED_VIDEOS = [video.id]
    old = PlatformCredential.objects.get()
    # given TikTok answers 503 to the renewal
    settings.FAKE_TIKTOK_OUTAGE = True
    later = timezone.now() + LATER
    assert rewards_recheck(now=later).failed == [reward.pk]
    reward.refresh_from_db()
    assert reward.status == RewardStatus.HELD and reward.recheck_failures == 1 and reward.recheck_after > later
    # the pair is as it was, its claim given back, no revocation recorded
    credential = PlatformCredential.objects.get()
    assert (credential.version, credential.refresh_ciphertext) == (old.version, old.refresh_ciphertext)
    assert credential.refresh_claimed_until is None and not ActionWithdrawal.objects.exists()
    # when TikTok is back, the next try renews the token and finds the video gone
    settings.FAKE_TIKTOK_OUTAGE = False
    with django_capture_on_commit_callbacks(execute=True):
        assert rewards_recheck(now=reward.recheck_after).voided == [reward.pk]


@pytest.mark.django_db
def test_the_tokens_stay_while_another_video_of_the_account_is_held_and_go_with_the_last(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    client = Client()
    first = video_reward(client, fake_tiktok, brand_a, django_capture_on_commit_callbacks, slug="ugc")[2]
    second = video_reward(
        client, fake_tiktok, brand_a, django_capture_on_commit_callbacks, slug="ugc2", rules=({**UGC, "hold_days": 14},)
    )[2]
    assert PlatformCredential.objects.count() == 1  # one home per account
    assert rewards_recheck(now=timezone.now() + LATER).standing == [first.pk]
    assert PlatformCredential.objects.exists()  # the second video's reward still waits
    assert rewards_recheck(now=timezone.now() + LATER * 2).standing == [second.pk]
    assert not PlatformCredential.objects.exists()


@pytest.mark.django_db
def test_the_tokens_are_deleted_on_deauthorization_and_on_erasure(
    brand_a, fake_tiktok, settings, django_capture_on_commit_callbacks
):
    _, _, reward = video_reward(Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks)
    tiktok_authorization_revoke(open_id=tiktok_fake.open_id_for("Giulia Rossi"), create_time=0)
    assert not PlatformCredential.objects.exists()

    # a second person, still held, erased
    _, _, held = video_reward(
        Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks, slug="ugc2", name="Marco Bianchi"
    )
    assert held.status == RewardStatus.HELD and PlatformCredential.objects.count() == 1
    person_erase(person=held.person)
    assert not PlatformCredential.objects.exists()


def _grant_of(fake_base: str, name: str, *, expires_in: timedelta = -timedelta(minutes=1)) -> TokenGrant:
    """A login's grant straight from the fake's token endpoint, its access token expiring (by our
    clock) ``expires_in`` from now: by default expired, so every worker wants to renew it."""
    back = requests.post(
        f"{fake_base}/v2/auth/authorize/confirm/",
        data={"name": name, "redirect_uri": "http://claim.test/cb", "state": "s", "scope": "video.list"},
        allow_redirects=False,
        timeout=5,
    )
    code = parse_qs(urlparse(back.headers["Location"]).query)["code"][0]
    data = requests.post(
        f"{fake_base}/v2/oauth/token/", data={"grant_type": "authorization_code", "code": code}, timeout=5
    ).json()
    return TokenGrant(
        access_token=data["access_token"],
        access_expires_at=timezone.now() + expires_in,
        refresh_token=data["refresh_token"],
        refresh_expires_at=timezone.now() + timedelta(days=365),
    )


@pytest.mark.django_db(transaction=True)
def test_two_workers_renewing_at_once_spend_the_refresh_token_once(fake_tiktok, settings):
    uid = tiktok_fake.open_id_for("Giulia Rossi")
    platform_credential_store(platform="tiktok", uid=uid, grant=_grant_of(fake_tiktok, "Giulia Rossi"))
    old = PlatformCredential.objects.get()
    spent = len(tiktok_fake._spent)

    results = run_concurrently(lambda i: platform_token_use(platform="tiktok", uid=uid, call=lambda token: token), n=4)

    # one renewal reached TikTok; every worker got its new token (none was refused as revoked)
    assert len(tiktok_fake._spent) == spent + 1, results
    assert not any(isinstance(r, Exception) for r in results), results
    new = PlatformCredential.objects.get()
    assert set(results) == {crypto.decrypt(new.access_ciphertext)}
    assert new.version == old.version + 1 and not ActionWithdrawal.objects.exists()


@pytest.mark.django_db
def test_a_token_is_renewed_before_use_only_when_it_expires_within_the_margin(fake_tiktok):
    uid = tiktok_fake.open_id_for("Giulia Rossi")
    grant = _grant_of(fake_tiktok, "Giulia Rossi", expires_in=timedelta(hours=1))
    platform_credential_store(platform="tiktok", uid=uid, grant=grant)
    spent = len(tiktok_fake._spent)
    # an hour left: used as it is
    assert platform_token_use(platform="tiktok", uid=uid, call=lambda token: token) == grant.access_token
    assert len(tiktok_fake._spent) == spent
    # two minutes left (TikTok would still take it): renewed first, so no call dies half-way
    PlatformCredential.objects.update(access_expires_at=timezone.now() + timedelta(minutes=2))
    renewed = platform_token_use(platform="tiktok", uid=uid, call=lambda token: token)
    assert renewed != grant.access_token and len(tiktok_fake._spent) == spent + 1
    assert crypto.decrypt(PlatformCredential.objects.get().access_ciphertext) == renewed


@pytest.mark.django_db
def test_the_daily_sweep_deletes_the_tokens_whose_reading_ended_elsewhere(
    brand_a, fake_tiktok, django_capture_on_commit_callbacks
):
    _, _, giulia = video_reward(Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks)
    video_reward(Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks, slug="ugc2", name="Marco Bianchi")
    # given ops void Giulia's reward in the admin: nothing of hers is read any more, and no re-check will say so
    with django_capture_on_commit_callbacks(execute=True):
        reward_void(reward=giulia, reason="ops: duplicate account")
    assert PlatformCredential.objects.count() == 2
    # when the daily sweep runs, her tokens go; Marco's, still needed for his held reward, stay
    assert platform_credentials_prune() == 1
    assert list(PlatformCredential.objects.values_list("account", flat=True)) == [
        withdrawal_account(platform="tiktok", uid=tiktok_fake.open_id_for("Marco Bianchi"))
    ]
    assert Schedule.objects.filter(func="campaigns.tasks.platform_credentials_prune_task", schedule_type="D").exists()


@pytest.mark.django_db
def test_a_login_whose_token_is_nearly_dead_must_log_in_again_before_submitting(brand_a, fake_tiktok, settings):
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="ugc", rules=[UGC])
    # given TikTok gave the login a token with two minutes left (a worker may renew, and spend, it)
    settings.FAKE_TIKTOK_ACCESS_SECONDS = 120
    client = Client()
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/ugc/videos/", scope="video.list")
    # when the person picks a video, they are sent to log in again and nothing is kept
    response = client.post("/c/alpha/ugc/videos/", {**FORM, "video_id": "anything"})
    assert response.status_code == 302 and response["Location"] == "/c/alpha/ugc/"
    assert not VideoSubmission.objects.exists() and not PlatformCredential.objects.exists()
    # a fresh login works
    settings.FAKE_TIKTOK_ACCESS_SECONDS = 86400
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/ugc/videos/", scope="video.list")
    assert client.get("/c/alpha/ugc/videos/").status_code == 200


@pytest.mark.django_db
def test_the_fake_renews_as_tiktok_documents(fake_tiktok, settings):
    grant = _grant_of(fake_tiktok, "Giulia Rossi")
    form = {
        "client_key": "k",
        "client_secret": "s",
        "grant_type": "refresh_token",
        "refresh_token": grant.refresh_token,
    }
    answer = requests.post(f"{fake_tiktok}/v2/oauth/token/", data=form, timeout=5)
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {
        "access_token", "expires_in", "open_id", "refresh_token", "refresh_expires_in", "scope", "token_type"
    }  # fmt: skip
    assert body["refresh_token"] != grant.refresh_token and body["expires_in"] == 86400
    # the refresh token sent is spent: TikTok's OAuth error struct, invalid_grant
    spent = requests.post(f"{fake_tiktok}/v2/oauth/token/", data=form, timeout=5)
    assert spent.status_code == 400 and set(spent.json()) == {"error", "error_description", "log_id"}
    assert spent.json()["error"] == "invalid_grant"
    # a revoked account's refresh token is refused the same way
    settings.FAKE_TIKTOK_REVOKED = [body["open_id"]]
    form["refresh_token"] = body["refresh_token"]
    revoked = requests.post(f"{fake_tiktok}/v2/oauth/token/", data=form, timeout=5)
    assert revoked.json()["error"] == "invalid_grant"


@pytest.mark.django_db
def test_a_refused_renewal_is_met_by_every_reader_until_it_was_recorded(fake_tiktok, settings):
    """Between one worker's refused renewal and its caller recording it (rewards to review), no
    other reader may take the account for one with no token: its reward would pass as standing."""
    uid = tiktok_fake.open_id_for("Giulia Rossi")
    platform_credential_store(platform="tiktok", uid=uid, grant=_grant_of(fake_tiktok, "Giulia Rossi"))
    settings.FAKE_TIKTOK_REVOKED = [uid]

    for _ in range(2):  # the worker that renews, then a reader before the refusal was recorded
        with pytest.raises(AuthorizationRefused):
            platform_token_use(platform="tiktok", uid=uid, call=lambda token: token)
    mark = PlatformCredential.objects.get()
    assert (mark.access_ciphertext, mark.refresh_ciphertext) == ("", "")  # no token kept

    platform_credential_refused_clear(platform="tiktok", uid=uid)
    assert platform_token_use(platform="tiktok", uid=uid, call=lambda token: token) is None


@pytest.mark.django_db
def test_a_revocation_older_than_the_stored_pair_leaves_it_and_an_older_session_never_replaces_it(fake_tiktok):
    uid = tiktok_fake.open_id_for("Giulia Rossi")
    newer = _grant_of(fake_tiktok, "Giulia Rossi", expires_in=timedelta(hours=2))
    older = _grant_of(fake_tiktok, "Giulia Rossi", expires_in=timedelta(hours=1))
    platform_credential_store(platform="tiktok", uid=uid, grant=newer)
    platform_credential_store(platform="tiktok", uid=uid, grant=older)  # another device's session
    assert crypto.decrypt(PlatformCredential.objects.get().refresh_ciphertext) == newer.refresh_token

    # TikTok's notice of a revocation before the person logged in again: that login authorized us
    tiktok_authorization_revoke(open_id=uid, create_time=int((timezone.now() - timedelta(minutes=5)).timestamp()))
    assert PlatformCredential.objects.exists()
    tiktok_authorization_revoke(open_id=uid, create_time=0)  # now: gone
    assert not PlatformCredential.objects.exists()


@pytest.mark.django_db
def test_a_submission_left_pending_keeps_its_token_no_longer_than_the_watch(
    brand_a, fake_tiktok, django_capture_on_commit_callbacks
):
    _, _, reward = video_reward(Client(), fake_tiktok, brand_a, django_capture_on_commit_callbacks)
    VideoSubmission.objects.update(status=VideoStatus.PENDING)  # its verification still retried
    with django_capture_on_commit_callbacks(execute=True):
        reward_void(reward=reward, reason="ops: duplicate account")
    assert platform_credentials_prune() == 0

    VideoSubmission.objects.update(created_at=timezone.now() - timedelta(days=31))  # retried no more
    assert platform_credentials_prune() == 1
