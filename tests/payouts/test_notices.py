"""What people are told (issue 19: "notifications carry no link to act on and are English
only"): every notice carries the person's private link and is written in their language, by
e-mail and as a WhatsApp template sent through the Cloud API (the local fake, over HTTP)."""

import re

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone, translation

from bench.camt_gen import GenLine
from payouts.models import Payout, RouteRule
from payouts.notices import WORDINGS, notice_render
from payouts.services import (
    payout_batch_create,
    payout_execute,
    payout_mark_returned,
    payouts_create_for_payable,
)
from recipients import crypto
from recipients.models import Identifier, IdentifierKind, Notice, NoticeKind, Person
from recipients.services import IdentityInput, person_resolve, person_set_iban
from recipients.services.notices import notices_send_due
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import statement_import
from tests.fakes.whatsapp_server import FakeWhatsAppCloud
from tests.payouts.payout_fixtures import *  # noqa: F403 - fixtures
from tests.payouts.payout_fixtures import iban, payable_reward, staff
from tests.payouts.test_e2e_reconciliation import camt, eur

BASE = "https://pay.joyback.example"


@pytest.fixture
def cloud(settings):
    """WhatsApp goes through the Cloud API sender to the local fake; links use the public base."""
    fake = FakeWhatsAppCloud().start()
    settings.PAYOUT_WHATSAPP_SENDER = "recipients.whatsapp_cloud.CloudApiSender"
    settings.WHATSAPP_API_BASE_URL = fake.base_url
    settings.WHATSAPP_API_VERSION = fake.version
    settings.WHATSAPP_PHONE_NUMBER_ID = fake.phone_number_id
    settings.WHATSAPP_ACCESS_TOKEN = fake.token
    settings.CLAIM_BASE_URL = BASE
    yield fake
    fake.stop()


def paid(brand, *, language: str = "") -> Payout:
    reward = payable_reward(brand, account_iban=iban(), email="giulia@example.com", whatsapp="+39 347 123 4567")
    if language:
        Person.objects.filter(pk=reward.person_id).update(preferred_language=language)
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    notices_send_due()
    return Payout.objects.get(pk=payout_id)


def opened(suffix: str):
    """The page a WhatsApp button opens: ``<CLAIM_BASE_URL>/c/{{1}}`` with this suffix."""
    return Client().get(f"/c/{suffix}")


def test_the_paid_notice_links_to_the_rewards_status_page_by_email_and_whatsapp(
    sandbox, debtor, brand, campaign, cloud
):
    payout = paid(brand)
    reward_id = payout.items.get().reward_id

    (message,) = cloud.messages
    template = message["template"]
    assert (message["to"], template["name"], template["language"]["code"]) == ("393471234567", "payout_paid", "en")
    body, button = template["components"]
    assert [p["text"] for p in body["parameters"]] == ["€5.00", payout.creditor_iban_masked]
    page = opened(button["parameters"][0]["text"])
    assert page.status_code == 200 and page.context["status"].reward.pk == reward_id
    assert page.context["status"].state == "paid"
    (email,) = mail.outbox
    assert email.subject == "Your money is on its way" and "€5.00" in email.body
    link = re.search(rf"{re.escape(BASE)}(/c/s/\S+/)", email.body).group(1)
    assert Client().get(link).context["status"].reward.pk == reward_id


def test_an_italian_person_is_told_in_italian(sandbox, debtor, brand, campaign, cloud):
    paid(brand, language="it")

    (message,) = cloud.messages
    template = message["template"]
    assert template["language"]["code"] == "it"
    assert template["components"][0]["parameters"][0]["text"] == "5,00\xa0€"
    (email,) = mail.outbox
    assert email.subject == "I tuoi soldi stanno arrivando"
    assert "Abbiamo versato 5,00\xa0€ sul tuo conto" in email.body and "Segui il tuo pagamento:" in email.body


def test_a_returned_payout_asks_for_a_new_iban_with_the_payout_form(sandbox, debtor, brand, campaign, cloud):
    payout = paid(brand)
    payout_mark_returned(payout=payout, reason_code="AC04", source="test")
    notices_send_due()

    returned = next(m for m in cloud.messages if m["template"]["name"] == "payout_returned")
    body, button = returned["template"]["components"]
    assert [p["text"] for p in body["parameters"]] == ["€5.00", "the account number is wrong, closed or blocked."]
    suffix = button["parameters"][0]["text"]
    assert suffix.startswith("r/") and opened(suffix).status_code == 200
    assert mail.outbox[1].subject == "Your payout came back" and f"{BASE}/c/r/" in mail.outbox[1].body


