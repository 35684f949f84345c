"""A link or a code sent to a person is not a key to their money (DESIGN §5): a payout-form link
gives an account for the reward it names, while that is owed, once, for a short time; a person who
already has an account confirms a new one with the code sent to the contact they had longest, and
the money waits a cooling-off; a WhatsApp code hands its payout form once, to the browser that
asked for it. Played as the stranger who holds the link."""

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from campaigns.models import Reward
from campaigns.platforms.whatsapp import whatsapp_optin_redeem
from campaigns.services import event_ingest, rewards_mature
from payouts.links import PAYOUT_SALT, link_make
from payouts.models import Payout
from payouts.services import payouts_create_for_payable
from recipients.models import BankAccount, Identifier, PersonEvent
from recipients.models_claims import AccountChange, AccountChangeStatus, ClaimLink, WhatsAppOptInCode
from recipients.selectors import person_current_bank_account
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.claim.test_claim_flow import GOOD_IBAN, pay_everything
from web.claim.services import ACCOUNT_CHANGES_PER_DAY

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

OWNER_EMAIL = "buyer@example.com"
STRANGER_IBAN = "DE89370400440532013000"
STRANGER = {"name": "Stranger", "email": "stranger@example.com", "iban": STRANGER_IBAN, "consent": "on"}


@pytest.fixture
def shop(brand_a):
    return funded_campaign(
        brand=brand_a,
        amount_minor=10_000,
        slug="shop",
        mode="cashback",
        rules=[{"trigger": "purchase", "fixed_minor": 1000, "verification": "partner_attested"}],
    )


def purchase(brand) -> Reward:
    """A purchase reward of the owner (the brand knows her e-mail), owed and waiting for an account."""
    payload = event(campaign="shop", type="purchase", source="api", email=OWNER_EMAIL, purchase_amount_minor=1)
    return event_ingest(brand=brand, payload=payload).reward


def nothing_written(person, *, accounts: int) -> None:
    assert BankAccount.objects.filter(person=person).count() == accounts
    assert not AccountChange.objects.exists()
    assert not Identifier.objects.filter(value="stranger@example.com").exists()


def owner_with_account(brand, capture) -> Reward:
    reward = purchase(brand)
    with capture(execute=True):
        done = Client().post(
            link_make(PAYOUT_SALT, reward.pk).path, {"name": "Anna", "iban": GOOD_IBAN, "consent": "on"}
        )
    assert done.status_code == 302 and done["Location"].startswith("/c/s/")
    return reward


def test_a_link_forwarded_after_the_money_was_paid_changes_nothing(
    brand_a, shop, sandbox, debtor, django_capture_on_commit_callbacks
):
    reward = purchase(brand_a)
    reminder = link_make(PAYOUT_SALT, reward.pk).path  # a second message carried its own link
    Client().post(link_make(PAYOUT_SALT, reward.pk).path, {"name": "Anna", "iban": GOOD_IBAN, "consent": "on"})
    pay_everything()
    events = PersonEvent.objects.count()

    page = Client().post(reminder, STRANGER)

    assert page.status_code == 410
    assert person_current_bank_account(person=reward.person).iban() == GOOD_IBAN.replace(" ", "")
    nothing_written(reward.person, accounts=1)
    assert PersonEvent.objects.count() == events


def test_a_link_works_for_its_reward_while_owed_and_only_once(brand_a, shop):
    reward = purchase(brand_a)
    link = link_make(PAYOUT_SALT, reward.pk).path

    assert Client().get(link).status_code == 200
    first = Client().post(link, {"name": "Anna", "iban": GOOD_IBAN, "consent": "on"})
    again = Client().post(link, STRANGER)

    assert first.status_code == 302 and again.status_code == 410
    assert person_current_bank_account(person=reward.person).iban() == GOOD_IBAN.replace(" ", "")
    nothing_written(reward.person, accounts=1)
    assert ClaimLink.objects.get().used_at is not None


def test_an_expired_link_is_refused(brand_a, shop, settings):
    reward = purchase(brand_a)
    link = link_make(PAYOUT_SALT, reward.pk)
    made = ClaimLink.objects.get()
    assert made.expires_at - made.created_at == timedelta(days=settings.CLAIM_PAYOUT_LINK_DAYS)
    ClaimLink.objects.update(created_at=timezone.now() - timedelta(days=8), expires_at=timezone.now())

    assert Client().get(link.path).status_code == 410
    assert Client().post(link.path, STRANGER).status_code == 410
    nothing_written(reward.person, accounts=0)


