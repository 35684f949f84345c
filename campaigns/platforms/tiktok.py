"""TikTok: Login Kit through allauth's TikTok provider, and the Display API (``video.list`` /
``video.query``) for a person's own videos and their view counts.

allauth hard-codes TikTok's hosts on its OAuth adapter. ``tiktok_endpoints_configure`` replaces
those three class attributes with properties that read ``TIKTOK_AUTH_BASE_URL`` and
``TIKTOK_API_BASE_URL`` at request time, so tests and the demo can point the whole login at a local
fake (and a test's ``settings`` override takes effect at once). It runs when this module is
imported, which the claim URLconf does before any request is served.

The Display API client never runs inside a database transaction (STYLE 4): callers fetch first,
then write.
"""

from dataclasses import dataclass

import requests
from allauth.socialaccount.providers.tiktok.views import TikTokOAuth2Adapter
from django.conf import settings

from core.exceptions import ApplicationError

VIDEO_FIELDS = "id,title,video_description,view_count,create_time,share_url"


def _auth_base() -> str:
    return settings.TIKTOK_AUTH_BASE_URL.rstrip("/")


def _api_base() -> str:
    return settings.TIKTOK_API_BASE_URL.rstrip("/")


def tiktok_endpoints_configure() -> None:
    TikTokOAuth2Adapter.authorize_url = property(lambda self: f"{_auth_base()}/v2/auth/authorize/")
    TikTokOAuth2Adapter.access_token_url = property(lambda self: f"{_api_base()}/v2/oauth/token/")
    TikTokOAuth2Adapter.profile_url = property(lambda self: f"{_api_base()}/v2/user/info/")


tiktok_endpoints_configure()


class TikTokUnavailable(ApplicationError):
    """TikTok did not answer or answered with an error: retry later (a job) or say so (a page)."""

    code = "tiktok_unavailable"
    http_status = 503


@dataclass(frozen=True)
class Video:
    id: str
    description: str
    view_count: int
    share_url: str = ""
    create_time: int = 0

    def has_tag(self, tag: str) -> bool:
        """Case-insensitive hashtag/code match; ``#`` optional on either side."""
        wanted = tag.strip().lstrip("#").lower()
        words = {w.strip(".,!?;:").lstrip("#").lower() for w in self.description.split()}
        return bool(wanted) and wanted in words


def _video(row: dict) -> Video:
    return Video(
        id=str(row["id"]),
        description=row.get("video_description") or row.get("title") or "",
        view_count=int(row.get("view_count") or 0),
        share_url=row.get("share_url") or "",
        create_time=int(row.get("create_time") or 0),
    )


def _post(path: str, *, access_token: str, body: dict) -> dict:
    try:
        response = requests.post(
            f"{_api_base()}{path}",
            params={"fields": VIDEO_FIELDS},
            json=body,
            headers={"Authorization": f"Bearer {access_token}"},
            timeout=settings.TIKTOK_TIMEOUT_SECONDS,
        )
    except requests.RequestException as exc:
        raise TikTokUnavailable(f"TikTok could not be reached: {exc.__class__.__name__}.") from exc
    try:
        payload = response.json()
    except ValueError as exc:
        raise TikTokUnavailable(f"TikTok answered {response.status_code} without JSON.") from exc
    error = (payload.get("error") or {}).get("code", "ok")
    if response.status_code != 200 or error != "ok":
        raise TikTokUnavailable(f"TikTok answered {response.status_code} ({error}).", details={"error": error})
    return payload.get("data") or {}


def tiktok_videos_list(*, access_token: str, max_count: int = 20) -> list[Video]:
    """The person's most recent public videos (Display API ``/v2/video/list/``, scope ``video.list``)."""
    data = _post("/v2/video/list/", access_token=access_token, body={"max_count": max_count})
    return [_video(row) for row in data.get("videos", [])]


def tiktok_videos_query(*, access_token: str, video_ids: list[str]) -> list[Video]:
    """Fresh data for the person's own videos by id (``/v2/video/query/``): what proves a video is
    theirs (another person's id simply comes back missing) and how many views it has now."""
    data = _post("/v2/video/query/", access_token=access_token, body={"filters": {"video_ids": video_ids}})
    return [_video(row) for row in data.get("videos", [])]
