"""allauth's social login used as proof, not as an account: a platform login (TikTok) started on a
claim page ends back on that page with the person's account in the session, and no Django user
is created. Brand users never sign in with a platform, so any other social login is refused."""

import re
import time
from datetime import UTC, datetime

from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django.contrib import messages
from django.http import HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _

from campaigns.platforms.base import TokenGrant
from recipients import crypto

CLAIM_PATH_PREFIX = "/c/"


def claim_session_key(provider: str) -> str:
    return f"claim_{provider}"


def claim_login(request, *, provider: str) -> dict | None:
    """The ``provider`` login proven in this session: ``uid``, ``name``, ``scope``, ``granted``,
    ``at``, the access token and the refresh token (decrypted) with their expiries
    (``expires_at``, ``refresh_expires_at``: unix seconds, 0 when not said), or None. Read through
    the platform (``Platform.identity_from_session``)."""
    data = request.session.get(claim_session_key(provider))
    if not data:
        return None
    return {
        **data,
        "token": crypto.decrypt(data["token"]) if data.get("token") else "",
        "refresh": crypto.decrypt(data["refresh"]) if data.get("refresh") else "",
    }


def _when(seconds) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds else None


def claim_login_grant(login: dict) -> TokenGrant | None:
    """What the login granted, as kept when the person submits an item to be read later."""
    if not login.get("token"):
        return None
    return TokenGrant(
        access_token=login["token"],
        access_expires_at=_when(login.get("expires_at")),
        refresh_token=login.get("refresh", ""),
        refresh_expires_at=_when(login.get("refresh_expires_at")),
    )


def _unix(when: datetime | None) -> int:
    return int(when.timestamp()) if when else 0


def claim_login_evidence(login: dict, *, provider: str) -> dict:
    """What a login claim's trigger event keeps as proof of the login: the scopes the person
    granted, when they logged in, and the id the token was issued for — never the token."""
    granted = login.get("granted") or login.get("scope", "")
    at = login.get("at")
    return {
        "login": provider,
        "open_id": login["uid"],
        "scopes": sorted({s for s in re.split(r"[,\s]+", granted) if s}),
        "logged_in_at": datetime.fromtimestamp(at, UTC).isoformat() if at else "",
    }


class ClaimSocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request, sociallogin) -> bool:
        return False

    def pre_social_login(self, request, sociallogin) -> None:
        next_url = sociallogin.state.get("next") or ""
        is_claim = next_url.startswith(CLAIM_PATH_PREFIX) and url_has_allowed_host_and_scheme(
            next_url, allowed_hosts={request.get_host()}
        )
        if not is_claim:
            messages.error(request, _("TikTok login is only for claiming a reward."))
            raise ImmediateHttpResponse(HttpResponseRedirect("/accounts/login/"))
        social_token = sociallogin.token
        token = social_token.token if social_token else ""
        # allauth's SocialToken carries the refresh token as ``token_secret``; its expiry comes
        # from the TikTok adapter (``refresh_expires_at``, set by ``campaigns.platforms.tiktok``).
        refresh = (social_token.token_secret or "") if social_token else ""
        # Both tokens are kept encrypted even in the server-side session: they can read the
        # person's videos. Nothing is stored beyond the session unless the person submits an
        # item to be read later (``campaigns.services.credentials``).
        request.session[claim_session_key(sociallogin.account.provider)] = {
            "provider": sociallogin.account.provider,
            "uid": sociallogin.account.uid,
            "name": sociallogin.account.extra_data.get("display_name", ""),
            "scope": sociallogin.state.get("scope", ""),
            # What the person granted: TikTok's redirect back names it (comma-separated).
            "granted": request.GET.get("scopes", ""),
            "token": crypto.encrypt(token) if token else "",
            "expires_at": _unix(social_token.expires_at if social_token else None),
            "refresh": crypto.encrypt(refresh) if refresh and token else "",
            "refresh_expires_at": _unix(getattr(social_token, "refresh_expires_at", None)),
            "at": int(time.time()),
        }
        raise ImmediateHttpResponse(HttpResponseRedirect(next_url))
