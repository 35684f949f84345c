"""The payouts admin: lists and filters load, actions call the services with their permissions,
the pain.001 file downloads, routing rules only name configured rails."""

import pytest
from django.urls import reverse

from campaigns.models import Reward
from payouts.admin import RouteRuleForm
from payouts.models import Payout, PayoutBatch, RouteRule
from payouts.services import payout_batch_create, payout_execute, payouts_create_for_payable
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import iban, payable_reward, staff

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(client):
    user = staff("ops", "view_payout", "approve_payout", "view_payoutbatch", "download_payoutbatch", "view_routerule")
    client.force_login(user)
    return user


def test_payout_list_and_filters_load(client, ops, sandbox, debtor, brand, campaign):
    payable_reward(brand, account_iban=iban())
    payouts_create_for_payable()
    url = reverse("admin:payouts_payout_changelist")
    for query in ["", "?status__exact=created", f"?campaign={campaign.pk}", f"?brand={brand.pk}", "?rail=sandbox"]:
        response = client.get(url + query)
        assert response.status_code == 200, query
    assert Payout.objects.get().end_to_end_id in client.get(url).content.decode()
    detail = client.get(reverse("admin:payouts_payout_change", args=[Payout.objects.get().pk]))
    assert detail.status_code == 200


def test_a_large_approval_asks_for_confirmation_then_calls_the_service(
    client, ops, sandbox, debtor, brand, campaign, settings
):
    settings.PAYOUT_APPROVAL_THRESHOLD_MINOR = 500
    payable_reward(brand, account_iban=iban(), name="Giulia Rossi")
    (payout_id,) = payouts_create_for_payable().created
    url = reverse("admin:payouts_payout_changelist")
    # when the action is chosen, a confirmation page says what will happen, and nothing happens
    page = client.post(url, {"action": "approve", "_selected_action": [payout_id]})
    assert page.status_code == 200 and page.templates[0].name == "admin/action_confirmation.html"
    text = page.content.decode()
    assert "€5.00" in text and "Giulia Rossi" in text and "second approval" in text
    assert 'name="confirm" value="yes"' in text and "csrfmiddlewaretoken" in text
    payout = Payout.objects.get(pk=payout_id)
    assert payout.approved_by is None and not payout.events.filter(kind="payout.approved").exists()
    # a GET of the list changes nothing either
    client.get(url, {"action": "approve", "_selected_action": [payout_id], "confirm": "yes"})
    assert Payout.objects.get(pk=payout_id).approved_by is None
    # when confirmed, the service approves it
    response = client.post(url, {"action": "approve", "_selected_action": [payout_id], "confirm": "yes"})
    assert response.status_code == 302
    payout = Payout.objects.get(pk=payout_id)
    assert payout.approved_by == ops and payout.events.filter(kind="payout.approved", actor=ops).exists()


def test_the_confirmation_page_speaks_italian(client, ops, sandbox, debtor, brand, campaign, settings):
    settings.PAYOUT_APPROVAL_THRESHOLD_MINOR = 500
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    page = client.post(
        reverse("admin:payouts_payout_changelist"),
        {"action": "approve", "_selected_action": [payout_id]},
        headers={"accept-language": "it"},
    ).content.decode()
    assert "seconda approvazione" in page and "5,00" in page


def test_the_reward_approver_is_refused_in_the_admin_with_a_message(
    client, ops, sandbox, debtor, brand, campaign, settings
):
    settings.PAYOUT_APPROVAL_THRESHOLD_MINOR = 500
    reward = payable_reward(brand, account_iban=iban())
    Reward.objects.filter(pk=reward.pk).update(decided_by=ops)  # as if ops had approved it in review
    (payout_id,) = payouts_create_for_payable().created
    response = client.post(
        reverse("admin:payouts_payout_changelist"),
        {"action": "approve", "_selected_action": [payout_id], "confirm": "yes"},
        follow=True,
    )
    assert response.status_code == 200
    assert "you approved one of the rewards it pays" in response.content.decode()
    assert Payout.objects.get(pk=payout_id).approved_by is None


def test_batch_is_built_from_the_list_and_downloaded(client, ops, sandbox, debtor, brand, campaign):
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    client.post(reverse("admin:payouts_payout_changelist"), {"action": "create_batch", "_selected_action": [payout_id]})
    batch = PayoutBatch.objects.get()
    assert client.get(reverse("admin:payouts_payoutbatch_changelist")).status_code == 200
    response = client.get(reverse("admin:payouts_payoutbatch_download", args=[batch.pk]))
    assert response.status_code == 200 and response.content.startswith(b"<?xml")
    assert batch.batch_id in response["Content-Disposition"]