def test_an_expired_link_for_money_still_owed_sends_a_fresh_one_to_the_person_not_the_visitor(
    brand_a, shop, django_capture_on_commit_callbacks
):
    reward = purchase(brand_a)
    link = link_make(PAYOUT_SALT, reward.pk)
    ClaimLink.objects.update(created_at=timezone.now() - timedelta(days=8), expires_at=timezone.now())
    mail.outbox.clear()
    # When anyone opens the dead link (twice), the person's own contact gets one fresh link
    with django_capture_on_commit_callbacks(execute=True):
        first = Client().get(link.path)
        Client().get(link.path)
    assert first.status_code == 410 and b"we have sent a new link" in first.content
    assert len(mail.outbox) == 1 and mail.outbox[0].to == [reward.event.email]
    fresh = re.search(r"/c/r/[\w-]+/", mail.outbox[0].body).group(0)
    assert fresh != link.path and Client().get(fresh).status_code == 200
    nothing_written(reward.person, accounts=0)


def test_a_new_account_waits_for_the_code_sent_to_the_oldest_contact_then_cools_off(
    brand_a, shop, sandbox, debtor, django_capture_on_commit_callbacks
):
    reward = owner_with_account(brand_a, django_capture_on_commit_callbacks)
    pay_everything()
    owed = purchase(brand_a)
    mail.outbox.clear()

    with django_capture_on_commit_callbacks(execute=True):
        pending = Client().post(link_make(PAYOUT_SALT, owed.pk).path, STRANGER)

    # The account stays; the stranger's contact is not added; the code goes to the owner alone.
    assert pending.status_code == 302 and pending["Location"].startswith("/c/r/change/")
    assert person_current_bank_account(person=reward.person).iban() == GOOD_IBAN.replace(" ", "")
    assert not Identifier.objects.filter(value="stranger@example.com").exists()
    assert [m.to for m in mail.outbox] == [[OWNER_EMAIL]]
    code = re.search(r"\b(\d{6})\b", mail.outbox[0].body).group(1)
    assert code not in AccountChange.objects.get().code_hash

    with django_capture_on_commit_callbacks(execute=True):
        done = Client().post(pending["Location"], {"code": code})

    change = AccountChange.objects.get()
    assert done.status_code == 302 and change.status == AccountChangeStatus.CONFIRMED
    assert change.details_ciphertext == ""  # decided: the details live on the account now
    account = person_current_bank_account(person=reward.person)
    assert account.iban() == STRANGER_IBAN and account.usable_from > timezone.now() + timedelta(hours=23)
    # The money owed meanwhile waits the cooling-off, in the database, then goes.
    rewards_mature()
    held = payouts_create_for_payable(enqueue=False)
    assert held.created == [] and held.waiting == 1
    assert not Payout.objects.filter(items__reward=owed).exists()
    BankAccount.objects.filter(pk=account.pk).update(usable_from=timezone.now() - timedelta(seconds=1))
    assert len(payouts_create_for_payable(enqueue=False).created) == 1


def test_wrong_codes_lock_the_change_and_the_account_stays(
    brand_a, shop, sandbox, debtor, settings, django_capture_on_commit_callbacks
):
    reward = owner_with_account(brand_a, django_capture_on_commit_callbacks)
    owed = purchase(brand_a)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        pending = Client().post(link_make(PAYOUT_SALT, owed.pk).path, STRANGER)["Location"]
    code = re.search(r"\b(\d{6})\b", mail.outbox[0].body).group(1)
    wrong = f"{(int(code) + 1) % 10**6:06d}"

    for _ in range(settings.ACCOUNT_CHANGE_CODE_ATTEMPTS):
        Client().post(pending, {"code": wrong})
    late = Client().post(pending, {"code": code})

    change = AccountChange.objects.get()
    assert change.status == AccountChangeStatus.LOCKED and change.attempts == settings.ACCOUNT_CHANGE_CODE_ATTEMPTS
    assert change.details_ciphertext == ""
    assert late.status_code == 200 and b"account-change-closed" in late.content
    assert person_current_bank_account(person=reward.person).iban() == GOOD_IBAN.replace(" ", "")
    assert BankAccount.objects.filter(person=reward.person).count() == 1


def test_a_fresh_link_brings_no_fresh_allowance_of_guesses(
    brand_a, shop, sandbox, debtor, settings, django_capture_on_commit_callbacks
):
    # Given a stranger who spent a change's wrong codes, holding a way to fresh links
    reward = owner_with_account(brand_a, django_capture_on_commit_callbacks)
    owed = purchase(brand_a)
    with django_capture_on_commit_callbacks(execute=True):
        first = Client().post(link_make(PAYOUT_SALT, owed.pk).path, STRANGER)["Location"]
    for _ in range(settings.ACCOUNT_CHANGE_CODE_ATTEMPTS):
        Client().post(first, {"code": "000000"})
    mail.outbox.clear()
    # When a fresh link for the same money posts another account
    with django_capture_on_commit_callbacks(execute=True):
        refused = Client().post(link_make(PAYOUT_SALT, owed.pk).path, STRANGER)
    # Then no change opens, no code is sent, and the account stays
    assert refused.status_code == 200 and b"Too many wrong codes" in refused.content
    assert AccountChange.objects.count() == 1 and not mail.outbox
    assert person_current_bank_account(person=reward.person).iban() == GOOD_IBAN.replace(" ", "")