def test_an_account_change_is_told_with_a_link_or_without_one_when_there_is_no_reward_yet(
    sandbox, debtor, brand, campaign, cloud
):
    payout = paid(brand)
    person_set_iban(person=payout.person, iban=iban(), source="api")
    registered = person_resolve(
        brand_id=brand.pk, identity=IdentityInput(whatsapp="+39 347 999 0000", iban=iban()), source="api"
    )
    person_set_iban(person=registered, iban=iban(), source="api")
    notices_send_due()

    changed = [m for m in cloud.messages if m["template"]["name"].startswith("account_changed")]
    assert [(m["to"], m["template"]["name"]) for m in changed] == [
        ("393471234567", "account_changed"),
        ("393479990000", "account_changed_no_link"),
    ]
    assert opened(changed[0]["template"]["components"][1]["parameters"][0]["text"]).status_code == 200
    assert [c["type"] for c in changed[1]["template"]["components"]] == ["body"]


def test_every_kind_is_worded_in_english_and_italian_with_its_link(sandbox, debtor, brand, campaign):
    reward = payable_reward(brand)
    person = Person.objects.get(pk=reward.person_id)
    data = {
        NoticeKind.FAILED: {"reason_code": "AC01"},
        NoticeKind.RETURNED: {"reason_code": "MS03"},
        NoticeKind.ACCOUNT_CHANGED: {"bank_account": None},
        NoticeKind.IBAN_NEEDED: {"amount_minor": 1250, "currency": "EUR"},
        NoticeKind.REMINDER: {"deadline": timezone.now().isoformat()},
        NoticeKind.ACCOUNT_CHANGE_CODE: {"code": crypto.encrypt("493817"), "minutes": 30},
        NoticeKind.ACTION_UNDONE: {"undone": "content_removed"},
    }
    account = payable_reward(brand, account_iban=iban()).person.bank_accounts.get()
    data[NoticeKind.ACCOUNT_CHANGED]["bank_account"] = account.pk
    (payout_id,) = payouts_create_for_payable().created
    # Every kind is worded here but the consent confirmation, which recipients words itself
    # (tests/claim/test_marketing_double_optin.py, in both languages).
    assert set(WORDINGS) == set(NoticeKind.values) - {NoticeKind.CONSENT_CONFIRM}
    for kind in WORDINGS:
        notice = Notice(
            kind=kind,
            person=person,
            reward=reward,
            payout_id=payout_id if kind in ("paid", "failed", "returned", "payee_check") else None,
            data=data.get(kind, {}),
        )
        texts = {}
        for language in ("en", "it"):
            with translation.override(language):
                texts[language] = notice_render(notice, person)
        english, italian = texts["en"], texts["it"]
        assert english.template == WORDINGS[kind].template, kind
        if WORDINGS[kind].link:
            assert english.button_suffix and "/c/" in italian.body, kind
        else:  # the code to type, and no link to follow
            assert "493817" in italian.body and not english.button_suffix and "/c/" not in italian.body, kind
        assert "%(" not in english.body + italian.body, kind
        assert english.subject != italian.subject and english.body.split("\n")[0] != italian.body.split("\n")[0], kind
        assert len(english.parameters) == len(WORDINGS[kind].parameters), kind


def test_a_statement_settling_file_payouts_in_bulk_records_one_paid_notice_each(
    tmp_path, sandbox, debtor, brand, campaign
):
    # given two payouts sent in a pain.001 file (in transit, nobody told yet)
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    people = [payable_reward(brand, account_iban=iban()).person_id for _ in range(2)]
    payouts_create_for_payable()
    filed = list(payout_batch_create(actor=staff("olga")).payouts.order_by("id"))
    assert not Notice.objects.filter(kind="paid").exists()
    # when the bank statement shows each debit (the matcher's bulk settlement)
    lines = [GenLine(amount=eur(p.amount_minor), credit_debit="DBIT", end_to_end_id=p.end_to_end_id) for p in filed]
    path, _ = camt(tmp_path, lines)
    statement_import(source=path, filename=path.name, origin="command", match=False)
    assert dict(statement_lines_match().matched) == {"payout_end_to_end": 2}
    # then each person has one paid notice linking to their reward, recorded with the settlement
    paid = Notice.objects.filter(kind="paid").order_by("payout_id")
    assert [(n.payout_id, n.person_id) for n in paid] == [(p.pk, p.person_id) for p in filed]
    assert sorted(p.person_id for p in filed) == sorted(people)
    assert all(n.reward_id == Payout.objects.get(pk=n.payout_id).items.get().reward_id for n in paid)
    assert notices_send_due().sent == 2 and len(mail.outbox) == 2


def test_an_account_change_is_told_to_the_contact_the_person_had_before_it(sandbox, debtor, brand, campaign, cloud):
    payout = paid(brand)
    mail.outbox.clear()
    # whoever changes the account adds an address of their own in the same breath
    Identifier.objects.create(
        person_id=payout.person_id, brand=brand, kind=IdentifierKind.EMAIL, value="mallory@example.com"
    )
    person_set_iban(person=payout.person, iban=iban(), source="claim_page")

    notices_send_due()

    (alert,) = [m for m in mail.outbox if "mallory@example.com" in m.to or "giulia@example.com" in m.to]
    assert alert.to == ["giulia@example.com"]
