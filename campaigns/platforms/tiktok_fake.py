"""A local stand-in for TikTok's Login Kit and Display API, for tests and the demo.

Nearly stateless on purpose: the authorisation code and the tokens carry the fake person (a
signed, base64 JSON blob) and their expiry, so the web process, a worker and a test server all
agree without sharing memory. Tokens expire as TikTok documents ("Manage user access tokens"):
the access token after ``expires_in`` (``FAKE_TIKTOK_ACCESS_SECONDS``, 86400; TikTok's newer
pages say 2 hours, so nothing may assume a day), the refresh token ``refresh_expires_in`` after
the login (``FAKE_TIKTOK_REFRESH_SECONDS``, 365 days; a refresh does not extend it). A refresh
(``grant_type=refresh_token``) rotates the refresh token: the one sent stops working once the new
one is issued. That is the fake's one piece of memory (the refresh tokens already spent, in this
process: the one that serves the fake). ``FAKE_TIKTOK_REVOKED`` lists the open_ids that removed
the app: their tokens are refused (``access_token_invalid``) and their refresh answers OAuth's
``invalid_grant`` (``{"error", "error_description", "log_id"}``, HTTP 400), as for an expired or
spent refresh token. ``FAKE_TIKTOK_CLOCK_OFFSET_SECONDS`` moves the fake's clock ahead (a test
plays days passing). Each fake person has two videos: one whose caption they typed on the fake login
page (put the campaign's hashtag there) and one unrelated. Views grow with time since the login
(``FAKE_TIKTOK_VIEWS_PER_MINUTE``) so a view-threshold campaign can be shown passing its mark.
What a person can do to a video afterwards is played by settings: ``FAKE_TIKTOK_REMOVED_VIDEOS``
lists the ids deleted or made private (the Display API shows only public videos, so they are
simply missing), ``FAKE_TIKTOK_OUTAGE`` makes the Display API and token refreshes answer 503 as
during an outage.

One implementation, two hosts: ``web.fakes`` serves it in Django under /fake/tiktok/ (demo), and
``wsgi_app`` serves it from a plain ``wsgiref`` server (tests: a real HTTP hop on 127.0.0.1).
"""

import base64
import hashlib
import hmac
import html
import json
import secrets
import threading
import time
from urllib.parse import parse_qs, urlencode

from django.conf import settings

from campaigns.platforms.base import FakeRequest, FakeResponse

DEFAULT_CAPTION = "Loving my new sneakers #joyback"
_SECRET = b"fake-tiktok-not-a-secret"
_spent_lock = threading.Lock()
_spent: set[str] = set()  # refresh tokens already exchanged (by their ``jti``): rotation


def _now() -> float:
    return time.time() + getattr(settings, "FAKE_TIKTOK_CLOCK_OFFSET_SECONDS", 0)


def _revoked(person: dict) -> bool:
    return open_id_for(person["name"]) in set(getattr(settings, "FAKE_TIKTOK_REVOKED", ()))


def _sign(data: dict) -> str:
    raw = base64.urlsafe_b64encode(json.dumps(data, sort_keys=True).encode()).decode().rstrip("=")
    mac = hmac.new(_SECRET, raw.encode(), hashlib.sha256).hexdigest()[:16]
    return f"{raw}.{mac}"


def _unsign(token: str) -> dict | None:
    raw, _, mac = (token or "").partition(".")
    if not hmac.compare_digest(mac, hmac.new(_SECRET, raw.encode(), hashlib.sha256).hexdigest()[:16]):
        return None
    return json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))


def open_id_for(name: str) -> str:
    return "fake_" + hashlib.sha256(name.strip().lower().encode()).hexdigest()[:16]


def _json(data: dict, status: int = 200) -> FakeResponse:
    return FakeResponse(status=status, body=json.dumps(data))


def _error(code: str, status: int) -> FakeResponse:
    return _json({"error": {"code": code, "message": code}}, status)


