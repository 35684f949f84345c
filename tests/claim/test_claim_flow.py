"""The claim flow with Django's test client, TikTok played by the local fake on a real socket and
payouts by the sandbox rail: each trigger from the first page to the status page."""

import json
import re
from datetime import datetime

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone, translation

from campaigns.models import Campaign, EventOutcome, PlatformCredential, Reward, TriggerEvent, VideoSubmission
from campaigns.platforms.whatsapp import whatsapp_optin_redeem
from campaigns.services import EventInput, event_ingest, rewards_mature
from campaigns.services.claim_links import claim_links_send_due
from payouts.links import STATUS_SALT, token_make, token_read
from payouts.services import payout_execute, payouts_create_for_payable
from payouts.tasks import payout_settled_followup_task
from recipients import crypto
from recipients.models import Consent
from recipients.models_claims import ClaimLink, WhatsAppOptInCode
from recipients.services.notices import notices_send_due
from reconciliation.models import Hold
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.claim.conftest import tiktok_login
from web.claim.forms import PayoutForm
from web.claim.services import PayoutDetails, claim_tiktok_login_submit
from web.claim.views import _phone_region

pytestmark = pytest.mark.django_db

GOOD_IBAN = "IT60 X054 2811 1010 0000 0123 456"
BAD_IBAN = "IT61 X054 2811 1010 0000 0123 456"
UGC = {"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback"}


def pay_everything():
    """What the worker does: mature, create payouts, execute them, finish settled ones."""
    rewards_mature()
    for payout_id in payouts_create_for_payable(enqueue=False).created:
        payout_execute(payout_id=payout_id)
        payout_settled_followup_task(payout_id)


def details(**extra):
    return {"name": "Giulia Rossi", "email": "giulia@example.com", "iban": GOOD_IBAN, "consent": "on", **extra}


def test_tiktok_login_claim_from_first_page_to_paid(campaign_a, fake_tiktok, sandbox, debtor):
    client = Client()
    # the campaign page offers the TikTok login
    page = client.get("/c/alpha/summer/")
    assert b"Continue with TikTok" in page.content or b"Continua con TikTok" in page.content
    # the login through allauth against the fake lands on the payout form
    landed = tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/summer/tiktok/")
    assert landed.status_code == 302 and landed["Location"] == "/c/alpha/summer/tiktok/"
    form = client.get("/c/alpha/summer/tiktok/")
    assert b"Giulia Rossi" in form.content
    # a wrong IBAN is refused in plain words and nothing is ingested
    wrong = client.post("/c/alpha/summer/tiktok/", details(iban=BAD_IBAN))
    assert b"checksum is wrong" in wrong.content or b"checksum" in wrong.content.lower()
    assert not TriggerEvent.objects.exists()
    # the right one gives a reward and the status page
    done = client.post("/c/alpha/summer/tiktok/", details())
    assert done.status_code == 302 and done["Location"].startswith("/c/s/")
    reward = Reward.objects.get()
    assert reward.event.social_uid.startswith("fake_") and reward.event.source == "tiktok"
    assert Consent.objects.filter(person=reward.person, channel="claim_page").exists()
    status = client.get(done["Location"])
    assert status.context["status"].state in ("held", "payable")
    # the worker pays; the status page says paid
    pay_everything()
    assert client.get(done["Location"]).context["status"].state == "paid"
    # a second claim by the same TikTok account returns the first reward
    again = client.post("/c/alpha/summer/tiktok/", details(iban="DE89370400440532013000"))
    assert token_read(STATUS_SALT, again["Location"].split("/")[3]) == reward.pk and Reward.objects.count() == 1


