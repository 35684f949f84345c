"""TikTok, one ``Platform``: Login Kit through allauth's TikTok provider (the identity proof),
the Display API (``video.list`` / ``video.query``) for a person's own videos and their view counts
(verification and re-checks), the renewal of a stored token (``tiktok_token_refresh``), signed
webhooks, the production checks. Its fake is
``campaigns.platforms.tiktok_fake``; its settings are ``TIKTOK_*``, ``FAKE_TIKTOK_ENABLED`` and
allauth's ``SOCIALACCOUNT_PROVIDERS["tiktok"]``.

allauth hard-codes TikTok's hosts on its OAuth adapter. ``tiktok_endpoints_configure`` replaces
those three class attributes with properties that read ``TIKTOK_AUTH_BASE_URL`` and
``TIKTOK_API_BASE_URL`` at request time, so tests and the demo can point the whole login at a local
fake (and a test's ``settings`` override takes effect at once). It also has the adapter keep the
token response's ``refresh_expires_in`` (allauth keeps the refresh token and the access token's
expiry, not that), so a login's whole grant reaches the session. It runs when this module is
imported, which the claim URLconf does before any request is served.

The Display API client never runs inside a database transaction (STYLE 4): callers fetch first,
then write.
"""

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import requests
from allauth.socialaccount.providers.oauth2.views import OAuth2Adapter
from allauth.socialaccount.providers.tiktok.views import TikTokOAuth2Adapter
from django.conf import settings
from django.core import checks
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from campaigns.models import UndoneReason
from campaigns.platforms import tiktok_fake
from campaigns.platforms.allauth_adapter import claim_login, claim_login_evidence, claim_login_grant
from campaigns.platforms.base import (
    AccessTokenRefused,
    ActionCheck,
    AuthorizationRefused,
    Content,
    ContentTexts,
    FakeRequest,
    FakeResponse,
    InboundEvent,
    Platform,
    PlatformUnavailable,
    ProvenIdentity,
    TokenGrant,
)
from campaigns.selectors import action_withdrawn_since, withdrawal_account
from campaigns.services.credentials import platform_credential_forget, platform_grant_fresh, platform_token_use
from campaigns.services.undone import WithdrawOutcome, action_withdraw, authorization_refused_record
from campaigns.triggers import trigger_evidence
from core.exceptions import InvalidInput
from core.models import InboundStatus
from core.webhooks_in import Rejected, Verified, body_digest

logger = logging.getLogger(__name__)

VIDEO_FIELDS = "id,title,video_description,view_count,create_time,share_url,cover_image_url"


def _auth_base() -> str:
    return settings.TIKTOK_AUTH_BASE_URL.rstrip("/")


def _api_base() -> str:
    return settings.TIKTOK_API_BASE_URL.rstrip("/")


def _seconds_from_now(value) -> datetime | None:
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        return None
    return timezone.now() + timedelta(seconds=seconds) if seconds > 0 else None


def _token_parse(adapter, data: dict):
    token = OAuth2Adapter.parse_token(adapter, data)
    # Not a column of allauth's SocialToken (never saved here: SOCIALACCOUNT_STORE_TOKENS is off);
    # read by ``claim_login`` when the login is put in the session.
    token.refresh_expires_at = _seconds_from_now(data.get("refresh_expires_in"))
    return token


def tiktok_endpoints_configure() -> None:
    TikTokOAuth2Adapter.authorize_url = property(lambda self: f"{_auth_base()}/v2/auth/authorize/")
    TikTokOAuth2Adapter.access_token_url = property(lambda self: f"{_api_base()}/v2/oauth/token/")
    TikTokOAuth2Adapter.profile_url = property(lambda self: f"{_api_base()}/v2/user/info/")
    TikTokOAuth2Adapter.parse_token = _token_parse


tiktok_endpoints_configure()


class TikTokUnavailable(PlatformUnavailable):
    """TikTok did not answer or answered with an error: retry later (a job) or say so (a page)."""

    code = "tiktok_unavailable"


