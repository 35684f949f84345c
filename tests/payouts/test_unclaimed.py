"""Unclaimed money (issue 19: "money owed to a person who never gives an account stays in their
payable account forever"): a campaign's ``claim_window_days``, reminders on the person's channel
with their private link after a third and two thirds of it, then one audited ledger entry
returning the money to the campaign (the brand's funds once it is closed) and a
``reward.expired`` webhook — never for money with a usable account or inside a live payout, and
never both paid and returned when the person gives an account at the same moment."""

import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.db import IntegrityError, OperationalError, connections, transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from campaigns.api_keys import api_key_create
from campaigns.locks import lock_campaign_tally
from campaigns.models import Campaign, Reward, RewardEvent, RewardStatus, WebhookEvent
from campaigns.services import campaign_close, campaign_end, reward_claw_back, reward_expire
from campaigns.webhooks import webhook_endpoint_create, webhook_events_collect
from core.exceptions import InvalidTransition
from payouts.links import STATUS_SALT, token_make
from payouts.models import Payout, PayoutStatus
from payouts.services import payout_execute, payout_mark_returned, payouts_create_for_payable
from payouts.services.unclaimed import rewards_unclaimed_process
from payouts.tasks import payout_settled_followup_task
from recipients.models import Notice, NoticeKind, Person
from recipients.services import person_set_iban
from recipients.services.notices import notices_send_due
from recipients.whatsapp_cloud import FakeWhatsAppSender
from reconciliation.models import JournalEntry
from reconciliation.selectors import account_balance_by_code
from tests.api.conftest import ALL_SCOPES
from tests.payouts.payout_fixtures import *  # noqa: F403 - fixtures
from tests.payouts.payout_fixtures import assert_books_ok, iban, payable_minor, payable_reward
from web.portal.forms import CampaignForm
from web.portal.services import campaign_update

WINDOW = 30


@pytest.fixture
def windowed(campaign):
    Campaign.objects.filter(pk=campaign.pk).update(claim_window_days=WINDOW)
    campaign.refresh_from_db()
    return campaign


def later(days: float):
    return timezone.now() + timedelta(days=days)


def budget_minor(campaign) -> int:
    return account_balance_by_code(code=f"campaign:{campaign.pk}:budget:EUR").posted_minor


def funds_minor(brand) -> int:
    return account_balance_by_code(code=f"brand:{brand.pk}:funds:EUR").posted_minor


def waiting(brand, **fields):
    fields.setdefault("email", "marco@example.com")
    fields.setdefault("whatsapp", "+39 347 765 4321")
    return payable_reward(brand, **fields)


