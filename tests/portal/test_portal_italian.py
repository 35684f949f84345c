"""The portal in Italian (issue 16, "the first hour of a new user"): a brand owner whose language
is Italian — the portal's language switch sets the django_language cookie — reads every page a
brand owner opens without an English word: headings, table headers, buttons, form labels and
help texts, option labels, statuses, empty states, chart titles, the campaign history, the rule
preview and the messages after an action."""

import re
from html.parser import HTMLParser

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from campaigns.services import event_ingest
from payouts.models import Payout, PayoutItem, PayoutStatus
from tests.campaigns.conftest import event
from web.portal.services import invitation_create

pytestmark = pytest.mark.django_db

# Words an Italian page never needs; a hit means a string was left untranslated. Data on the
# pages (the brand "Alpha Shoes", campaign "Summer", e-mail addresses, event type names) has none.
ENGLISH_WORDS = re.compile(
    r"\b(the|and|your|you|with|from|this|that|of|to|is|are|yet|has|been|what|when|who|per person"
    r"|none|all|new|add|create|edit|save|cancel|back|page|status|amount|rewards?|payouts?|campaigns?"
    r"|funds?|spent|available|held|funded|filter|export|name|role|team members?|owner|admin|analyst"
    r"|draft|active|paused|ended|closed|settled|delivered|revoked|disabled|pending)\b",
    re.IGNORECASE,
)


class _Text(HTMLParser):
    """The text a person sees: tag contents without scripts and styles (an SVG's <title> is
    read out by screen readers and shown on hover, so it counts)."""

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.parts.append(data.strip())


def visible_text(response) -> str:
    assert response.status_code == 200, response.status_code
    parser = _Text()
    parser.feed(response.content.decode())
    return " · ".join(parser.parts)


def assert_italian(response, *, english: list[str], italian: list[str]) -> None:
    assert '<html lang="it"' in response.content.decode()
    text = visible_text(response)
    for phrase in english:
        assert phrase not in text, f"English {phrase!r} in: {text}"
    for phrase in italian:
        assert phrase in text, f"Italian {phrase!r} missing from: {text}"
    # The brand's and people's own data are not ours to translate: drop it before looking.
    generic = re.sub(r"Alpha Shoes|Summer|JoyBack Payouts B\.V\.|\S+@\S+|\b[a-z]+\.[a-z_]+\b|Europe/\w+", "", text)
    left = sorted({m.group(0) for m in ENGLISH_WORDS.finditer(generic)})
    assert not left, f"English words {left} in: {text}"


@pytest.fixture
def italian(owner_a):
    client = Client()
    client.force_login(owner_a)
    client.cookies["django_language"] = "it"
    return client


@pytest.fixture
def activity(brand_a, campaign_a):
    """A reward of brand A and a payout carrying it (the read side needs only the rows)."""
    event_ingest(brand=brand_a, payload=event(email="fan@example.com"))
    reward = campaign_a.rewards.get()
    now = timezone.now()
    payout = Payout.objects.create(
        person=reward.person, amount_minor=reward.amount_minor, currency="EUR", rail="sandbox",
        end_to_end_id=f"E2E{reward.pk:010d}", creditor_name="Fan", creditor_country="NL",
        debtor_account_code="platform:bank:NL91ABNA0417164300:EUR", status=PayoutStatus.CREATED,
        created_at=now, updated_at=now,
    )  # fmt: skip
    PayoutItem.objects.create(payout=payout, reward=reward, amount_minor=reward.amount_minor)
    return reward