class TikTokTokenRefused(TikTokUnavailable, AccessTokenRefused):
    """TikTok no longer takes the access token (``TOKEN_REFUSED``: expired, or not granted the scope)."""

    code = "tiktok_token_refused"


# TikTok's answers to a token it no longer takes (expired, or revoked) or that lacks the scope.
TOKEN_REFUSED = {"access_token_invalid", "scope_not_authorized"}


def _video(row: dict) -> Content:
    return Content(
        id=str(row["id"]),
        description=row.get("video_description") or row.get("title") or "",
        view_count=int(row.get("view_count") or 0),
        share_url=row.get("share_url") or "",
        create_time=int(row.get("create_time") or 0),
        cover_url=row.get("cover_image_url") or "",
    )


def _call(path: str, **request) -> tuple[requests.Response, Any]:
    """POST to TikTok's API at ``path`` (``request``: requests' keyword arguments) and read its
    JSON answer. Raises TikTokUnavailable when TikTok cannot be reached or answers without JSON:
    an outage, never the person's doing."""
    try:
        response = requests.post(f"{_api_base()}{path}", timeout=settings.TIKTOK_TIMEOUT_SECONDS, **request)
    except requests.RequestException as exc:
        raise TikTokUnavailable(f"TikTok could not be reached: {exc.__class__.__name__}.") from exc
    try:
        return response, response.json()
    except ValueError as exc:
        raise TikTokUnavailable(f"TikTok answered {response.status_code} without JSON.") from exc


def _post(path: str, *, access_token: str, body: dict) -> dict:
    response, payload = _call(
        path, params={"fields": VIDEO_FIELDS}, json=body, headers={"Authorization": f"Bearer {access_token}"}
    )
    error = (payload.get("error") or {}).get("code", "ok")
    if error in TOKEN_REFUSED:
        raise TikTokTokenRefused(f"TikTok refused the token ({error}).", details={"error": error})
    if response.status_code != 200 or error != "ok":
        raise TikTokUnavailable(f"TikTok answered {response.status_code} ({error}).", details={"error": error})
    return payload.get("data") or {}


def _app_credentials() -> tuple[str, str]:
    """The client key and secret of the app people log in to (allauth's TikTok app): the ones
    its tokens were issued to, so the only ones that may renew them."""
    app = (settings.SOCIALACCOUNT_PROVIDERS.get("tiktok", {}).get("APPS") or [{}])[0]
    return app.get("client_id", ""), app.get("secret", "")


def tiktok_token_refresh(*, refresh_token: str) -> TokenGrant:
    """Renew a stored authorization (Login Kit, "Refresh a user access token": ``POST
    /v2/oauth/token/``, form-encoded, ``grant_type=refresh_token``). The answer carries a new
    access token and, as TikTok rotates them, a new refresh token: the one sent stops working, so
    the caller must keep the new one (``campaigns.services.credentials``) and never send the same
    one twice. Expiries are read from ``expires_in`` and ``refresh_expires_in``, never assumed.

    An OAuth error (``error``, ``error_description``, ``log_id``) of ``invalid_grant`` means the
    refresh token is invalid, expired or revoked: AuthorizationRefused. Any other answer that is
    not a grant — unreachable, a 5xx, no JSON, another error code (ours: a wrong client key) —
    raises TikTokUnavailable: it never counts as the person's doing."""
    client_key, client_secret = _app_credentials()
    response, payload = _call(
        "/v2/oauth/token/",
        data={
            "client_key": client_key,
            "client_secret": client_secret,
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
        },
        headers={"Cache-Control": "no-cache"},
    )
    error = payload.get("error") if isinstance(payload, dict) else "not_an_object"
    if error == "invalid_grant" and response.status_code < 500:
        raise AuthorizationRefused("TikTok refused to renew the authorization (invalid_grant).")
    if error or response.status_code != 200 or not payload.get("access_token"):
        logger.warning("TikTok token refresh answered %s (%s)", response.status_code, error)
        raise TikTokUnavailable(f"TikTok answered {response.status_code} ({error or 'no token'}).")
    return TokenGrant(
        access_token=payload["access_token"],
        access_expires_at=_seconds_from_now(payload.get("expires_in")),
        refresh_token=payload.get("refresh_token") or "",
        refresh_expires_at=_seconds_from_now(payload.get("refresh_expires_in")),
    )