def test_reminders_then_the_money_goes_back_to_the_campaign(sandbox, debtor, brand, windowed, settings):
    settings.CLAIM_BASE_URL = "http://testserver"
    settings.WEBHOOK_ALLOW_HTTP = True
    webhook_endpoint_create(brand=brand, url="http://127.0.0.1:9/hook", event_types=["reward.expired"])
    reward = waiting(brand)
    budget = budget_minor(windowed)
    assert rewards_unclaimed_process(now=later(9)).reminded == 0  # a third of the window not over yet

    # after a third, then two thirds of the window: a reminder each, with the payout form and the date
    assert rewards_unclaimed_process(now=later(10.1)).reminded == 1
    assert rewards_unclaimed_process(now=later(11)).reminded == 0
    assert rewards_unclaimed_process(now=later(20.1)).reminded == 1
    reminders = Notice.objects.filter(reward=reward, kind=NoticeKind.REMINDER).order_by("id")
    assert [n.data["step"] for n in reminders] == [1, 2]
    notices_send_due()
    reminder = next(m for m in mail.outbox if m.subject == "Your money is still waiting")
    assert "€5.00 from Joy Shoes is still waiting" in reminder.body and "http://testserver/c/r/" in reminder.body
    assert [m.template for m in FakeWhatsAppSender.sent].count("reward_reminder") == 2
    assert rewards_unclaimed_process(now=later(29)).expired == 0

    # when the window is over
    result = rewards_unclaimed_process(now=later(30.1))

    # then one entry took the money back from the person to the campaign, audited and announced
    assert result.expired == 1
    reward.refresh_from_db()
    assert reward.status == RewardStatus.EXPIRED and reward.expiry_entry is not None
    assert payable_minor(reward.person_id) == 0 and budget_minor(windowed) == budget + 500
    (entry,) = JournalEntry.objects.filter(idempotency_key=f"reward:{reward.pk}:expire")
    assert entry.pk == reward.expiry_entry_id and entry.kind == "reward_expired"
    audit = RewardEvent.objects.get(reward=reward, kind="reward.expired")
    assert (audit.from_status, audit.to_status, audit.data["returned_to"]) == ("payable", "expired", "campaign_budget")
    assert webhook_events_collect() == 1
    event = WebhookEvent.objects.get(type="reward.expired")
    assert event.data["reward"]["id"] == reward.pk and event.data["returned_to"] == "campaign_budget"
    notices_send_due()
    assert mail.outbox[-1].subject == "Your reward has gone back"
    assert FakeWhatsAppSender.sent[-1].template == "reward_expired"
    assert_books_ok()
    # and running again changes nothing
    assert rewards_unclaimed_process(now=later(31)) == rewards_unclaimed_process(now=later(31))
    assert JournalEntry.objects.filter(kind="reward_expired").count() == 1


def test_once_the_campaign_is_closed_the_money_goes_back_to_the_brand(sandbox, debtor, brand, windowed):
    reward = waiting(brand)
    campaign_end(campaign=windowed)
    campaign_close(campaign=windowed)
    funds = funds_minor(brand)
    for day in (10.1, 20.1, 30.1):
        rewards_unclaimed_process(now=later(day))
    reward.refresh_from_db()
    assert reward.status == RewardStatus.EXPIRED and budget_minor(windowed) == 0
    assert funds_minor(brand) == funds + 500 and payable_minor(reward.person_id) == 0
    assert RewardEvent.objects.get(reward=reward, kind="reward.expired").data["returned_to"] == "brand_funds"
    assert_books_ok()


def test_a_person_who_gives_an_account_in_time_is_paid_not_expired(sandbox, debtor, brand, windowed):
    reward = waiting(brand)
    rewards_unclaimed_process(now=later(10.1))
    rewards_unclaimed_process(now=later(20.1))
    person_set_iban(person=reward.person, iban=iban(), source="claim_page")

    assert rewards_unclaimed_process(now=later(30.1)).expired == 0

    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    reward.refresh_from_db()
    assert Payout.objects.get(pk=payout_id).status == PayoutStatus.SETTLED and reward.status == RewardStatus.PAYABLE
    assert not JournalEntry.objects.filter(kind="reward_expired").exists()
    assert_books_ok()


def test_campaigns_without_a_window_keep_the_money_owed(sandbox, debtor, brand, campaign):
    reward = waiting(brand)
    assert rewards_unclaimed_process(now=later(3650)) == rewards_unclaimed_process(now=later(3650))
    reward.refresh_from_db()
    assert reward.status == RewardStatus.PAYABLE and not Notice.objects.filter(kind="reminder").exists()


def test_a_reward_in_a_live_payout_never_expires(sandbox, debtor, brand, windowed):
    reward = payable_reward(brand, account_iban=iban())
    payouts_create_for_payable()  # a payout owns the reward, not yet sent
    account = Person.objects.get(pk=reward.person_id).bank_accounts.get()
    entries = JournalEntry.objects.count()

    with pytest.raises(InvalidTransition) as refused:
        reward_expire(reward=reward, account_seen=account.pk)

    assert refused.value.code == "reward_in_payout"
    reward.refresh_from_db()
    assert reward.status == RewardStatus.PAYABLE and JournalEntry.objects.count() == entries
    assert not Notice.objects.filter(kind="expired").exists()
    assert rewards_unclaimed_process(now=later(365)).expired == 0  # its account is usable anyway


