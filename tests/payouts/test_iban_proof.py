"""Proof that another brand's holder of an IBAN is paid there (issue 25): a payout into the account
that settled and was not returned, or a Verification of Payee match. Without one, another brand's
holder counts for nothing in this brand's "people sharing an IBAN" signal."""

import pytest

from campaigns.models import Brand
from payouts.models import Payout, PayoutStatus
from payouts.services import payout_execute, payout_mark_returned, payouts_create_for_payable
from recipients.brand_people import person_register
from recipients.models import BankAccount
from recipients.selectors import _people_sharing_iban_counts_orm, people_sharing_iban_counts
from recipients.services import IdentityInput
from tests.campaigns.factories import BrandFactory
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import iban, payable_reward

pytestmark = pytest.mark.django_db


def counts(brand, fingerprint: str) -> int:
    """The count both forms give (they must agree), as ``brand`` may see it."""
    sql = people_sharing_iban_counts(brand_id=brand.pk, fingerprints=[fingerprint])
    assert sql == _people_sharing_iban_counts_orm(brand.pk, {fingerprint})
    return sql[fingerprint]


@pytest.mark.postgres
def test_a_settled_payout_proves_the_holder_and_a_return_takes_the_proof_back(sandbox, debtor, brand, campaign):
    # given Joy paid Vera into her IBAN, and her bank's name check is not on the account
    account_iban = iban()
    reward = payable_reward(brand, account_iban=account_iban, email="vera@example.com")
    fingerprint = BankAccount.objects.get(person=reward.person).iban_fingerprint
    rival = BrandFactory(name="Rival Shop", slug="rival-shop")
    person_register(brand=rival, identity=IdentityInput(email="mule@example.com", iban=account_iban))
    assert counts(rival, fingerprint) == 1  # the rival's own person only: Vera is not proven yet
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    BankAccount.objects.filter(person=reward.person).update(payee_check_result="")

    # then at the rival Vera counts (two e-mails are paid into one IBAN) and at Joy the rival does not
    assert counts(rival, fingerprint) == 2
    assert counts(brand, fingerprint) == 1

    # when the money comes back, the proof goes with it
    payout = reward.person.payouts.get()
    assert payout.status == PayoutStatus.SETTLED
    payout_mark_returned(payout=payout, reason_code="AC04", source="test")
    assert counts(rival, fingerprint) == 1


@pytest.mark.postgres
def test_a_payee_match_proves_the_holder_and_a_later_mismatch_does_not(brand, campaign):
    account_iban = iban()
    vera, _ = person_register(brand=brand, identity=IdentityInput(email="vera@example.com", iban=account_iban))
    rival = BrandFactory(name="Rival Shop", slug="rival-shop")
    person_register(brand=rival, identity=IdentityInput(email="mule@example.com", iban=account_iban))
    fingerprint = BankAccount.objects.get(person=vera).iban_fingerprint

    BankAccount.objects.filter(person=vera).update(payee_check_result="match")
    assert counts(rival, fingerprint) == 2

    BankAccount.objects.filter(person=vera).update(payee_check_result="no_match")
    assert counts(rival, fingerprint) == 1
    assert counts(brand, fingerprint) == 1


@pytest.mark.postgres
def test_a_test_tenants_payout_and_payee_check_prove_nothing_to_other_brands(sandbox, debtor, brand, campaign):
    """The sandbox settles and "matches" whatever a brand types in test mode: its test people
    must not count at another brand (they would push its rewards into review, and let a test
    tenant probe who holds an IBAN there)."""
    account_iban = iban()
    reward = payable_reward(brand, account_iban=account_iban, email="vera@example.com")
    fingerprint = BankAccount.objects.get(person=reward.person).iban_fingerprint
    rival = BrandFactory(name="Rival Shop", slug="rival-shop")
    person_register(brand=rival, identity=IdentityInput(email="mule@example.com", iban=account_iban))
    # the paying brand is a test tenant (of the rival, as good as any live brand here)
    Brand.objects.filter(pk=brand.pk).update(livemode=False, test_of=rival, live_since=None)
    BankAccount.objects.filter(person=reward.person).update(payee_check_result="")

    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)

    payout = Payout.objects.get(pk=payout_id)
    assert (payout.status, payout.rail) == (PayoutStatus.SETTLED, "sandbox")
    assert payout.vop_checked_at is not None  # the payout keeps the sandbox's answer …
    assert BankAccount.objects.get(person=reward.person).payee_check_result == ""  # … the account does not
    assert counts(rival, fingerprint) == 1
