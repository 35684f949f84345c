"""A newcomer in a real browser (issue 28): signs up, switches to test mode, makes a test key, sends a
first test event with it, sees it paid on the sandbox, then opens the go-live checklist."""

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from payouts.models import Payout
from tests.browser.test_journey import GOOD_IBAN_1, brand_signs_up, pay_everything

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_newcomer_tries_for_free_then_sees_what_going_live_needs(new_page, shots, live_server, sandbox, debtor):
    cache.clear()  # allauth's one-confirmation-mail-per-address cooldown, if the sign-up journey ran first
    page = new_page()
    slug = brand_signs_up(page, shots, live_server)
    # --- Live/Test switch: test mode opens with its banner and the trial's limits -------------------
    page.click("[data-testid=switch-to-test]")
    shots(page, "test-mode-intro")
    page.click("[data-testid=open-test-mode]")
    page.wait_for_selector("[data-testid=test-mode-banner]")
    assert page.inner_text("[data-testid=test-funds]").startswith("€1,000.00")
    assert "sandbox" in page.inner_text("[data-testid=trial-limits]")
    shots(page, "test-mode-page")
    # --- a test key ------------------------------------------------------------------------------
    page.click("nav.tabs >> text=API keys")
    page.fill("input[name=name]", "Trial backend")
    for scope in ("read", "write", "events"):
        page.check(f"input[name=scopes][value={scope}]")
    page.click("text=Create key")
    token = page.inner_text("[data-testid=new-api-key] .mono").strip()
    assert token.startswith("jbk_test_")
    assert page.is_visible("[data-testid=test-mode-banner]")
    shots(page, "test-key")
    # --- a test campaign, funded with the free test money -------------------------------------------
    page.click("nav.tabs >> text=Campaigns")
    page.click("text=New campaign")
    page.fill("input[name=name]", "Try")
    page.select_option("select[name=mode]", "joyback")
    page.fill("input[name=starts_at]", "2026-01-01T00:00")
    page.click("text=Create draft")
    page.select_option("select[name=trigger]", "tiktok_login")
    page.fill("input[name=amount]", "5.00")
    page.select_option("select[name=verification]", "partner_attested")
    page.click("button[name=save]")
    page.fill("input[name=amount]", "100.00")
    page.click("text=Move to this campaign")
    page.click("button:has-text('Launch')")
    assert page.inner_text("[data-testid=campaign-status]") == "Active"
    shots(page, "test-campaign-launched")
    # --- the first test event, from the integration ---------------------------------------------------
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    sent = api.post(
        "/api/v1/events/",
        {"external_id": "first", "campaign": "try", "type": "tiktok_login", "email": "tess@newshop.example",
         "name": "Tess Tester", "iban": GOOD_IBAN_1.replace(" ", "")},
        format="json",
    )  # fmt: skip
    assert sent.status_code == 201, sent.content
    # --- paid on the sandbox ----------------------------------------------------------------------
    assert pay_everything() == 1
    assert Payout.objects.get().rail == "sandbox"
    page.click("nav.tabs >> text=Payouts")
    assert "Settled" in page.inner_text("main")
    shots(page, "test-payout-settled")
    # --- back to live: the go-live checklist says what is missing ---------------------------------------
    page.click("[data-testid=switch-to-live]")
    assert not page.is_visible("[data-testid=test-mode-banner]")
    page.click("[data-testid=go-live-link]")
    assert [page.get_attribute(f"[data-step={s}]", "data-done") for s in ("company", "terms", "topup")] == [
        "no",
        "no",
        "no",
    ]
    shots(page, "go-live-checklist")
    assert page.url.endswith(f"/portal/{slug}/go-live/")