def test_money_whose_payout_came_back_gets_a_new_window_from_the_return(sandbox, debtor, brand, windowed):
    reward = payable_reward(brand, account_iban=iban(), email="giulia@example.com")
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    payout_settled_followup_task(payout_id)  # paid …
    payout_mark_returned(payout=payout, reason_code="AC04", source="test")  # the account is closed
    Payout.objects.filter(pk=payout_id).update(returned_at=later(40))  # it came back 40 days from now

    assert rewards_unclaimed_process(now=later(45)).reminded == 0  # the new period is 5 days old
    assert rewards_unclaimed_process(now=later(50.1)).reminded == 1
    assert rewards_unclaimed_process(now=later(60.1)).reminded == 1
    assert rewards_unclaimed_process(now=later(70.1)).expired == 1

    reward.refresh_from_db()
    assert reward.status == RewardStatus.EXPIRED and reward.payout_ref == payout.end_to_end_id
    assert payable_minor(reward.person_id) == 0
    assert_books_ok()


def test_money_owed_before_the_window_was_set_is_reminded_once_and_given_a_third_of_it(
    sandbox, debtor, brand, windowed
):
    reward = waiting(brand)
    # a year later the brand sets the window: one reminder (the second), then a third of the window
    assert rewards_unclaimed_process(now=later(365)).reminded == 1
    (reminder,) = Notice.objects.filter(reward=reward, kind=NoticeKind.REMINDER)
    assert reminder.data["step"] == 2
    assert rewards_unclaimed_process(now=later(374)).expired == 0
    assert rewards_unclaimed_process(now=later(375.1)).expired == 1


def test_the_reminder_and_the_expiry_notice_are_in_the_persons_language(sandbox, debtor, brand, windowed):
    reward = waiting(brand)
    Person.objects.filter(pk=reward.person_id).update(preferred_language="it")
    for day in (10.1, 20.1, 30.1):
        rewards_unclaimed_process(now=later(day))
    notices_send_due()
    subjects = [m.subject for m in mail.outbox]
    assert subjects.count("I tuoi soldi ti aspettano ancora") == 2 and "Il tuo premio è stato restituito" in subjects
    assert {m.language for m in FakeWhatsAppSender.sent} == {"it"}


def test_the_account_given_first_wins_over_an_expiry_at_the_same_moment_sequentially(sandbox, debtor, brand, windowed):
    """The expiry decided "no account" (account_seen=None), then the person gave one before it
    took the lock: it must not expire."""
    reward = waiting(brand)
    person_set_iban(person=reward.person, iban=iban(), source="claim_page")
    with pytest.raises(InvalidTransition) as refused:
        reward_expire(reward=reward, account_seen=None)
    assert refused.value.code == "account_given"
    assert Payout.objects.count() == 0 and payouts_create_for_payable().created


def test_an_expiry_first_means_no_payout_afterwards(sandbox, debtor, brand, windowed):
    reward = waiting(brand)
    reward_expire(reward=reward, account_seen=None)
    person_set_iban(person=reward.person, iban=iban(), source="claim_page")
    assert payouts_create_for_payable().created == []
    assert payable_minor(reward.person_id) == 0
    assert_books_ok()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_account_given_while_the_expiry_runs_is_paid_and_nothing_goes_back(sandbox, debtor, brand, windowed):
    # given money owed, and the sweep that found no account
    reward = waiting(brand)
    given, release = threading.Event(), threading.Event()
    outcome = {}

    def give_account():
        try:
            with transaction.atomic():
                person_set_iban(person=reward.person, iban=iban(), source="claim_page")  # holds the person's lock
                given.set()
                release.wait(10)
        finally:
            connections.close_all()

    def expire():
        try:
            given.wait(10)
            reward_expire(reward=reward, account_seen=None)
            outcome["expired"] = True
        except InvalidTransition as exc:
            outcome["refused"] = exc.code
        finally:
            connections.close_all()

    giver, expirer = threading.Thread(target=give_account), threading.Thread(target=expire)
    giver.start()
    expirer.start()
    given.wait(10)
    expirer.join(1.0)
    assert expirer.is_alive()  # the expiry waits for the person's lock
    release.set()
    giver.join(10)
    expirer.join(10)

    # then the account came first: nothing went back, and the person is paid
    assert outcome == {"refused": "account_given"}
    reward.refresh_from_db()
    assert reward.status == RewardStatus.PAYABLE and not JournalEntry.objects.filter(kind="reward_expired").exists()
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    assert Payout.objects.get(pk=payout_id).status == PayoutStatus.SETTLED
    assert_books_ok()


