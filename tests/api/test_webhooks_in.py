"""Inbound webhooks: WhatsApp (verification, signed messages, opt-in codes), TikTok, Wise.
Payloads are shaped like the providers' documentation examples; signatures are computed here
independently of the code under test."""

import base64
import hashlib
import hmac
import json
import logging
import time
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from django.test import Client
from django.utils import timezone

from campaigns.models import EventSource, Reward, TriggerEvent
from campaigns.platforms.whatsapp import whatsapp_optin_code_issue
from core.models import InboundStatus, InboundWebhook
from recipients.models import Identifier
from tests.campaigns.factories import funded_campaign

APP_SECRET = "wa-app-secret"
TIKTOK_SECRET = "tt-client-secret"
WA_NUMBER = "393331234567"


@pytest.fixture(autouse=True)
def secrets_(settings):
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    settings.WHATSAPP_VERIFY_TOKEN = "verify-me"
    settings.TIKTOK_CLIENT_SECRET = TIKTOK_SECRET
    settings.TIKTOK_CLIENT_KEY = "bwo2m45353a6k85"


def wa_message(text: str, message_id: str = "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=") -> dict:
    """The Cloud API's documented text-message notification."""
    return {
        "object": "whatsapp_business_account",
        "entry": [{
            "id": "102290129340398",
            "changes": [{
                "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
                    "contacts": [{"profile": {"name": "Sheena Nelson"}, "wa_id": WA_NUMBER}],
                    "messages": [{"from": WA_NUMBER, "id": message_id, "timestamp": "1749416383",
                                  "type": "text", "text": {"body": text}}],
                },
                "field": "messages",
            }],
        }],
    }  # fmt: skip


def post_wa(body: bytes, signature: str | None = None):
    signature = signature or "sha256=" + hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return Client().post(
        "/api/webhooks/whatsapp/", body, content_type="application/json", HTTP_X_HUB_SIGNATURE_256=signature
    )


@pytest.fixture
def optin_campaign(brand):
    return funded_campaign(
        brand=brand, amount_minor=10_000, rules=[{"trigger": "whatsapp_optin", "fixed_minor": 300}], slug="wa"
    )


