"""The whole product in a real browser: a brand signs up, creates, funds (through a bank
statement) and launches a campaign; one person claims through WhatsApp, another through TikTok
(the local fake OAuth server), each typing a wrong IBAN first; the worker pays; both see "paid";
the brand sees it on its dashboard."""

import io
import re
from datetime import date
from decimal import Decimal

import pytest
from django.core import mail

from bench.camt_gen import GenLine, GenStatement, write_camt053
from campaigns.models import Brand
from campaigns.platforms.whatsapp import whatsapp_optin_redeem
from campaigns.services import rewards_mature
from payouts.services import payout_execute, payouts_create_for_payable
from payouts.tasks import payout_settled_followup_task
from recipients.models_claims import WhatsAppOptInCode
from reconciliation.services.statements import statement_import
from tests.payouts.payout_fixtures import DEBTOR_IBAN

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BAD_IBAN = "IT61 X054 2811 1010 0000 0123 456"
GOOD_IBAN_1 = "IT60 X054 2811 1010 0000 0123 456"
GOOD_IBAN_2 = "DE89 3704 0044 0532 0130 00"


def pay_everything() -> int:
    """What the django-q2 worker does every minute: mature, create payouts, execute, finish."""
    rewards_mature()
    created = payouts_create_for_payable(enqueue=False).created
    for payout_id in created:
        payout_execute(payout_id=payout_id)
        payout_settled_followup_task(payout_id)
    return len(created)


def fund_by_statement(*, reference: str, amount: str) -> None:
    """The brand's transfer arrives on our bank statement (camt.053) and is imported."""
    buffer = io.BytesIO()
    write_camt053(
        buffer,
        [
            GenStatement(
                statement_id="STMT-BROWSER-1",
                account_iban=DEBTOR_IBAN,
                currency="EUR",
                opening_balance=Decimal("0"),
                lines=[
                    GenLine(
                        amount=Decimal(amount),
                        credit_debit="CRDT",
                        remittance=f"Top-up {reference}",
                        counterparty_name="Sole Shoes SRL",
                        counterparty_iban="IT60X0542811101000000999999",
                    )
                ],
                booking_date=date.today(),
            )
        ],
    )
    statement_import(source=buffer.getvalue(), filename="camt053.xml", origin="test")


def brand_signs_up(page, shots, live_server) -> str:
    page.goto("/accounts/signup/")
    shots(page, "signup")
    page.fill("input[name=email]", "owner@sole.example")
    page.fill("input[name=password1]", "Sole-shoes-2026!")
    page.fill("input[name=password2]", "Sole-shoes-2026!")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/accounts/confirm-email/"))
    shots(page, "verification-sent")
    link = re.search(r"https?://[^/]+(/accounts/confirm-email/[^\s]+)", mail.outbox[-1].body).group(1)
    page.goto(link)
    shots(page, "confirm-email")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/portal/"))
    page.fill("input[name=name]", "Sole Shoes")
    shots(page, "create-brand")
    page.click("text=Create brand")
    page.wait_for_url(re.compile(r"/portal/sole-shoes/"))
    shots(page, "empty-dashboard")
    return "sole-shoes"


def brand_creates_campaign(page, shots) -> int:
    page.click("nav.tabs >> text=Campaigns")
    page.click("text=New campaign")
    page.fill("input[name=name]", "Summer Joy")
    page.select_option("select[name=mode]", "joyback")
    page.fill("input[name=starts_at]", "2026-01-01T00:00")
    page.select_option("select[name=timezone]", "Europe/Rome")
    shots(page, "campaign-form")
    page.click("text=Create draft")
    page.wait_for_url(re.compile(r"/rules/new/"))
    for trigger, amount in (("tiktok_login", "5.00"), ("whatsapp_optin", "3.00")):
        if trigger != "tiktok_login":
            page.click("text=Add a rule")
        page.select_option("select[name=trigger]", trigger)
        page.fill("input[name=amount]", amount)
        page.click("button[name=preview]")
        assert "receives" in page.inner_text("[data-testid=rule-preview]")
        shots(page, f"rule-preview-{trigger}")
        page.click("button[name=save]")
        page.wait_for_url(re.compile(r"/campaigns/\d+/$"))
    return int(re.search(r"/campaigns/(\d+)/", page.url).group(1))


def person_enters_ibans(page, shots, tag: str, checksum_word: str) -> None:
    page.fill("input[name=name]", "Giulia Rossi")
    if page.locator("input[name=email]").count():
        page.fill("input[name=email]", f"{tag}@person.example")
    page.fill("input[name=iban]", BAD_IBAN)
    page.locator("input[name=iban]").blur()
    page.wait_for_selector("#iban-status.bad")
    assert checksum_word in page.inner_text("#iban-status")  # said live, before submitting
    page.check("input[name=consent]")
    shots(page, f"{tag}-wrong-iban-live")
    page.click("[data-testid=payout-submit]")
    assert checksum_word in page.inner_text("main")
    shots(page, f"{tag}-wrong-iban-refused")
    page.fill("input[name=iban]", GOOD_IBAN_1 if tag == "whatsapp" else GOOD_IBAN_2)
    page.locator("input[name=iban]").blur()
    page.wait_for_selector("#iban-status.ok")
    page.check("input[name=consent]")
    shots(page, f"{tag}-good-iban")
    page.click("[data-testid=payout-submit]")
    page.wait_for_url(re.compile(r"/c/s/"))
    page.wait_for_load_state("load")  # the redirect's page fully loaded: nothing left to abort later
    shots(page, f"{tag}-status-before-payment")