def tiktok_videos_list(*, access_token: str, max_count: int = 20) -> list[Content]:
    """The person's most recent public videos (Display API ``/v2/video/list/``, scope ``video.list``)."""
    data = _post("/v2/video/list/", access_token=access_token, body={"max_count": max_count})
    return [_video(row) for row in data.get("videos", [])]


def tiktok_videos_query(*, access_token: str, video_ids: list[str]) -> list[Content]:
    """Fresh data for the person's own videos by id (``/v2/video/query/``): what proves a video is
    theirs (another person's id simply comes back missing) and how many views it has now."""
    data = _post("/v2/video/query/", access_token=access_token, body={"filters": {"video_ids": video_ids}})
    return [_video(row) for row in data.get("videos", [])]


def tiktok_action_recheck(*, action: ActionCheck) -> list[str]:
    """Is a TikTok action still standing? Its authorization must not have been removed since (the
    ``authorization.removed`` webhook, recorded); a video must still be among the person's public
    videos (the Display API shows only those: deleted and private look the same) with at least the
    rule's views. A video is read with the account's stored token, renewed first if it expired
    (``platform_token_use``). TikTok refusing to renew it for good sends the account's held
    rewards to review (``authorization_refused_record``: a revocation, or a pair we lost). With
    no token, or one TikTok refuses even fresh (a scope not granted), only the
    authorization is checked. Raises TikTokUnavailable (timeouts, 5xx: never a void)."""
    if action.uid and action_withdrawn_since(
        platform="tiktok", uid=action.uid, kind=UndoneReason.AUTHORIZATION_REVOKED, since=action.occurred_at
    ):
        return [UndoneReason.AUTHORIZATION_REVOKED]
    if not (action.item_id and action.uid):
        return []
    try:
        videos = platform_token_use(
            platform="tiktok",
            uid=action.uid,
            call=lambda token: tiktok_videos_query(access_token=token, video_ids=[action.item_id]),
        )
    except AuthorizationRefused as exc:
        # Not proof of a revocation: the account's held rewards go to review, none is voided.
        authorization_refused_record(platform="tiktok", uid=action.uid, refused=exc)
        return []
    except TikTokTokenRefused:
        return []
    if videos is None:
        return []
    video = next((v for v in videos if v.id == action.item_id), None)
    if video is None:
        return [UndoneReason.CONTENT_REMOVED]
    if action.view_threshold and video.view_count < action.view_threshold:
        return [UndoneReason.VIEWS_DROPPED]
    return []


# --- webhooks ------------------------------------------------------------------------------------
# TikTok signs each delivery with ``TikTok-Signature: t=<unix seconds>,s=<hex>``, ``s`` being
# HMAC-SHA256 of ``"<t>.<raw body>"`` keyed with the app's client secret. A signature older or
# newer than ``TIKTOK_SIGNATURE_TOLERANCE_SECONDS`` is refused (a replayed capture). Of the events
# TikTok sends, ``authorization.removed`` (the person disconnected our app, or their account went:
# ``content`` holds ``{"reason": 0-5}``) revokes the account's authorization: its pending rewards
# are voided (``tiktok_authorization_revoke``). The others change no money.


def parse_signature(header: str) -> tuple[int, str] | None:
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        return int(parts["t"]), parts["s"].strip().lower()
    except (KeyError, ValueError):
        return None


def tiktok_webhook_verify(*, body: bytes, headers: Mapping[str, str], now: float | None = None) -> Verified | Rejected:
    secret = settings.TIKTOK_CLIENT_SECRET
    if not secret:
        return Rejected("TIKTOK_CLIENT_SECRET is not configured")
    parsed = parse_signature(headers.get("TikTok-Signature", ""))
    if parsed is None:
        return Rejected("no TikTok-Signature")
    timestamp, given = parsed
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given):
        return Rejected("bad TikTok-Signature")
    if abs((now or time.time()) - timestamp) > settings.TIKTOK_SIGNATURE_TOLERANCE_SECONDS:
        return Rejected("stale TikTok-Signature")
    return Verified(dedupe_key=body_digest(body))


