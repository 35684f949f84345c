"""Erasure finishes the job (issue 18): a person who went through every flow — the claim page
with a TikTok login, a WhatsApp opt-in through the signed webhook, the brand's API, a payout and
its return (the bank's camt.053 showing it leave and come back, imported and matched), a second
payout to a new account in a downloaded pain.001 file, the notices of each step sent — is erased,
and then no text, JSON or binary column of any table holds any of their values, nor does any line
the app logged, while the books still verify, the audit chain still proves, the matches point at
the same lines and a statement imported again still finds those bookings known."""

import hashlib
import hmac
import json
import logging
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client

from bench.camt_gen import GenLine, GenStatement, write_camt053
from campaigns.models import Campaign, Reward, TriggerEvent, VopAction
from campaigns.platforms.whatsapp import whatsapp_optin_code_issue
from campaigns.services import event_ingest
from core.audit import audit_verify
from payouts.models import Payout, PayoutEvent, PayoutStatus, RouteRule
from payouts.services import (
    payout_batch_create,
    payout_batch_download,
    payouts_create_for_payable,
)
from recipients.models import Person
from recipients.services import person_erase, person_set_iban
from recipients.services.notices import notices_send_due
from reconciliation.models import Match, StatementLine
from reconciliation.selectors import ledger_verify_report
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import statement_import
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.claim.conftest import tiktok_login
from tests.claim.test_claim_flow import details, pay_everything
from tests.core.test_logging import written_by_the_app
from tests.payouts.payout_fixtures import DEBTOR_IBAN, debtor, iban, sandbox, staff  # noqa: F401 - fixtures
from tests.payouts.test_e2e_local_accounts import US_ACCOUNT, atlantic, books, claim, pay, reward_in  # noqa: F401
from tests.portal.conftest import brand_a, campaign_a, fake_tiktok  # noqa: F401 - fixtures

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=False)]

NAME = "Giulia Rossi"
EMAIL = "giulia.erase@example.com"
NUMBER = "393479876543"
IP = "203.0.113.77"
DEVICE = "device-giulia-7f3a"
IBAN = "IT60X0542811101000000123456"
IBAN2 = iban(4242)
APP_SECRET = "wa-app-secret"


def whatsapp_inbound(code: str) -> bytes:
    body = {
        "object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "contacts": [{"profile": {"name": NAME}, "wa_id": NUMBER}],
            "messages": [{"from": NUMBER, "id": "wamid.erase1", "timestamp": "1749416383", "type": "text",
                          "text": {"body": f"my code is {code}"}}],
        }}]}],
    }  # fmt: skip
    raw = json.dumps(body).encode()
    signature = "sha256=" + hmac.new(APP_SECRET.encode(), raw, hashlib.sha256).hexdigest()
    response = Client().post(
        "/api/webhooks/whatsapp/", raw, content_type="application/json", HTTP_X_HUB_SIGNATURE_256=signature
    )
    assert response.status_code == 200
    return raw


def bank_statement(path, payout: Payout, *, statement_id: str, message_id: str):
    """What her payout's bank account shows: the money leaving to her, then coming back (AC04),
    each line naming her as the counterparty, the return's text too."""
    amount = Decimal(payout.amount_minor) / 100
    lines = [
        GenLine(
            amount=amount,
            credit_debit="DBIT",
            end_to_end_id=payout.end_to_end_id,
            counterparty_name=NAME,
            counterparty_iban=IBAN,
            remittance=f"JoyBack reward for {NAME}",
            entry_reference="BKREF-OUT-1",
        ),
        GenLine(
            amount=amount,
            credit_debit="CRDT",
            end_to_end_id=payout.end_to_end_id,
            counterparty_name=NAME.upper(),
            counterparty_iban=IBAN,
            remittance=f"RETURN AC04 {NAME.upper()} IT60 X054 2811 1010 0000 0123 456",
            return_reason="AC04",
            entry_reference="BKREF-RET-1",
        ),
    ]
    statement = GenStatement(
        statement_id=statement_id, account_iban=DEBTOR_IBAN, currency="EUR", opening_balance=Decimal(0), lines=lines
    )
    write_camt053(path, [statement], message_id=message_id)
    return path


