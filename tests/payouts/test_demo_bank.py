"""The demo has something to reconcile (issue 16): the seed funds the brand through a bank
statement, and the dashboard's "Import the demo statement" brings the payouts the demo sent plus
two lines nobody explained — every line stored and matched or parked, the ledger's bank account
equal to the statement."""

import os
import subprocess
import sys

import pytest
from django.core.management import call_command

from campaigns.models import Brand, Campaign
from campaigns.services import EventInput, event_ingest, rewards_mature
from payouts.models import Payout
from payouts.services import payout_execute, payouts_create_for_payable
from payouts.tasks import payout_settled_followup_task
from reconciliation.models import BankStatement, PlatformBankAccount, StatementLine
from reconciliation.selectors import account_balance, ledger_verify_report
from tests.payouts.payout_fixtures import sandbox  # noqa: F401 - fixture
from web.demo_bank import FUNDING_STATEMENT, PLATFORM_IBAN

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings, sandbox):  # noqa: F811 - the fixture above
    settings.DEBUG = True
    settings.DEMO_BANK_ENABLED = True
    call_command("seed_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115
    return Brand.objects.get(slug="sole-shoes")


def test_the_seed_funds_the_brand_through_a_matched_statement(demo):
    (line,) = StatementLine.objects.filter(statement__statement_id=FUNDING_STATEMENT)
    assert line.status == "matched"
    bank = PlatformBankAccount.objects.get(iban=PLATFORM_IBAN)
    assert account_balance(account_id=bank.ledger_account_id).posted_minor == 500_000
    assert ledger_verify_report().ok


def test_the_demo_statement_brings_the_payouts_and_two_lines_nobody_explained(demo, client, django_user_model):
    campaign = Campaign.objects.get(brand=demo, slug="summer-joy")
    for n, iban in ((1, "DE89370400440532013000"), (2, "NL02ABNA0123456789")):
        payload = EventInput(
            external_id=f"demo-bank-{n}",
            campaign=campaign.slug,
            type="tiktok_login",
            source="tiktok",
            social_provider="tiktok",
            social_uid=f"open-{n}",
            email=f"fan{n}@example.com",
            iban=iban,
        )
        event_ingest(brand=demo, payload=payload)
    rewards_mature()
    for payout_id in payouts_create_for_payable(enqueue=False).created:
        payout_execute(payout_id=payout_id)
        payout_settled_followup_task(payout_id)
    assert Payout.objects.filter(status="settled").count() == 2

    client.force_login(django_user_model.objects.get(username="ops"))
    dashboard = client.get("/admin/reconciliation/dashboard/").content.decode()
    assert 'data-testid="demo-statement"' in dashboard
    response = client.post("/admin/demo/statement/")
    assert response.status_code == 302

    statement = BankStatement.objects.exclude(statement_id=FUNDING_STATEMENT).get()
    lines = list(StatementLine.objects.filter(statement=statement))
    assert len(lines) == 4 and not [line for line in lines if line.status == "new"]
    assert sorted(line.status for line in lines) == ["matched", "matched", "unmatched", "unmatched"]
    assert all(p.bank_debit_line_id for p in Payout.objects.all())
    bank = PlatformBankAccount.objects.get(iban=PLATFORM_IBAN)
    closing_minor = int(statement.closing_balance * 100)
    assert account_balance(account_id=bank.ledger_account_id).posted_minor == closing_minor
    assert statement.balance_difference == 0
    assert ledger_verify_report().ok


def test_the_demo_statement_is_off_outside_the_demo(client, admin_user, settings):
    settings.DEMO_BANK_ENABLED = False
    client.force_login(admin_user)
    assert client.post("/admin/demo/statement/").status_code == 404


def test_the_demo_receiver_shows_what_webhooks_delivered(client, settings):
    settings.DEMO_BANK_ENABLED = True
    client.post("/fake/webhooks/", b'{"type": "reward.held"}', content_type="application/json")
    shown = client.get("/fake/webhooks/").json()["received"]
    assert shown[0]["body"] == '{"type": "reward.held"}'
    settings.DEMO_BANK_ENABLED = False
    assert client.get("/fake/webhooks/").status_code == 404


def test_the_demo_settings_let_webhooks_go_to_the_local_receiver():
    """make run's settings accept the receiver the README points at (http, loopback)."""
    script = (
        "import django; django.setup(); from campaigns.webhook_targets import webhook_url_validate; "
        "print(webhook_url_validate('http://127.0.0.1:8000/fake/webhooks/'))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("http://127.0.0.1:8000/fake/webhooks/")