def test_a_link_holder_cannot_make_a_stream_of_codes(
    brand_a, shop, sandbox, debtor, django_capture_on_commit_callbacks
):
    owner_with_account(brand_a, django_capture_on_commit_callbacks)
    owed = purchase(brand_a)
    mail.outbox.clear()
    # Given as many changes started today as allowed, each sending a code
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(ACCOUNT_CHANGES_PER_DAY):
            Client().post(link_make(PAYOUT_SALT, owed.pk).path, STRANGER)
    sent = len(mail.outbox)
    # When one more link posts another account, no change opens and no code goes out
    with django_capture_on_commit_callbacks(execute=True):
        refused = Client().post(link_make(PAYOUT_SALT, owed.pk).path, STRANGER)
    assert b"Too many account changes" in refused.content
    assert AccountChange.objects.count() == ACCOUNT_CHANGES_PER_DAY and len(mail.outbox) == sent


def test_a_second_change_closes_the_pending_one(brand_a, shop, sandbox, debtor, django_capture_on_commit_callbacks):
    owner_with_account(brand_a, django_capture_on_commit_callbacks)
    owed = purchase(brand_a)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        first = Client().post(link_make(PAYOUT_SALT, owed.pk).path, STRANGER)["Location"]
        Client().post(link_make(PAYOUT_SALT, owed.pk).path, STRANGER)
    first_code = re.search(r"\b(\d{6})\b", mail.outbox[0].body).group(1)
    # The first change's code no longer confirms anything: only the newest change is open
    closed = Client().post(first, {"code": first_code})
    assert b"account-change-closed" in closed.content
    assert AccountChange.objects.filter(status=AccountChangeStatus.CONFIRMED).count() == 0


def test_a_spent_whatsapp_code_changes_nothing_and_the_wait_page_refuses_another_browser(brand_a):
    funded_campaign(
        brand=brand_a, amount_minor=10_000, rules=[{"trigger": "whatsapp_optin", "fixed_minor": 300}], slug="hi"
    )
    person_browser, stranger = Client(), Client()
    wait = person_browser.post("/c/alpha/hi/whatsapp/")["Location"]
    code = WhatsAppOptInCode.objects.get().code
    whatsapp_optin_redeem(code=code, wa_number="393471234567", message_id="wamid.1")

    assert stranger.get(wait).status_code == 404
    assert stranger.get(wait + "?format=json").status_code == 404
    handed = person_browser.get(wait)
    again = person_browser.get(wait)

    assert handed.status_code == 302 and handed["Location"].startswith("/c/r/")
    assert again.status_code == 200 and b"whatsapp-spent" in again.content
    assert person_browser.get(wait + "?format=json").json() == {"state": "spent"}
    assert ClaimLink.objects.count() == 1 and WhatsAppOptInCode.objects.get().spent_at is not None


def test_refused_requests_do_not_count_toward_the_campaigns_limit(brand_a, shop, settings):
    settings.CLAIM_RATE_LIMIT_PER_CAMPAIGN = 2
    mine, theirs = purchase(brand_a), purchase(brand_a)
    mine_link, their_link = link_make(PAYOUT_SALT, mine.pk).path, link_make(PAYOUT_SALT, theirs.pk).path
    noisy = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(5):
        noisy.post(mine_link, {"name": "x", "iban": "IT00 bad", "consent": "on"})  # invalid form
        noisy.get("/c/r/not-a-link/")

    accepted = Client(REMOTE_ADDR="198.51.100.4").post(their_link, {"name": "Bea", "iban": GOOD_IBAN, "consent": "on"})

    assert accepted.status_code == 302 and accepted["Location"].startswith("/c/s/")


def test_pages_that_take_a_secret_are_rate_limited_per_client(brand_a, shop, settings):
    settings.CLAIM_RATE_LIMIT_SECRET_PER_IP = 3
    guesser = Client(REMOTE_ADDR="203.0.113.9")
    answers = [guesser.get(f"/c/r/guess-{n}/").status_code for n in range(4)]
    answers.append(guesser.get("/c/alpha/shop/whatsapp/JBAAAAAA/").status_code)

    assert answers == [404, 404, 404, 429, 429]
    reward = purchase(brand_a)
    assert Client(REMOTE_ADDR="198.51.100.4").get(link_make(PAYOUT_SALT, reward.pk).path).status_code == 200
