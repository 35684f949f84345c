"""A paid reward's status page after the person was erased (issue 29): the account is gone, so
the page says where the money went without a name or an IBAN, in English and Italian, instead
of "We sent the money to . "."""

import pytest
from django.test import Client

from payouts.links import STATUS_SALT, token_make
from payouts.models import Payout
from payouts.services import payout_execute, payouts_create_for_payable
from recipients.services.privacy import person_erase
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import iban, payable_reward

pytestmark = pytest.mark.django_db


def _status(reward, language: str) -> str:
    page = Client().get(f"/c/s/{token_make(STATUS_SALT, reward.pk)}/", HTTP_ACCEPT_LANGUAGE=language)
    assert page.status_code == 200 and page.context["status"].state == "paid"
    return page.content.decode()


def test_paid_status_after_erasure_names_no_account(sandbox, debtor, brand, campaign):
    # given a paid reward
    reward = payable_reward(brand, account_iban=iban(), email="giulia@example.com")
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    masked = Payout.objects.get(pk=payout_id).creditor_iban_masked
    assert f"We sent the money to {masked}." in _status(reward, "en")
    # when the person is erased
    person_erase(person=reward.person)
    # then the page says the money went to their bank account, naming nothing
    english, italian = _status(reward, "en"), _status(reward, "it")
    assert "We sent the money to your bank account." in english
    assert "Abbiamo inviato il denaro al tuo conto bancario." in italian
    for page in (english, italian):
        assert "to ." not in page and " a ." not in page and masked not in page