def tiktok_webhook_events(*, body: bytes) -> list[InboundEvent]:
    """The one event of a delivery (``kind`` is TikTok's event name; ``data["client_key"]`` the app
    it was sent for). Raises InvalidInput for a body that is not a TikTok event."""
    try:
        payload = json.loads(body)
        event, client_key = payload["event"], payload.get("client_key", "")
    except (ValueError, KeyError, TypeError):
        raise InvalidInput("The body is not a TikTok event.", code="webhook_invalid")
    create_time = payload.get("create_time")
    # Unix seconds (int64); anything else is taken as "now" rather than failing the delivery for ever.
    data = {"client_key": client_key, "create_time": create_time if isinstance(create_time, int) else 0}
    try:
        content = json.loads(payload.get("content") or "{}")
    except (ValueError, TypeError):
        content = {}
    if isinstance(content, dict) and "reason" in content:
        data["reason"] = content["reason"]
    return [InboundEvent(kind=event, uid=str(payload.get("user_openid", "")), data=data)]


def tiktok_authorization_revoke(*, open_id: str, create_time: int, reason=None) -> WithdrawOutcome:
    """TikTok says the account ``open_id`` removed our authorization at ``create_time`` (unix
    seconds; 0: now): record it and void the account's pending TikTok rewards
    (``campaigns.services.undone.action_withdraw``), and delete the account's stored tokens: they
    no longer work, and nothing of the person's may be read any more. Idempotent per (account,
    time)."""
    occurred_at = datetime.fromtimestamp(create_time, UTC) if create_time else timezone.now()
    platform_credential_forget(platform="tiktok", uid=open_id, before=occurred_at)
    return action_withdraw(
        platform="tiktok",
        uid=open_id,
        kind=UndoneReason.AUTHORIZATION_REVOKED,
        occurred_at=occurred_at,
        # The account's fingerprint, not its id: the reference is kept as it is.
        ref=f"{withdrawal_account(platform='tiktok', uid=open_id)}:{create_time}",
        data={"reason": reason} if reason is not None else {},
    )


def tiktok_webhook_handle(*, webhook_id: int, events: list[InboundEvent]) -> str:
    status = InboundStatus.IGNORED
    for event in events:
        client_key = event.data.get("client_key", "")
        if settings.TIKTOK_CLIENT_KEY and client_key != settings.TIKTOK_CLIENT_KEY:
            logger.warning("TikTok webhook %s for another app (%s)", webhook_id, client_key)
            continue
        # The open_id names a person and no pattern can mask it in the log: the webhook id finds it.
        logger.info("TikTok webhook %s: %s", webhook_id, event.kind)
        if event.kind == "authorization.removed" and event.uid:
            tiktok_authorization_revoke(
                open_id=event.uid, create_time=event.data.get("create_time") or 0, reason=event.data.get("reason")
            )
            status = InboundStatus.PROCESSED
    return status


# --- production checks ---------------------------------------------------------------------------

DEMO_TIKTOK_CREDENTIALS = {"", "demo-client-key", "demo-client-secret"}