def hits(values: list[str]) -> list[tuple[str, str, str]]:
    """Every (table, column, value) where a text, JSON or binary column of a table holds a value."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.table_name, c.column_name, c.data_type
              FROM information_schema.columns c
              JOIN information_schema.tables t USING (table_schema, table_name)
             WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
               AND c.data_type IN ('text', 'character varying', 'jsonb', 'json', 'bytea')
            """
        )
        columns = cursor.fetchall()
        found = []
        for table, column, kind in columns:
            for value in values:
                if kind == "bytea":
                    test = f"position(convert_to(%s, 'UTF8') in \"{column}\") > 0"
                else:
                    test = f"\"{column}\"::text ILIKE '%%' || %s || '%%'"
                cursor.execute(f'SELECT 1 FROM "{table}" WHERE {test} LIMIT 1', [value])
                if cursor.fetchone():
                    found.append((table, column, value))
    return found


@pytest.fixture
def app_log():
    """Every line the configured handlers write from here on, at the most talkative level an
    operator can set (LOG_LEVEL=DEBUG). Ask for it before ``giulia`` to see her whole flow."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)
    try:
        with written_by_the_app() as out:
            yield out
    finally:
        root.setLevel(level)


@pytest.fixture
def giulia(settings, campaign_a, brand_a, fake_tiktok, sandbox, debtor, django_capture_on_commit_callbacks, tmp_path):  # noqa: F811
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    # the claim page, through a TikTok login
    client = Client()
    tiktok_login(client, fake_base=fake_tiktok, next_url="/c/alpha/summer/tiktok/", name=NAME)
    done = client.post(
        "/c/alpha/summer/tiktok/", details(name=NAME, email=EMAIL, iban=IBAN), REMOTE_ADDR=IP, HTTP_USER_AGENT=DEVICE
    )
    assert done.status_code == 302
    # WhatsApp: the opt-in code sent from her number, through the signed inbound webhook
    optin = funded_campaign(
        brand=brand_a, amount_minor=10_000, rules=[{"trigger": "whatsapp_optin", "fixed_minor": 300}], slug="wa"
    )
    code = whatsapp_optin_code_issue(campaign=optin)
    with django_capture_on_commit_callbacks(execute=True):
        whatsapp_inbound(code.code)
    # the brand's API vouches that the e-mail and the number are one person, with her IP and device
    event_ingest(
        brand=brand_a,
        payload=event(
            source="api",
            email=EMAIL,
            whatsapp=f"+{NUMBER}",
            ip=IP,
            device_fingerprint=DEVICE,
            evidence={"order_email": EMAIL, "client_ip": IP, "name": NAME},
        ),
    )
    # paid (her bank knows her account by her name in capitals: a close match the campaigns pay,
    # so the bank's name for her lands on the payout and the account), and one payout comes back
    Campaign.objects.update(vop_close_match=VopAction.PAY)
    settings.SANDBOX_FAILING_IBANS = {IBAN: f"vop_close_match:{NAME.upper()}"}
    pay_everything()
    payout = Payout.objects.filter(status=PayoutStatus.SETTLED).order_by("id").first()
    path = bank_statement(tmp_path / "camt053.xml", payout, statement_id="STMT-1", message_id="MSG-1")
    statement_import(source=path, filename=path.name, origin="command", match=False)
    assert dict(statement_lines_match().matched) == {"payout_end_to_end": 1, "payout_return": 1}
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.RETURNED and payout.bank_return_line_id is not None
    # she gives another account on her claim link, and the money goes out again in a pain.001 file
    person_set_iban(person=payout.person, iban=IBAN2, source="claim_page")
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    assert payouts_create_for_payable(enqueue=False).created
    batch = payout_batch_create(actor=staff("olga"))
    payout_batch_download(batch=batch, actor=staff("dora", "download_payoutbatch"))
    # she was told about each step (paid, returned, account changed) by e-mail and WhatsApp
    assert notices_send_due().sent >= 6
    open_id = TriggerEvent.objects.exclude(social_uid="").values_list("social_uid", flat=True).first()
    person = Reward.objects.first().person
    return person, [NAME, EMAIL, NUMBER, IP, DEVICE, IBAN, "IT60 X054", IBAN2], open_id


def test_after_erasure_no_column_of_any_table_holds_any_of_her_values(app_log, giulia):
    person, values, open_id = giulia
    assert {(table, column) for table, column, value in hits([NAME])} >= {
        ("recipients_bankaccount", "holder_name"),  # the name she gave with her account
        ("recipients_bankaccount", "payee_check_name"),  # her bank's name for it (Verification of Payee)
        ("payouts_payout", "vop_suggested_name"),
    }
    assert {table for table, _, _ in hits(values)} >= {
        "recipients_person",
        "recipients_identifier",
        "campaigns_triggerevent",
        "payouts_payout",
        "core_inboundwebhook",
        "payouts_payoutbatch",
        "reconciliation_statementline",
    }  # the scan finds what is there
    rows = {
        table: _count(table)
        for table in ("campaigns_reward", "payouts_payout", "reconciliation_posting", "reconciliation_statementline")
    }
    matches = sorted(Match.objects.values_list("line_id", "target_type", "target_id", "status", "entry_id"))
    lines = sorted(StatementLine.objects.values_list("id", "dedupe_key", "amount", "end_to_end_id", "entry_reference"))

    person_erase(person=person)

    left = hits(values)
    assert left == [], left
    assert {table: _count(table) for table in rows} == rows
    assert sorted(Match.objects.values_list("line_id", "target_type", "target_id", "status", "entry_id")) == matches
    assert (
        sorted(StatementLine.objects.values_list("id", "dedupe_key", "amount", "end_to_end_id", "entry_reference"))
        == lines
    )
    returned = StatementLine.objects.get(credit_debit="CRDT")
    assert (returned.counterparty_name, returned.counterparty_iban) == ("(erased)", "IT00ERASED")
    assert returned.remittance == "RETURN AC04 (erased) (erased)" and returned.return_reason_code == "AC04"
    assert Person.objects.get(pk=person.pk).erased_at is not None
    assert ledger_verify_report().ok
    assert audit_verify().ok
    written = app_log.getvalue()
    assert "people merged" in written  # the flow's lines were captured
    assert [v for v in [*values, open_id] if v.lower() in written.lower()] == []  # no log to rewrite


def _count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT count(*) FROM "{table}"')
        return cursor.fetchone()[0]


def test_after_erasure_her_tiktok_open_id_is_nowhere(giulia):
    person, _, open_id = giulia

    person_erase(person=person)

    assert hits([open_id]) == []


def test_a_statement_imported_again_after_erasure_finds_her_bookings_known(giulia, tmp_path):
    """The bank sends the same bookings again (a camt.053 after the camt.054, or a re-download):
    they are recognised by their identity, which never included her, and none of her values is
    stored again."""
    person, values, _ = giulia
    payout = Payout.objects.get(bank_return_line_id__isnull=False)
    person_erase(person=person)
    events = PayoutEvent.objects.count()

    again = bank_statement(tmp_path / "again.xml", payout, statement_id="STMT-1-054", message_id="MSG-2")
    result = statement_import(source=again, filename=again.name, origin="command", match=False)

    assert (result.new_lines, result.duplicate_lines) == (0, 2)
    assert statement_lines_match().lines_seen == 0 and PayoutEvent.objects.count() == events
    assert hits(values) == []


@pytest.mark.parametrize(
    ("currency", "fields", "values"),
    [
        (
            "GBP",
            {"account_type": "sort_code", "sort_code__sortCode": "04-00-75", "sort_code__accountNumber": "10000003"},
            ["10000003", "04-00-75 ****0003"],
        ),
        ("USD", US_ACCOUNT, ["987654321", "1 Main Street", "026009593 ****4321"]),
    ],
)
def test_after_erasure_no_column_holds_a_local_accounts_values(
    currency,
    fields,
    values,
    atlantic,  # noqa: F811
    books,  # noqa: F811
    psp,
    django_capture_on_commit_callbacks,
):
    """A UK (sort code) or US (ABA, with a home address) person claims, is paid through the PSP,
    the payout settles; after erasure none of their account's values is in any column."""
    reward = reward_in(atlantic, currency, "oliver.erase@example.com")
    assert claim(reward, fields, NAME).status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        (payout,) = pay(psp)
    assert payout.rail == "psp_api" and payout.status == PayoutStatus.SUBMITTED
    everything = [NAME, "oliver.erase@example.com", *values]
    assert {table for table, _, _ in hits(everything)} >= {"recipients_bankaccount", "payouts_payout"}

    person_erase(person=reward.person)

    assert hits(everything) == []
    assert ledger_verify_report().ok
    assert audit_verify().ok