def test_the_language_switch_turns_the_portal_italian(owner_a):
    """Given a brand owner on an English page, when they press "Italiano", the pages read Italian."""
    client = Client()
    client.force_login(owner_a)
    page = client.get("/portal/alpha/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'name="language" value="it"' in page
    client.post("/c/i18n/setlang/", {"language": "it", "next": "/portal/alpha/"})
    assert "Ultimi 30 giorni" in client.get("/portal/alpha/", HTTP_ACCEPT_LANGUAGE="en").content.decode()


def test_home(italian, owner_a, brand_b):
    # an invitation waiting for the owner keeps them on the home page
    invitation_create(
        brand=brand_b, email=owner_a.email, role="analyst", invited_by=owner_a, accept_url_base="http://x/"
    )
    assert_italian(
        italian.get("/portal/?all=1"),
        english=["Your brands", "Create a brand", "Brand name", "invited to join", "Accept the invitation"],
        italian=["I tuoi marchi", "Crea un marchio", "Nome del marchio", "Accetta l'invito", "Analista"],
    )


def test_dashboard(italian, activity):
    assert_italian(
        italian.get("/portal/alpha/"),
        english=["Dashboard", "Last 30 days", "Rewarded actions per day", "Cost per action", "Funded (allocated"],
        italian=["Ultimi 30 giorni", "Azioni premiate al giorno", "Costo per azione", "Creato", "Attiva"],
    )


def test_campaigns_list(italian, campaign_a):
    assert_italian(
        italian.get("/portal/alpha/campaigns/"),
        english=["New campaign", "Cost per action", "Mode", "JoyBack (for a social action)"],
        italian=["Nuova campagna", "Costo per azione", "Modalità", "Attiva", "JoyBack (per un'azione social)"],
    )


def test_campaign_detail_with_history_and_a_message(italian, campaign_a):
    # an action's message is Italian too
    page = italian.post(f"/portal/alpha/campaigns/{campaign_a.pk}/pause/", follow=True)
    assert_italian(
        page,
        english=["Reward rules", "Edit settings", "History", "Claim page", "Launched", "Campaign paused"],
        italian=["Regole di premio", "Storico", "Pagina del premio", "Avviata", "Campagna in pausa", "riceve"],
    )


def test_new_campaign_form_and_its_errors(italian):
    assert_italian(
        italian.get("/portal/alpha/campaigns/new/"),
        english=["New campaign", "Create draft", "Starts at", "Payout mode"],
        italian=["Nuova campagna", "Crea bozza", "Inizio", "Modalità di pagamento", "Istantaneo"],
    )
    refused = italian.post("/portal/alpha/campaigns/new/", {"name": "Winter", "timezone": "Europe/Rome"})
    assert_italian(refused, english=["This field is required"], italian=["Campo obbligatorio"])


def test_new_rule_with_a_preview(italian, campaign_a):
    rule = {
        "trigger": "purchase", "amount_type": "percent", "percent": "10", "min_amount": "1,00",
        "max_amount": "20,00", "hold_days": "14", "approval_policy": "auto", "verification": "partner_attested",
        "person_count_per_campaign": "1", "preview": "1",
    }  # fmt: skip
    page = italian.post(f"/portal/alpha/campaigns/{campaign_a.pk}/rules/new/", rule)
    assert_italian(
        page,
        english=["What a person receives", "Save rule", "Limits", "receives", "Confirmed purchase"],
        italian=["Cosa riceve una persona, e quando", "Salva la regola", "Limiti", "10% dell'acquisto", "14 giorni"],
    )


def test_funding(italian):
    assert_italian(
        italian.get("/portal/alpha/funding/"),
        english=["Add money", "Beneficiary", "Scan with your banking app", "Put the amount in the code"],
        italian=["Aggiungi fondi", "Beneficiario", "Causale", "Inquadra con l'app della tua banca"],
    )


def test_rewards(italian, activity):
    assert_italian(
        italian.get("/portal/alpha/rewards/"),
        english=["Export CSV", "Matures", "TikTok login", "Paid"],
        italian=["Esporta CSV", "Filtra", "Matura il", "Persona", "Accesso con TikTok", "Pagina 1 di 1"],
    )


def test_reward_statuses_read_italian_including_expired(italian, activity):
    # the status filter offers every status, expired too, in Italian (issue 29); a row's status
    # is the same label
    text = visible_text(italian.get("/portal/alpha/rewards/"))
    assert "Expired (unclaimed, money returned)" not in text
    assert "Scaduto (non ritirato, denaro restituito)" in text, text


def test_payouts(italian, activity):
    assert_italian(
        italian.get("/portal/alpha/payouts/"),
        english=["One row per reward", "Settled", "Account", "Created"],
        italian=["Una riga per ogni tuo premio", "Accreditato il", "Conto", "Creato"],
    )


def test_api_keys_and_a_new_key(italian):
    page = italian.post("/portal/alpha/api-keys/", {"name": "Shop", "scopes": ["read"]})
    assert_italian(
        page,
        english=["Copy this key now", "Create a key", "Last used", "Read everything of the brand"],
        italian=["Copia ora questa chiave", "Crea una chiave", "Ultimo uso", "Leggere tutto del marchio", "attiva"],
    )


def test_webhooks_and_a_delivery_page(italian, brand_a):
    page = italian.post("/portal/alpha/webhooks/", {"url": "https://shop.example/hooks"})
    assert_italian(
        page,
        english=["Webhook endpoints", "Add an endpoint", "Signing secret", "every event"],
        italian=["Endpoint webhook", "Aggiungi un endpoint", "Segreto di firma", "Consegne"],
    )
    endpoint = brand_a.webhook_endpoints.get()
    assert_italian(
        italian.get(f"/portal/alpha/webhooks/{endpoint.pk}/"),
        english=["Deliveries to", "Rotate secret", "Nothing sent yet"],
        italian=["Consegne a", "Ruota il segreto", "Non è stato inviato ancora nulla"],
    )


def test_team_and_the_invitation_email(italian, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        page = italian.post("/portal/alpha/team/invite/", {"email": "new@alpha.example", "role": "admin"}, follow=True)
    assert_italian(
        page,
        english=["Invite someone", "Send invitation", "Pending invitations", "Invitation sent"],
        italian=["Invita qualcuno", "Invia l'invito", "Inviti in attesa", "Invito inviato", "Proprietario"],
    )
    (invitation,) = mail.outbox
    assert "Unisciti a Alpha Shoes" in invitation.subject
    assert "ti ha invitato" in invitation.body and "invited you" not in invitation.body