def tiktok_production_checks() -> list[checks.CheckMessage]:
    problems = []
    if settings.FAKE_TIKTOK_ENABLED:
        problems.append(
            checks.Error(
                "FAKE_TIKTOK_ENABLED is on: anyone can log in as any TikTok account.",
                hint="Unset FAKE_TIKTOK_ENABLED.",
                id="core.E122",
            )
        )
    for name in ("TIKTOK_AUTH_BASE_URL", "TIKTOK_API_BASE_URL"):
        if not str(getattr(settings, name, "")).startswith("https://"):
            problems.append(
                checks.Error(
                    f"{name} is not an https URL (the local TikTok fake?).",
                    hint=f"Unset {name} (TikTok's own address) or set it to https://….",
                    id="core.E122",
                )
            )
    apps = settings.SOCIALACCOUNT_PROVIDERS.get("tiktok", {}).get("APPS", [])
    if not apps or any(app.get("client_id") in DEMO_TIKTOK_CREDENTIALS for app in apps):
        problems.append(
            checks.Error(
                "TikTok login uses the demo client key.",
                hint="Set TIKTOK_CLIENT_KEY and TIKTOK_CLIENT_SECRET to the app's credentials.",
                id="core.E122",
            )
        )
    elif any(app.get("secret") in DEMO_TIKTOK_CREDENTIALS for app in apps):
        problems.append(
            checks.Error("TikTok login uses the demo client secret.", hint="Set TIKTOK_CLIENT_SECRET.", id="core.E122")
        )
    return problems


# --- the platform --------------------------------------------------------------------------------


class TikTokPlatform(Platform):
    name = "tiktok"
    webhook_headers = ("tiktok-signature",)
    label = "TikTok"
    proof = "oauth"
    content_texts = ContentTexts(
        offer=_("Post a TikTok video"),
        offer_views=_("Post a TikTok video with %(views)s+ views"),
        offer_button=_("Pick my TikTok video"),
        login_first=_("Log in with TikTok first."),
        unavailable=_("TikTok is not answering right now. Please try again in a minute."),
        pick_title=_("Pick your video"),
        pick_hint=_("Choose the video with %(tag)s in its caption."),
        pick_legend=_("Your recent TikTok videos"),
        pick_empty=_("No videos found on your TikTok account."),
        pick_error=_("Choose one of your videos."),
        submit=_("Check my video"),
        status_title=_("Your video"),
        checking=_("We are checking your video with TikTok…"),
        pick_another=_("Pick another video"),
    )

    def identity_from_session(self, request) -> ProvenIdentity | None:
        login = claim_login(request, provider=self.name)
        if login is None:
            return None
        grant = claim_login_grant(login)
        if grant is not None and not platform_grant_fresh(expires_at=grant.access_expires_at):
            # A login whose token is (nearly) dead proves nothing any more: a worker may even have
            # renewed its pair and spent the refresh token this session holds. Log in again.
            return None
        return ProvenIdentity(
            platform=self.name,
            uid=login["uid"],
            name=login.get("name", ""),
            token=login["token"],
            evidence=trigger_evidence("tiktok_login", **claim_login_evidence(login, provider=self.name)),
            grant=grant,
        )

    def content_list(self, *, identity: ProvenIdentity) -> list[Content]:
        return tiktok_videos_list(access_token=identity.token)

    def content_query(self, *, token: str, ids: list[str]) -> list[Content]:
        return tiktok_videos_query(access_token=token, video_ids=ids)

    def action_recheck(self, *, action: ActionCheck) -> list[str]:
        return tiktok_action_recheck(action=action)

    def token_refresh(self, *, refresh_token: str) -> TokenGrant:
        return tiktok_token_refresh(refresh_token=refresh_token)

    def content_login_url(self, *, next_url: str) -> str:
        # allauth's TikTok login, asking for the scope that reads the person's videos.
        return f"{reverse('tiktok_login')}?{urlencode({'process': 'login', 'scope': 'video.list', 'next': next_url})}"

    def fake(self) -> Callable[[FakeRequest], FakeResponse] | None:
        return tiktok_fake.handle if settings.FAKE_TIKTOK_ENABLED else None

    def webhook_verify(self, *, body: bytes, headers: Mapping[str, str]) -> Verified | Rejected:
        return tiktok_webhook_verify(body=body, headers=headers)

    def webhook_events(self, *, body: bytes) -> list[InboundEvent]:
        return tiktok_webhook_events(body=body)

    def webhook_handle(self, *, webhook_id: int, events: list[InboundEvent]) -> str:
        return tiktok_webhook_handle(webhook_id=webhook_id, events=events)

    def production_checks(self) -> list[checks.CheckMessage]:
        return tiktok_production_checks()