def test_whatsapp_subscription_check(db):
    ok = Client().get(
        "/api/webhooks/whatsapp/",
        {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "1158201444"},
    )
    assert ok.status_code == 200 and ok.content == b"1158201444"
    bad = Client().get(
        "/api/webhooks/whatsapp/", {"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "1"}
    )
    assert bad.status_code == 403


def test_whatsapp_code_completes_the_optin_once(optin_campaign, django_capture_on_commit_callbacks):
    code = whatsapp_optin_code_issue(campaign=optin_campaign)
    body = json.dumps(wa_message(f"Hi! my code is {code.code.lower()} thanks")).encode()
    with django_capture_on_commit_callbacks(execute=True):
        first = post_wa(body)
    assert first.status_code == 200 and first.json()["duplicate"] is False
    webhook = InboundWebhook.objects.get()
    assert webhook.status == InboundStatus.PROCESSED and bytes(webhook.body) == body
    event = TriggerEvent.objects.get()
    assert event.source == EventSource.WHATSAPP and event.type == "whatsapp_optin"
    assert event.external_id.startswith("wa:wamid.")
    assert Reward.objects.get().amount_minor == 300
    assert Identifier.objects.filter(kind="whatsapp", value=f"+{WA_NUMBER}").exists()
    code.refresh_from_db()
    assert code.used_at and code.person_id == event.person_id
    with django_capture_on_commit_callbacks(execute=True):
        again = post_wa(body)  # Meta redelivers
    assert again.json()["duplicate"] is True
    assert InboundWebhook.objects.count() == 1 and TriggerEvent.objects.count() == 1


def test_code_used_by_another_message_pays_nothing(optin_campaign, django_capture_on_commit_callbacks):
    code = whatsapp_optin_code_issue(campaign=optin_campaign)
    with django_capture_on_commit_callbacks(execute=True):
        post_wa(json.dumps(wa_message(code.code, "wamid.ONE")).encode())
        post_wa(json.dumps(wa_message(code.code, "wamid.TWO")).encode())
    assert TriggerEvent.objects.count() == 1
    assert InboundWebhook.objects.get(dedupe_key="msg:wamid.TWO").status == InboundStatus.IGNORED


def test_expired_code_pays_nothing(optin_campaign, django_capture_on_commit_callbacks):
    code = whatsapp_optin_code_issue(campaign=optin_campaign, ttl=timedelta(minutes=1))
    type(code).objects.filter(pk=code.pk).update(
        created_at=timezone.now() - timedelta(hours=2), expires_at=timezone.now() - timedelta(hours=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        post_wa(json.dumps(wa_message(code.code)).encode())
    assert not TriggerEvent.objects.exists()


@pytest.mark.parametrize("signature", ["sha256=" + "0" * 64, "", "md5=abc"])
def test_forged_whatsapp_delivery_is_401_and_only_logged(optin_campaign, caplog, signature):
    code = whatsapp_optin_code_issue(campaign=optin_campaign)
    body = json.dumps(wa_message(code.code)).encode()
    with caplog.at_level(logging.WARNING, logger="security"):
        response = Client().post(
            "/api/webhooks/whatsapp/", body, content_type="application/json",
            **({"HTTP_X_HUB_SIGNATURE_256": signature} if signature else {}),
        )  # fmt: skip
    assert response.status_code == 401 and response.json()["code"] == "invalid_signature"
    assert [r.name for r in caplog.records if r.name == "security"] == ["security"]
    assert not InboundWebhook.objects.exists() and not TriggerEvent.objects.exists()


def test_unconfigured_secret_refuses_everything(db, settings):
    settings.WHATSAPP_APP_SECRET = ""
    assert post_wa(b"{}", signature="sha256=" + hmac.new(b"", b"{}", hashlib.sha256).hexdigest()).status_code == 401


# --- TikTok --------------------------------------------------------------------------------------

TIKTOK_EVENT = {
    "client_key": "bwo2m45353a6k85",
    "event": "authorization.removed",
    "create_time": 1615338610,
    "user_openid": "act.example12345Example12345Example",
    "content": json.dumps({"reason": 1}),
}


def post_tiktok(body: bytes, *, t: int | None = None, secret: str = TIKTOK_SECRET):
    t = int(time.time()) if t is None else t
    s = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return Client().post(
        "/api/webhooks/tiktok/", body, content_type="application/json", HTTP_TIKTOK_SIGNATURE=f"t={t},s={s}"
    )


def test_tiktok_signed_event_is_stored_and_acknowledged(db, django_capture_on_commit_callbacks):
    body = json.dumps(TIKTOK_EVENT).encode()
    with django_capture_on_commit_callbacks(execute=True):
        response = post_tiktok(body)
    assert response.status_code == 200
    assert InboundWebhook.objects.get().status == InboundStatus.PROCESSED


@pytest.mark.parametrize("kwargs", [{"t": int(time.time()) - 3600}, {"secret": "wrong"}])
def test_tiktok_stale_or_forged_is_401(db, kwargs):
    assert post_tiktok(json.dumps(TIKTOK_EVENT).encode(), **kwargs).status_code == 401
    assert not InboundWebhook.objects.exists()


# --- Wise ----------------------------------------------------------------------------------------


@pytest.fixture
def wise_key(settings):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    settings.PAYOUT_RAILS = {
        **settings.PAYOUT_RAILS,
        "psp_api": {"BACKEND": "payouts.rails.psp_api.WiseRail", "OPTIONS": {"webhook_public_key_pem": pem.decode()}},
    }
    return key


def wise_state_change(transfer_id: int, state: str) -> bytes:
    """Wise's documented transfers#state-change v2 body."""
    return json.dumps({
        "data": {"resource": {"type": "transfer", "id": transfer_id, "profile_id": 217896, "account_id": 0},
                 "current_state": state, "previous_state": "processing", "occurred_at": "2026-06-01T12:00:00Z"},
        "subscription_id": "01234567-89ab-cdef-0123-456789abcdef",
        "event_type": "transfers#state-change", "schema_version": "2.0.0", "sent_at": "2026-06-01T12:00:01Z",
    }).encode()  # fmt: skip


def post_wise(key, body: bytes, delivery_id: str = "d-1"):
    signature = base64.b64encode(key.sign(body, padding.PKCS1v15(), hashes.SHA256())).decode()
    return Client().post(
        "/api/webhooks/wise/", body, content_type="application/json",
        HTTP_X_SIGNATURE_SHA256=signature, HTTP_X_DELIVERY_ID=delivery_id,
    )  # fmt: skip


def test_wise_outgoing_payment_sent_settles_the_payout(campaign, wise_key, django_capture_on_commit_callbacks):
    from django.db import transaction

    from campaigns.services import rewards_mature
    from payouts.models import PayoutStatus
    from payouts.services.states import drive, payout_lock
    from reconciliation.services.statements import platform_bank_account_create
    from tests.api.conftest import ingest
    from tests.api.test_isolation import make_payout

    bank = platform_bank_account_create(name="Operating", iban="NL91ABNA0417164300", currency="EUR")
    reward = ingest(campaign).reward
    rewards_mature(now=timezone.now() + timedelta(seconds=1))
    reward.refresh_from_db()
    payout = make_payout([reward])
    type(payout).objects.filter(pk=payout.pk).update(rail="psp_api", debtor_account_code=bank.ledger_account.code)
    with transaction.atomic():
        drive(
            payout_lock(payout.pk), target=PayoutStatus.SUBMITTED, now=timezone.now(), via="rail", rail_reference="4711"
        )
    with django_capture_on_commit_callbacks(execute=True):
        response = post_wise(wise_key, wise_state_change(4711, "outgoing_payment_sent"))
    assert response.status_code == 200
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED
    with django_capture_on_commit_callbacks(execute=True):
        assert post_wise(wise_key, wise_state_change(4711, "outgoing_payment_sent")).json()["duplicate"] is True


def test_wise_forged_is_401(db, wise_key):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert post_wise(other, wise_state_change(1, "outgoing_payment_sent")).status_code == 401
    assert not InboundWebhook.objects.exists()


@pytest.mark.parametrize("path", ["/api/webhooks/tiktok/", "/api/webhooks/wise/", "/api/webhooks/whatsapp/"])
def test_a_refused_method_on_an_inbound_webhook_is_problem_json(client, path):
    response = client.put(path, b"{}", content_type="application/json")
    assert response.status_code == 405
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "method_not_allowed" and "POST" in response["Allow"]


def test_one_door_for_every_registered_provider_and_none_for_others(db, wise_key, caplog):
    unknown = Client().post("/api/webhooks/stripe/", b"{}", content_type="application/json")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "not_found")
    assert Client().get("/api/webhooks/stripe/").status_code == 404
    with caplog.at_level(logging.WARNING, logger="security"):
        assert Client().get("/api/webhooks/tiktok/", {"hub.challenge": "1"}).status_code == 403  # no check of its own
    assert not InboundWebhook.objects.exists()


def test_a_delivery_keeps_its_providers_headers_and_never_credentials(db, wise_key):
    body = wise_state_change(1, "processing")
    signature = base64.b64encode(wise_key.sign(body, padding.PKCS1v15(), hashes.SHA256())).decode()
    response = Client().post(
        "/api/webhooks/wise/", body, content_type="application/json", HTTP_X_SIGNATURE_SHA256=signature,
        HTTP_X_DELIVERY_ID="d-9", HTTP_AUTHORIZATION="Bearer secret", HTTP_COOKIE="sessionid=x",
        HTTP_TIKTOK_SIGNATURE="t=1,s=2",
    )  # fmt: skip
    assert response.status_code == 200
    kept = {k.lower() for k in InboundWebhook.objects.get().headers}
    assert {"x-signature-sha256", "x-delivery-id", "content-type"} <= kept
    assert not kept & {"authorization", "cookie", "tiktok-signature"}