def test_whatsapp_opt_in_claim(brand_a, sandbox, debtor):
    funded_campaign(
        brand=brand_a, amount_minor=10_000, rules=[{"trigger": "whatsapp_optin", "fixed_minor": 300}], slug="hello"
    )
    client = Client()
    started = client.post("/c/alpha/hello/whatsapp/")
    code = WhatsAppOptInCode.objects.get().code
    assert started["Location"] == f"/c/alpha/hello/whatsapp/{code}/"
    waiting = client.get(started["Location"])
    assert code.encode() in waiting.content and b"wa.me" in waiting.content
    assert client.get(started["Location"] + "?format=json").json() == {"state": "waiting"}
    # the person sends the code: the inbound webhook redeems it
    whatsapp_optin_redeem(code=code, wa_number="393471234567", message_id="wamid.1", name="Marco")
    assert client.get(started["Location"] + "?format=json").json() == {"state": "done"}
    form_page = client.get(started["Location"])
    assert form_page.status_code == 302 and form_page["Location"].startswith("/c/r/")
    done = client.post(form_page["Location"], {"name": "Marco Bianchi", "iban": GOOD_IBAN, "consent": "on"})
    assert done.status_code == 302 and done["Location"].startswith("/c/s/")
    pay_everything()
    assert client.get(done["Location"]).context["status"].state == "paid"


def test_purchase_reward_gets_a_claim_link_by_email(brand_a, sandbox, debtor, settings):
    settings.CLAIM_BASE_URL = "http://testserver"
    funded_campaign(
        brand=brand_a,
        amount_minor=10_000,
        slug="shop",
        mode="cashback",
        rules=[{"trigger": "purchase", "fixed_minor": 1000, "verification": "partner_attested"}],
    )
    result = event_ingest(
        brand=brand_a,
        payload=event(
            campaign="shop", type="purchase", source="api", email="buyer@example.com", purchase_amount_minor=5000
        ),
    )
    assert result.outcome == EventOutcome.REWARDED
    assert claim_links_send_due() == 1
    assert claim_links_send_due() == 0  # once only
    assert notices_send_due().sent == 1  # by e-mail: the only channel the partner gave
    link = re.search(r"http://testserver(/c/r/\S+/)", mail.outbox[-1].body).group(1)
    client = Client()
    done = client.post(link, {"name": "Anna Verdi", "iban": GOOD_IBAN, "consent": "on"})
    assert done.status_code == 302
    pay_everything()
    assert client.get(done["Location"]).context["status"].state == "paid"


def test_ugc_video_is_verified_by_a_job_then_rewarded(
    brand_a, fake_tiktok, sandbox, debtor, django_capture_on_commit_callbacks
):
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="ugc", rules=[UGC])
    client = Client()
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/ugc/videos/", scope="video.list")
    page = client.get("/c/alpha/ugc/videos/")
    videos = page.context["videos"]
    mine = next(v for v in videos if v.has_tag("#joyback"))
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post("/c/alpha/ugc/videos/", {**details(), "video_id": mine.id})
    # django-q2 runs synchronously in tests: the job verified the video and sent the event
    submission = VideoSubmission.objects.get()
    assert submission.status == "verified" and not PlatformCredential.objects.exists()
    assert client.get(done["Location"])["Location"].startswith("/c/s/")
    assert Reward.objects.get().rule.trigger == "ugc_share"


def test_a_video_without_the_hashtag_is_rejected(brand_a, fake_tiktok, django_capture_on_commit_callbacks):
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="ugc", rules=[UGC])
    client = Client()
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/ugc/videos/", scope="video.list")
    other = next(v for v in client.get("/c/alpha/ugc/videos/").context["videos"] if not v.has_tag("#joyback"))
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/c/alpha/ugc/videos/", {**details(), "video_id": other.id})
    assert VideoSubmission.objects.get().status == "rejected"
    assert not Reward.objects.exists()


