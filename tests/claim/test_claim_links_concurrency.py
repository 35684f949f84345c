"""Links and codes under real concurrency on PostgreSQL: a link posted twice at once is spent
once, and parallel guesses at an account-change code share one allowance."""

import threading

import pytest
from django.db import connection

from campaigns.services import event_ingest
from core.exceptions import InvalidInput, InvalidTransition
from payouts.links import payout_link_find, payout_link_issue
from recipients.models import BankAccount
from recipients.models_claims import AccountChange, AccountChangeStatus, ClaimLink
from recipients.selectors import person_current_bank_account
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from web.claim.services import PayoutDetails, _code_hash, claim_account_change_confirm, claim_details_submit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 8
GOOD_IBAN = "IT60X0542811101000000123456"
STRANGER_IBAN = "DE89370400440532013000"


def race(work) -> list:
    """Start every thread at once and collect what each returned or raised."""
    barrier = threading.Barrier(THREADS)
    outcomes: list = [None] * THREADS

    def target(i: int) -> None:
        try:
            barrier.wait()
            outcomes[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


@pytest.fixture
def link_of_a_new_reward(brand_a):
    funded_campaign(
        brand=brand_a,
        amount_minor=10_000,
        slug="shop",
        mode="cashback",
        rules=[{"trigger": "purchase", "fixed_minor": 1000, "verification": "partner_attested"}],
    )

    def make():
        payload = event(
            campaign="shop", type="purchase", source="api", email="anna@example.com", purchase_amount_minor=1
        )
        reward = event_ingest(brand=brand_a, payload=payload).reward
        return payout_link_find(token=payout_link_issue(reward_id=reward.pk))

    return make


def test_a_link_posted_by_many_at_once_gives_one_account(link_of_a_new_reward):
    link = link_of_a_new_reward()

    # Each thread its own row object (threads share no model instances), as each request has.
    outcomes = race(
        lambda i: claim_details_submit(
            link=ClaimLink.objects.select_related("reward__person").get(pk=link.pk),
            details=PayoutDetails(f"P{i}", "", "", GOOD_IBAN),
            ip="",
        )
    )

    refused = [o for o in outcomes if isinstance(o, InvalidTransition)]
    assert len(refused) == THREADS - 1 and refused[0].code == "claim_link_spent"
    assert BankAccount.objects.filter(person=link.reward.person).count() == 1


def test_parallel_guesses_at_a_code_share_one_allowance(link_of_a_new_reward, settings):
    first = link_of_a_new_reward()
    claim_details_submit(link=first, details=PayoutDetails("Anna", "", "", GOOD_IBAN), ip="")
    outcome = claim_details_submit(
        link=link_of_a_new_reward(), details=PayoutDetails("Stranger", "", "", STRANGER_IBAN), ip=""
    )
    change = outcome.change
    AccountChange.objects.filter(pk=change.pk).update(code_hash=_code_hash(change.link_id, "111111"))

    outcomes = race(lambda i: claim_account_change_confirm(change_id=change.pk, code="222222", ip=""))

    wrong = [o for o in outcomes if isinstance(o, InvalidInput)]
    closed = [o for o in outcomes if isinstance(o, InvalidTransition)]
    assert len(wrong) == settings.ACCOUNT_CHANGE_CODE_ATTEMPTS and len(closed) == THREADS - len(wrong)
    change.refresh_from_db()
    assert change.status == AccountChangeStatus.LOCKED and change.attempts == settings.ACCOUNT_CHANGE_CODE_ATTEMPTS
    assert person_current_bank_account(person=first.reward.person).iban() == GOOD_IBAN