def test_brand_runs_a_campaign_and_people_get_paid(new_page, shots, live_server, sandbox, debtor, fake_tiktok):
    # --- the brand signs up, creates the campaign and its rules ---------------------------------
    brand_page = new_page()
    slug = brand_signs_up(brand_page, shots, live_server)
    campaign_id = brand_creates_campaign(brand_page, shots)

    # --- funds it: the transfer with the reference arrives through the bank statement -----------
    brand_page.click("text=Funding")
    reference = brand_page.inner_text("[data-testid=funding-reference]").strip()
    assert reference == Brand.objects.get(slug=slug).funding_reference
    brand_page.fill("input[name=amount]", "100.00")
    brand_page.click("text=Put the amount in the code")
    shots(brand_page, "funding-instructions-qr")
    fund_by_statement(reference=reference, amount="100.00")
    # --- a brand that signed up itself goes live through the checklist ---------------------------
    brand_page.click("[data-testid=go-live-link]")
    assert brand_page.get_attribute("[data-step=topup]", "data-done") == "yes"  # the transfer arrived
    brand_page.fill("input[name=legal_name]", "Sole Shoes S.r.l.")
    brand_page.fill("input[name=address]", "Via Roma 1, 20100 Milano")
    brand_page.click("[data-testid=save-company]")
    brand_page.check("[data-testid=accept-terms]")
    brand_page.click("[data-testid=save-terms]")
    shots(brand_page, "go-live-checklist")
    brand_page.goto(f"/portal/{slug}/campaigns/{campaign_id}/")
    assert brand_page.inner_text("[data-testid=unallocated]").startswith("€100.00")
    brand_page.fill("input[name=amount]", "100.00")
    brand_page.click("text=Move to this campaign")
    assert brand_page.inner_text("[data-testid=funded]").startswith("€100.00")
    brand_page.click("button:has-text('Launch')")
    assert brand_page.inner_text("[data-testid=campaign-status]") == "Active"
    shots(brand_page, "campaign-launched")
    claim_url = brand_page.inner_text("[data-testid=claim-url]")
    claim_path = claim_url.split(live_server.url, 1)[1]

    # --- a person claims through WhatsApp (in Italian: the campaign runs in Europe/Rome) --------
    person = new_page(locale="it-IT", mobile=True)
    person.goto(claim_path)
    shots(person, "claim-landing-it")
    assert "Continua con TikTok" in person.inner_text("main")
    person.click("[data-testid=whatsapp-start]")
    code = person.inner_text("[data-testid=whatsapp-code]").strip()
    assert person.get_attribute("[data-testid=whatsapp-link]", "href").startswith("https://wa.me/")
    shots(person, "whatsapp-code")
    # the person sends the code from WhatsApp: the signed inbound webhook redeems it
    whatsapp_optin_redeem(code=code, wa_number="393471234567", message_id="wamid.browser.1", name="Giulia")
    assert WhatsAppOptInCode.objects.get(code=code).used_at is not None
    person.wait_for_url(re.compile(r"/c/r/"))  # the waiting page noticed by itself
    person.click("button[name=language][value=en]")  # the language switch
    person.wait_for_selector("text=Where should we send your money?")
    person_enters_ibans(person, shots, "whatsapp", "checksum")

    # --- another person claims through TikTok ---------------------------------------------------
    creator = new_page(locale="it-IT", mobile=True)
    creator.goto(claim_path)
    creator.click("[data-testid=tiktok-login]")
    creator.wait_for_selector("text=Fake TikTok")
    creator.fill("input[name=name]", "Luca Creator")
    shots(creator, "tiktok-fake-login")
    creator.click("#authorize")
    creator.wait_for_url(re.compile(r"/tiktok/$"))
    assert "Luca Creator" in creator.inner_text("main")
    # this one keeps the language of the browser, Italian
    person_enters_ibans(creator, shots, "tiktok", "cifre di controllo")

    # --- the worker pays; both see "paid" -------------------------------------------------------
    assert pay_everything() == 2
    for who, tag in ((person, "whatsapp"), (creator, "tiktok")):
        # The waiting page polls and reloads itself once the state changed: the test waits for
        # that, as the person does. Navigating to it ourselves raced with that reload (a goto
        # "interrupted by another navigation" to the same address, and before that
        # net::ERR_ABORTED, each seen in a full run).
        who.wait_for_selector("[data-testid=claim-status][data-state=paid]", timeout=60_000)
        who.wait_for_load_state("load")
        shots(who, f"{tag}-status-paid")

    # --- the brand sees it on the dashboard -----------------------------------------------------
    brand_page.goto(f"/portal/{slug}/")
    shots(brand_page, "dashboard-after-payouts")
    payouts_table = brand_page.inner_text("[data-testid=payouts-by-status]")
    assert "Settled" in payouts_table and "€8.00" in payouts_table
    triggers = brand_page.inner_text("[data-testid=rewards-by-trigger]")
    assert "TikTok login" in triggers and "WhatsApp opt-in" in triggers
    brand_page.goto(f"/portal/{slug}/payouts/")
    shots(brand_page, "payouts-table")
    brand_page.goto(f"/portal/{slug}/rewards/")
    shots(brand_page, "rewards-table")