def test_honeypot_and_rate_limit_stop_bots(campaign_a, fake_tiktok, settings):
    client = Client()
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/summer/tiktok/")
    assert client.post("/c/alpha/summer/tiktok/", details(website="http://spam")).status_code == 404
    settings.CLAIM_RATE_LIMIT_PER_IP = 1
    client.post("/c/alpha/summer/tiktok/", details(iban=BAD_IBAN))
    limited = client.post("/c/alpha/summer/tiktok/", details())
    assert b"Too many attempts" in limited.content or b"Troppi tentativi" in limited.content
    assert not TriggerEvent.objects.exists()


def test_a_spent_budget_is_said_plainly(brand_a):
    campaign = funded_campaign(
        brand=brand_a, amount_minor=500, slug="tiny", rules=[{"trigger": "tiktok_login", "fixed_minor": 500}]
    )
    # the one reward the budget covers is taken: the campaign pauses itself, budget exhausted
    event_ingest(
        brand=brand_a,
        payload=EventInput(
            external_id="t-1",
            campaign=campaign.slug,
            type="tiktok_login",
            source="tiktok",
            social_provider="tiktok",
            social_uid="u-1",
        ),
    )
    page = Client().get("/c/alpha/tiny/", HTTP_ACCEPT_LANGUAGE="en")
    assert page.context["closed"] and b"budget has run out" in page.content


def test_iban_check_endpoint_speaks_plainly():
    client = Client()
    bad = client.get("/c/iban-check/", {"iban": BAD_IBAN, "lang": "en"}).json()
    assert bad == {"valid": False, "message": "The IBAN checksum is wrong: please check it for a typo."}
    good = client.get("/c/iban-check/", {"iban": "DE89370400440532013000"}).json()
    assert good["valid"] and good["bic"] == "COBADEFFXXX" and good["bank_name"]


def test_status_links_are_signed(campaign_a):
    client = Client()
    assert client.get("/c/s/1:forged/").status_code == 404
    assert client.get(f"/c/s/{token_make('other-salt', 1)}/").status_code == 404
    assert client.get(f"/c/s/{token_make(STATUS_SALT, 999)}/").status_code == 404


def test_amounts_read_as_people_write_them_in_their_language(client, campaign_a):
    """django-money formats every amount shown (issue 16): 5,00 € in Italian, €5.00 in English."""
    italian = client.get(f"/c/{campaign_a.brand.slug}/{campaign_a.slug}/", HTTP_ACCEPT_LANGUAGE="it").content.decode()
    assert "5,00\xa0€" in italian and "EUR" not in italian


def test_the_browser_language_is_used_until_the_person_switches(client, campaign_a):
    page = f"/c/{campaign_a.brand.slug}/{campaign_a.slug}/"
    assert (
        client.get(page, HTTP_ACCEPT_LANGUAGE="de-DE, it;q=0.8, en;q=0.5")
        .content.decode()
        .startswith('<!doctype html>\n<html lang="it"')
    )
    client.cookies["django_language"] = "en"
    assert '<html lang="en"' in client.get(page, HTTP_ACCEPT_LANGUAGE="it").content.decode()


def test_a_whatsapp_claim_left_half_way_resumes_where_it_stopped(brand_a):
    """The person got the reward, left the payout form, and starts again: the second opt-in is
    refused by the once-per-person cap, and leads back to the first reward's form, not a dead end."""
    rule = {"trigger": "whatsapp_optin", "fixed_minor": 300, "person_count_per_campaign": 1}
    funded_campaign(brand=brand_a, amount_minor=10_000, rules=[rule], slug="again")
    client = Client()
    first = client.post("/c/alpha/again/whatsapp/")["Location"]
    whatsapp_optin_redeem(code=first.rstrip("/").rsplit("/", 1)[1], wa_number="393471234567", message_id="wamid.a")
    form_page = client.get(first)["Location"]
    second = client.post("/c/alpha/again/whatsapp/")["Location"]
    assert second != first
    whatsapp_optin_redeem(code=second.rstrip("/").rsplit("/", 1)[1], wa_number="393471234567", message_id="wamid.b")
    resumed = client.get(second)
    # A fresh link (the first code was spent handing out the first), to the same reward.
    assert resumed.status_code == 302 and resumed["Location"].startswith("/c/r/") and form_page.startswith("/c/r/")
    assert Reward.objects.count() == 1 and set(ClaimLink.objects.values_list("reward_id", flat=True)) == {
        Reward.objects.get().pk
    }


