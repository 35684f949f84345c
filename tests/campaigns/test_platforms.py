"""The platform seam (``campaigns.platforms``): the registry, and the contract TikTok and WhatsApp
both keep — identity proof, content, signed webhooks parsed into events, production checks.
Signatures are computed here, independently of the code under test."""

import hashlib
import hmac
import json
import time

import pytest
from django.test import Client, RequestFactory

from campaigns.platforms import BUILTIN_PLATFORMS, InboundEvent, Platform, platform_get, platform_names
from core.exceptions import InvalidInput
from core.models import InboundStatus, InboundWebhook
from core.webhooks_in import Rejected, Verified
from tests.claim.conftest import tiktok_login
from tests.portal.conftest import brand_a, campaign_a, fake_tiktok  # noqa: F401 - fixtures

SECRET = "platform-test-secret"


@pytest.fixture(autouse=True)
def secrets_(settings):
    settings.WHATSAPP_APP_SECRET = SECRET
    settings.WHATSAPP_VERIFY_TOKEN = "verify-me"
    settings.TIKTOK_CLIENT_SECRET = SECRET
    settings.TIKTOK_CLIENT_KEY = "tt-app"


def signed(name: str, body: bytes, secret: str = SECRET) -> dict:
    """The headers each provider documents for a signed delivery."""
    if name == "tiktok":
        t = int(time.time())
        digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
        return {"TikTok-Signature": f"t={t},s={digest}"}
    return {"X-Hub-Signature-256": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}


BODIES = {
    "tiktok": {"client_key": "tt-app", "event": "authorization.removed", "user_openid": "act.example"},
    "whatsapp": {
        "object": "whatsapp_business_account",
        "entry": [{"changes": [{"value": {
            "contacts": [{"profile": {"name": "Sheena"}, "wa_id": "393331234567"}],
            "messages": [{"from": "393331234567", "id": "wamid.A", "type": "text", "text": {"body": "hi JBABCDEF"}}],
        }, "field": "messages"}]}],
    },
}  # fmt: skip


def test_the_registry_builds_both_platforms():
    assert {"tiktok", "whatsapp"} <= set(platform_names()) and set(BUILTIN_PLATFORMS) <= set(platform_names())
    assert [platform_get(n).name for n in ("tiktok", "whatsapp")] == ["tiktok", "whatsapp"]
    assert {platform_get(n).proof for n in ("tiktok", "whatsapp")} == {"oauth", "inbound_code"}


def test_an_unknown_platform_is_a_clear_error():
    with pytest.raises(InvalidInput) as exc:
        platform_get("myspace")
    assert exc.value.code == "unknown_platform" and "tiktok" in exc.value.details["known"]


@pytest.mark.parametrize("name", ["tiktok", "whatsapp"])
def test_a_signed_body_verifies_and_a_changed_or_unsigned_one_does_not(name):
    platform = platform_get(name)
    body = json.dumps(BODIES[name]).encode()
    assert isinstance(platform.webhook_verify(body=body, headers=signed(name, body)), Verified)
    assert isinstance(platform.webhook_verify(body=body + b" ", headers=signed(name, body)), Rejected)
    assert isinstance(platform.webhook_verify(body=body, headers=signed(name, body, secret="wrong")), Rejected)
    assert isinstance(platform.webhook_verify(body=body, headers={}), Rejected)


@pytest.mark.parametrize("name", ["tiktok", "whatsapp"])
def test_without_its_secret_a_platform_refuses_every_delivery(settings, name):
    settings.WHATSAPP_APP_SECRET = settings.TIKTOK_CLIENT_SECRET = ""
    body = json.dumps(BODIES[name]).encode()
    assert isinstance(platform_get(name).webhook_verify(body=body, headers=signed(name, body, secret="")), Rejected)


def test_bodies_parse_into_events_in_our_words():
    tiktok = platform_get("tiktok").webhook_events(body=json.dumps(BODIES["tiktok"]).encode())
    assert [(e.kind, e.uid) for e in tiktok] == [("authorization.removed", "act.example")]
    whatsapp = platform_get("whatsapp").webhook_events(body=json.dumps(BODIES["whatsapp"]).encode())
    assert whatsapp == [InboundEvent(kind="text", uid="393331234567", ref="wamid.A", name="Sheena", text="hi JBABCDEF")]