def test_a_batch_approval_asks_for_confirmation_first(client, sandbox, debtor, brand, campaign, settings):
    settings.PAYOUT_BATCH_APPROVAL_THRESHOLD_MINOR = 500
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    payable_reward(brand, account_iban=iban())
    payouts_create_for_payable()
    batch = payout_batch_create(actor=staff("olga"))
    piero = staff("piero", "view_payoutbatch", "approve_payoutbatch")
    client.force_login(piero)
    url = reverse("admin:payouts_payoutbatch_changelist")
    page = client.post(url, {"action": "approve", "_selected_action": [batch.pk]})
    assert page.status_code == 200 and page.templates[0].name == "admin/action_confirmation.html"
    assert batch.batch_id in page.content.decode() and "€5.00" in page.content.decode()
    batch.refresh_from_db()
    assert batch.approved_by is None and not batch.events.filter(kind="batch.approved").exists()
    assert client.post(url, {"action": "approve", "_selected_action": [batch.pk], "confirm": "yes"}).status_code == 302
    batch.refresh_from_db()
    assert batch.approved_by == piero


def test_download_needs_the_permission(client, sandbox, debtor, brand, campaign):
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    payable_reward(brand, account_iban=iban())
    payouts_create_for_payable()
    batch = payout_batch_create(actor=staff("olga"))
    client.force_login(staff("viewer", "view_payoutbatch"))
    assert client.get(reverse("admin:payouts_payoutbatch_download", args=[batch.pk])).status_code == 403
    batch.refresh_from_db()
    assert batch.downloaded_at is None


def test_route_rules_must_name_a_configured_rail():
    form = RouteRuleForm(data={"priority": 1, "currency": "EUR", "rail": "carrier_pigeon", "fallback_rail": ""})
    assert not form.is_valid() and "rail" in form.errors
    assert RouteRuleForm(
        data={"priority": 1, "currency": "EUR", "rail": "sandbox", "fallback_rail": "sepa_file"}
    ).is_valid()


def test_status_report_upload_fails_the_rejected_payment(client, ops, sandbox, debtor, brand, campaign):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from payouts.models import PayoutStatus
    from tests.payouts.test_payout_batches import pain002

    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    payable_reward(brand, account_iban=iban())
    (payout_id,) = payouts_create_for_payable().created
    batch = payout_batch_create(actor=staff("olga"))
    payout = Payout.objects.get(pk=payout_id)
    url = reverse("admin:payouts_payoutbatch_status_report", args=[batch.pk])
    assert client.get(url).status_code == 200

    bad = client.post(url, {"file": SimpleUploadedFile("x.xml", b"<Document><oops", content_type="text/xml")})
    assert bad.status_code == 200
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SUBMITTED

    report = pain002(batch, group="RJCT", rejected={payout.end_to_end_id: "AC04"})
    response = client.post(url, {"file": SimpleUploadedFile("sts.xml", report, content_type="text/xml")})
    assert response.status_code == 302
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.FAILED and payout.reason_code == "AC04"


def test_status_report_upload_needs_the_permission(client, sandbox, debtor, brand, campaign):
    RouteRule.objects.create(priority=1, currency="EUR", rail="sepa_file")
    payable_reward(brand, account_iban=iban())
    payouts_create_for_payable()
    batch = payout_batch_create(actor=staff("olga"))
    client.force_login(staff("viewer", "view_payoutbatch"))
    assert client.get(reverse("admin:payouts_payoutbatch_status_report", args=[batch.pk])).status_code == 403


def test_the_payee_check_is_shown_and_filterable(client, ops, sandbox, debtor, brand, campaign, settings):
    account = iban()
    settings.SANDBOX_FAILING_IBANS = {account: "vop_close_match:G. ROSSI"}
    payable_reward(brand, account_iban=account)
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    url = reverse("admin:payouts_payout_changelist")

    listed = client.get(url + "?vop_result=close_match&vop_action=ask").content.decode()

    assert "close match (bank: G. ROSSI) → ask" in listed and "waiting for the person to confirm" in listed
    detail = client.get(reverse("admin:payouts_payout_change", args=[payout_id])).content.decode()
    assert "G. ROSSI" in detail and "field-vop_checked_at" in detail and "field-vop_action" in detail