def test_the_window_is_checked_by_the_api_the_portal_form_and_the_database(brand, campaign):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(brand=brand, name='shop', scopes=ALL_SCOPES).token}")
    body = {"name": "Lapse", "slug": "lapse", "mode": "joyback", "starts_at": "2026-06-01T00:00:00Z"}
    refused = api.post("/api/v1/campaigns/", {**body, "claim_window_days": 2}, format="json")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "claim_window_days"
    assert not Campaign.objects.filter(slug="lapse").exists()
    created = api.post("/api/v1/campaigns/", {**body, "claim_window_days": 45}, format="json")
    assert created.status_code == 201 and created.json()["claim_window_days"] == 45
    fields = {"name": "x", "mode": "joyback", "currency": "EUR", "starts_at": "2026-06-01T10:00",
              "timezone": "Europe/Rome", "payout_mode": "instant"}  # fmt: skip
    form = CampaignForm(data={**fields, "claim_window_days": 4000})
    assert not form.is_valid() and "claim_window_days" in form.errors
    campaign_update(campaign=campaign, actor=None, claim_window_days=60)  # a live campaign may change it
    assert Campaign.objects.get(pk=campaign.pk).claim_window_days == 60
    with pytest.raises(IntegrityError), transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk).update(claim_window_days=2)


def test_the_status_page_says_the_money_went_back(sandbox, debtor, brand, windowed):
    reward = waiting(brand)
    reward_expire(reward=reward, account_seen=None)
    page = Client().get(f"/c/s/{token_make(STATUS_SALT, reward.pk)}/")
    assert page.context["status"].state == "expired"
    assert "went back to Joy Shoes" in page.content.decode()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_claw_back_waits_for_the_tally_an_expiry_holds_instead_of_taking_the_reward_first(
    sandbox, debtor, brand, windowed
):
    # reward_expire takes the tally (with the budget account) and then the reward; a claw-back
    # that took the reward first and the budget account later would close a cycle with it.
    reward = waiting(brand)
    held, release = threading.Event(), threading.Event()
    seen = {}

    def expiry_first_step():
        try:
            with transaction.atomic():
                lock_campaign_tally(campaign_id=reward.campaign_id)
                held.set()
                release.wait(10)
                try:  # what reward_expire asks for next: the reward row
                    Reward.objects.select_for_update(nowait=True).get(pk=reward.pk)
                    seen["reward_free"] = True
                except OperationalError:
                    seen["reward_free"] = False
        finally:
            connections.close_all()

    def claw_back():
        try:
            held.wait(10)
            reward_claw_back(reward=Reward.objects.get(pk=reward.pk), reason="fraud")
        finally:
            connections.close_all()

    expirer, clawer = threading.Thread(target=expiry_first_step), threading.Thread(target=claw_back)
    expirer.start()
    clawer.start()
    held.wait(10)
    clawer.join(1.0)
    assert clawer.is_alive()  # it waits for the tally
    release.set()
    expirer.join(10)
    clawer.join(10)

    assert seen == {"reward_free": True}
    reward.refresh_from_db()
    assert reward.status == RewardStatus.CLAWED_BACK
    assert_books_ok()