def test_a_rejected_video_offers_another_pick(brand_a, fake_tiktok, django_capture_on_commit_callbacks):
    funded_campaign(brand=brand_a, amount_minor=10_000, slug="ugc2", rules=[UGC])
    client = Client()
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/ugc2/videos/", scope="video.list")
    other = next(v for v in client.get("/c/alpha/ugc2/videos/").context["videos"] if not v.has_tag("#joyback"))
    with django_capture_on_commit_callbacks(execute=True):
        status_url = client.post("/c/alpha/ugc2/videos/", {**details(), "video_id": other.id})["Location"]
    page = client.get(status_url).content.decode()
    assert 'data-testid="pick-another-video"' in page and 'href="/c/alpha/ugc2/videos/"' in page


def test_a_number_typed_without_its_country_code_is_read_as_from_the_campaigns_country():
    assert _phone_region(Campaign(timezone="Europe/Rome")) == "IT"
    assert _phone_region(Campaign(timezone="Europe/London")) == "GB"
    data = {"name": "Marco", "whatsapp": "347 123 4567", "iban": GOOD_IBAN, "consent": "on"}
    form = PayoutForm(data, phone_region="IT")
    assert form.is_valid(), form.errors
    assert form.cleaned_data["whatsapp"] == "+393471234567"
    with translation.override("it"):
        refused = PayoutForm({**data, "whatsapp": "12"}, phone_region="IT")
        assert not refused.is_valid()
        assert "non è un numero WhatsApp valido per Italia" in refused.errors["whatsapp"][0]


def test_a_tiktok_claim_id_names_no_open_id_and_older_claims_are_still_found(campaign_a):
    """The event id is a keyed fingerprint (it lands in append-only ledger keys, which erasure
    cannot rewrite); a claim stored under the open_id before is found again, not claimed twice."""
    first = claim_tiktok_login_submit(
        campaign=campaign_a, social_uid="open-xyz", details=PayoutDetails("A", "a@example.com", "", GOOD_IBAN), ip=""
    )
    assert "open-xyz" not in first.reward.event.external_id
    assert "open-xyz" not in str(Hold.objects.get(pk=first.reward.hold_id).idempotency_key)
    TriggerEvent.objects.filter(pk=first.reward.event_id).update(
        external_id=f"claim:{campaign_a.pk}:tiktok_login:open-xyz"  # as claims were stored before
    )
    again = claim_tiktok_login_submit(
        campaign=campaign_a, social_uid="open-xyz", details=PayoutDetails("A", "a@example.com", "", GOOD_IBAN), ip=""
    )
    assert again.already_claimed and again.reward.pk == first.reward.pk and Reward.objects.count() == 1


def test_a_tiktok_login_claim_keeps_the_login_as_evidence_but_never_the_token(campaign_a, fake_tiktok):
    client = Client()
    before = timezone.now().replace(microsecond=0)
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/summer/tiktok/", scope="user.info.basic,video.list")
    token = crypto.decrypt(client.session["claim_tiktok"]["token"])

    done = client.post("/c/alpha/summer/tiktok/", details())

    assert done.status_code == 302
    evidence = TriggerEvent.objects.get().evidence
    assert evidence["login"] == "tiktok"
    assert evidence["scopes"] == ["user.info.basic", "video.list"]
    assert before <= datetime.fromisoformat(evidence["logged_in_at"]) <= timezone.now()
    assert evidence["open_id"] == TriggerEvent.objects.get().social_uid
    assert token and token not in json.dumps(evidence) and not {"token", "access_token"} & set(evidence)