@pytest.mark.parametrize("name", ["tiktok", "whatsapp"])
@pytest.mark.parametrize("body", [b"not json", b"[1, 2]"])
def test_a_body_that_is_not_the_platforms_is_a_final_invalid_input(name, body):
    with pytest.raises(InvalidInput) as exc:
        platform_get(name).webhook_events(body=body)
    assert exc.value.code == "webhook_invalid"


def test_a_message_without_a_known_code_is_ignored(db):
    whatsapp = platform_get("whatsapp")
    events = whatsapp.webhook_events(body=json.dumps(BODIES["whatsapp"]).encode())
    assert whatsapp.webhook_handle(webhook_id=1, events=events) == InboundStatus.IGNORED


def test_the_subscription_check_answers_only_the_verify_token():
    whatsapp = platform_get("whatsapp")
    ok = {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "42"}
    assert whatsapp.webhook_challenge(params=ok) == "42"
    assert whatsapp.webhook_challenge(params={**ok, "hub.verify_token": "nope"}) is None
    assert platform_get("tiktok").webhook_challenge(params=ok) is None


@pytest.mark.parametrize(
    ("name", "setting"), [("tiktok", "FAKE_TIKTOK_ENABLED"), ("whatsapp", "FAKE_WHATSAPP_ENABLED")]
)
def test_each_platform_checks_its_own_fake_is_off(settings, name, setting):
    setattr(settings, setting, True)
    assert any(setting in m.msg and m.is_serious() for m in platform_get(name).production_checks())


def test_an_oauth_identity_is_read_from_the_session_with_its_evidence(db, client, request):
    campaign, fake_base = request.getfixturevalue("campaign_a"), request.getfixturevalue("fake_tiktok")
    # given nobody logged in, no identity is proven
    tiktok = platform_get("tiktok")
    request = RequestFactory().get("/")
    request.session = client.session
    assert tiktok.identity_from_session(request) is None
    # when a person logs in with TikTok (the fake) and the claim page reads the session
    here = f"/c/{campaign.brand.slug}/{campaign.slug}/tiktok/"
    tiktok_login(client, fake_base=fake_base, next_url=here, name="Giulia Rossi", scope="user.info.basic,video.list")
    request.session = client.session
    identity = tiktok.identity_from_session(request)
    # then the account, a token to read their videos and the login's evidence (never the token)
    assert identity.name == "Giulia Rossi" and identity.token and identity.uid.startswith("fake_")
    assert set(identity.evidence) == {"login", "open_id", "scopes", "logged_in_at"}
    assert identity.token not in json.dumps(dict(identity.evidence))
    # and its content is read, then re-checked by id: another person's id comes back missing
    videos = tiktok.content_list(identity=identity)
    assert videos and any(v.has_tag("joyback") for v in videos)
    assert [v.id for v in tiktok.content_query(token=identity.token, ids=[videos[0].id, "someone_else"])] == [
        videos[0].id
    ]


class AcceptingFake(Platform):
    """A platform put in place by settings: the inbound door must use it."""

    name = "tiktok"
    label = "Fake"
    proof = "oauth"

    def webhook_verify(self, *, body, headers):
        return Verified(dedupe_key="fake:" + hashlib.sha256(body).hexdigest())

    def webhook_events(self, *, body):
        return [InboundEvent(kind="ping")]

    def webhook_handle(self, *, webhook_id, events):
        return InboundStatus.PROCESSED if [e.kind for e in events] == ["ping"] else InboundStatus.IGNORED


def test_settings_put_another_implementation_behind_the_same_door(settings, db, django_capture_on_commit_callbacks):
    # given settings that name another class for the tiktok platform
    settings.PLATFORMS = {"tiktok": f"{__name__}.AcceptingFake"}
    # when an unsigned delivery arrives at TikTok's webhook
    with django_capture_on_commit_callbacks(execute=True):
        response = Client().post("/api/webhooks/tiktok/", b"{}", content_type="application/json")
    # then that implementation verified, parsed and handled it
    assert response.status_code == 200
    assert InboundWebhook.objects.get().status == InboundStatus.PROCESSED