def _authorize_page(q: dict[str, str]) -> FakeResponse:
    hidden = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in q.items()
        if k in ("client_key", "redirect_uri", "state", "scope")
    )
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Fake TikTok - log in</title>
<style>body{{font-family:system-ui,sans-serif;max-width:26rem;margin:2rem auto;padding:0 1rem;color:#111}}
label{{display:block;margin:.8rem 0 .2rem;font-weight:600}}input[type=text]{{width:100%;padding:.6rem;font-size:1rem}}
button{{margin-top:1rem;padding:.7rem 1.2rem;font-size:1rem;background:#c8102e;color:#fff;border:0;
border-radius:6px}}</style>
</head><body><h1>Fake TikTok</h1>
<p>A local stand-in for TikTok's login (demo and tests). <strong>{html.escape(q.get("client_key", ""))}</strong>
asks for: {html.escape(q.get("scope", ""))}</p>
<form method="post" action="confirm/">{hidden}
<label for="name">Your TikTok name</label><input type="text" id="name" name="name" value="Demo Creator" required>
<label for="caption">Caption of your latest video</label>
<input type="text" id="caption" name="caption" value="{html.escape(DEFAULT_CAPTION)}">
<button type="submit" id="authorize">Authorize</button></form></body></html>"""
    return FakeResponse(status=200, body=page, content_type="text/html; charset=utf-8")


def _authorize_confirm(form: dict[str, str]) -> FakeResponse:
    name = form.get("name", "").strip() or "Demo Creator"
    code = _sign(
        {
            "name": name,
            "caption": form.get("caption", DEFAULT_CAPTION),
            "scope": form.get("scope", ""),
            "t": int(time.time()),
        }
    )
    sep = "&" if "?" in form.get("redirect_uri", "") else "?"
    query = urlencode({"code": code, "state": form.get("state", ""), "scopes": form.get("scope", "")})
    return FakeResponse(status=302, body="", location=f"{form.get('redirect_uri', '')}{sep}{query}")


def _oauth_error(error: str, description: str, status: int = 400) -> FakeResponse:
    return _json({"error": error, "error_description": description, "log_id": secrets.token_hex(8)}, status)


def _grant(person: dict, *, refresh_exp: int) -> FakeResponse:
    """The token response: a new access token, and a new refresh token expiring when the login's does."""
    now = int(_now())
    access_seconds = int(getattr(settings, "FAKE_TIKTOK_ACCESS_SECONDS", 86400))
    person = {k: v for k, v in person.items() if k not in ("exp", "jti")}
    return _json(
        {
            "access_token": "act." + _sign({**person, "exp": now + access_seconds, "jti": secrets.token_hex(8)}),
            "expires_in": access_seconds,
            "open_id": open_id_for(person["name"]),
            "refresh_token": "rft." + _sign({**person, "exp": refresh_exp, "jti": secrets.token_hex(8)}),
            "refresh_expires_in": max(0, refresh_exp - now),
            "scope": person.get("scope", ""),
            "token_type": "Bearer",
        }
    )


def _token(form: dict[str, str]) -> FakeResponse:
    if form.get("grant_type") == "refresh_token":
        return _refresh(form)
    person = _unsign(form.get("code", ""))
    if person is None or form.get("grant_type") != "authorization_code":
        return _oauth_error("invalid_grant", "bad code")
    refresh_seconds = int(getattr(settings, "FAKE_TIKTOK_REFRESH_SECONDS", 365 * 86400))
    return _grant(person, refresh_exp=int(_now()) + refresh_seconds)


def _refresh(form: dict[str, str]) -> FakeResponse:
    if getattr(settings, "FAKE_TIKTOK_OUTAGE", False):
        return _error("internal_error", 503)
    token = form.get("refresh_token", "")
    claims = _unsign(token.removeprefix("rft.")) if token.startswith("rft.") else None
    if claims is None or claims.get("exp", 0) <= _now() or _revoked(claims):
        return _oauth_error("invalid_grant", "The refresh token is invalid, expired or revoked.")
    with _spent_lock:
        if claims["jti"] in _spent:
            return _oauth_error("invalid_grant", "The refresh token was already used.")
        _spent.add(claims["jti"])
    return _grant(claims, refresh_exp=claims["exp"])


def _person(authorization: str) -> dict | None:
    """The person an access token was issued to, while it is valid and not revoked."""
    token = authorization.removeprefix("Bearer ").strip()
    person = _unsign(token.removeprefix("act.")) if token.startswith("act.") else None
    if person is None or person.get("exp", 0) <= _now() or _revoked(person):
        return None
    return person


def _videos(person: dict) -> list[dict]:
    per_minute = getattr(settings, "FAKE_TIKTOK_VIEWS_PER_MINUTE", 500)
    minutes = max(0.0, (time.time() - person["t"]) / 60)
    open_id = open_id_for(person["name"])
    return [
        {
            "id": f"{open_id}_v1",
            "title": person.get("caption", ""),
            "video_description": person.get("caption", ""),
            "view_count": 120 + int(per_minute * minutes),
            "create_time": person["t"],
            "share_url": f"https://www.tiktok.com/@fake/video/{open_id}_v1",
            "cover_image_url": f"https://p16-sign.tiktokcdn.example/obj/{open_id}_v1.jpeg",
        },
        {
            "id": f"{open_id}_v2",
            "title": "My cat",
            "video_description": "My cat being a cat #caturday",
            "view_count": 42,
            "create_time": person["t"] - 86400,
            "share_url": f"https://www.tiktok.com/@fake/video/{open_id}_v2",
            "cover_image_url": f"https://p16-sign.tiktokcdn.example/obj/{open_id}_v2.jpeg",
        },
    ]


def handle(request: FakeRequest) -> FakeResponse:
    """Route one request to the fake's endpoint."""
    path = "/" + request.path.strip("/") + "/"
    if path == "/v2/auth/authorize/" and request.method == "GET":
        return _authorize_page(request.query)
    if path == "/v2/auth/authorize/confirm/" and request.method == "POST":
        return _authorize_confirm(request.form)
    if path == "/v2/oauth/token/" and request.method == "POST":
        return _token(request.form)
    if path.startswith("/v2/video/") and getattr(settings, "FAKE_TIKTOK_OUTAGE", False):
        return _error("internal_error", 503)
    person = _person(request.authorization)
    if path.startswith("/v2/") and person is None:
        return _error("access_token_invalid", 401)
    if path == "/v2/user/info/":
        name = person["name"]
        user = {"open_id": open_id_for(name), "display_name": name, "username": name.lower().replace(" ", "")}
        return _json({"data": {"user": user}, "error": {"code": "ok"}})
    if path in ("/v2/video/list/", "/v2/video/query/") and request.method == "POST":
        if "video.list" not in person.get("scope", ""):
            return _error("scope_not_authorized", 401)
        removed = set(getattr(settings, "FAKE_TIKTOK_REMOVED_VIDEOS", ()))
        videos = [v for v in _videos(person) if v["id"] not in removed]
        if path == "/v2/video/query/":
            wanted = set(json.loads(request.body or b"{}").get("filters", {}).get("video_ids", []))
            videos = [v for v in videos if v["id"] in wanted]
        return _json({"data": {"videos": videos, "cursor": 0, "has_more": False}, "error": {"code": "ok"}})
    return _error("not_found", 404)


def wsgi_app(environ, start_response):
    """The fake as a WSGI application (for ``wsgiref.simple_server`` in tests)."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    form = {}
    if environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
    request = FakeRequest(
        method=environ["REQUEST_METHOD"],
        path=environ.get("PATH_INFO", "/"),
        query={k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()},
        form=form,
        body=body,
        authorization=environ.get("HTTP_AUTHORIZATION", ""),
    )
    response = handle(request)
    headers = [("Content-Type", response.content_type)]
    if response.location:
        headers.append(("Location", response.location))
    reason = {200: "OK", 302: "Found", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}
    start_response(f"{response.status} {reason.get(response.status, 'Error')}", headers)
    return [response.body.encode()]
