"""Who may change where a person is paid (issue 14): brand Joy Shoes registers Vera with her IBAN;
Rival Shop, and strangers on Joy's own claim page, try every way to send her money elsewhere
or to learn about her. Her account, her next payout's creditor and her visibility must not move,
and each refused link is audited."""

import pytest
from django.core import mail
from django.db import IntegrityError, connection, transaction

from campaigns.models import TriggerEvent
from payouts.links import payout_link_find, payout_link_issue
from recipients.models import BankAccount, Identifier, Person, PersonEvent, PersonEventKind
from recipients.selectors import people_sharing_iban_count, person_current_bank_account
from recipients.whatsapp_cloud import FakeWhatsAppSender
from tests.api.conftest import assert_problem, ingest
from tests.recipients.factories import iban
from web.claim.services import PayoutDetails, claim_details_submit, claim_tiktok_login_submit

pytestmark = pytest.mark.django_db

VERA_EMAIL = "vera@example.com"
VERA_IBAN = iban("NL", 11)
ATTACKER_IBAN = iban("DE", 66)


@pytest.fixture
def vera(api, campaign):
    created = api.post("/api/v1/people/", {"name": "Vera", "email": VERA_EMAIL, "iban": VERA_IBAN}, format="json")
    assert created.status_code == 201, created.content
    return Person.objects.get(pk=created.json()["id"])


def assert_untouched(vera: Person) -> None:
    """Vera is still one root of Joy Shoes, paid into her own IBAN, with nothing linked to her."""
    vera.refresh_from_db()
    assert vera.merged_into_id is None and not Person.objects.filter(merged_into=vera).exists()
    account = person_current_bank_account(person=vera)
    assert account is not None and account.iban() == VERA_IBAN
    assert list(BankAccount.objects.filter(person=vera).values_list("iban_fingerprint", flat=True)) == [
        account.iban_fingerprint
    ]
    assert set(Identifier.objects.filter(person=vera).values_list("kind", flat=True)) == {"email", "iban"}


def assert_invisible_to(client, vera: Person) -> None:
    assert_problem(client.get(f"/api/v1/people/{vera.pk}/"), 404, "not_found")
    assert_problem(client.patch(f"/api/v1/people/{vera.pk}/", {"iban": ATTACKER_IBAN}, format="json"), 404, "not_found")


def test_an_event_of_another_brand_with_her_email_reaches_its_own_person(vera, rival_campaign, rival_api):
    response = rival_api.post(
        "/api/v1/events/",
        {"external_id": "r-1", "campaign": "summer", "type": "tiktok_login", "email": VERA_EMAIL,
         "iban": ATTACKER_IBAN},
        format="json",
    )  # fmt: skip
    assert response.status_code in (200, 201), response.content
    rivals = TriggerEvent.objects.get(brand=rival_campaign.brand).person
    assert rivals.pk != vera.pk and rivals.brand_id == rival_campaign.brand_id
    assert_untouched(vera)
    assert_invisible_to(rival_api, vera)


def test_a_bulk_call_of_another_brand_with_her_email_reaches_its_own_people(vera, rival_campaign, rival_api):
    events = [
        {"external_id": f"rb-{n}", "campaign": "summer", "type": "tiktok_login", "email": VERA_EMAIL,
         "iban": ATTACKER_IBAN}
        for n in range(3)
    ]  # fmt: skip
    response = rival_api.post("/api/v1/events/bulk/", {"events": events}, format="json")
    assert response.status_code == 200, response.content
    people = set(TriggerEvent.objects.filter(brand=rival_campaign.brand).values_list("person_id", flat=True))
    assert len(people) == 1 and vera.pk not in people
    assert_untouched(vera)
    assert_invisible_to(rival_api, vera)


def test_patching_a_rival_person_with_her_email_merges_nobody(vera, rival_campaign, rival_api):
    own = ingest(rival_campaign, email="rival-fan@example.com").event.person
    response = rival_api.patch(f"/api/v1/people/{own.pk}/", {"email": VERA_EMAIL, "iban": ATTACKER_IBAN}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["id"] == own.pk
    assert_untouched(vera)
    assert_invisible_to(rival_api, vera)


def test_registering_her_email_at_another_brand_creates_that_brands_own_person(vera, rival, rival_api):
    response = rival_api.post("/api/v1/people/", {"email": VERA_EMAIL, "iban": ATTACKER_IBAN}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["id"] != vera.pk and body["iban_masked"] != vera.bank_accounts.get().masked
    assert Person.objects.get(pk=body["id"]).brand_id == rival.pk
    assert_untouched(vera)
    assert_invisible_to(rival_api, vera)


def test_a_stranger_on_her_brands_claim_page_typing_her_email_gets_a_person_of_their_own(vera, campaign):
    outcome = claim_tiktok_login_submit(
        campaign=campaign,
        social_uid="stranger-open-id",
        details=PayoutDetails(name="Stranger", email=VERA_EMAIL, whatsapp="", iban=ATTACKER_IBAN),
        ip="198.51.100.7",
    )
    stranger = outcome.reward.person
    assert stranger.pk != vera.pk
    assert person_current_bank_account(person=stranger).iban() == ATTACKER_IBAN
    assert not Identifier.objects.filter(person=stranger, kind="email").exists()
    assert_untouched(vera)
    refused = PersonEvent.objects.get(person=stranger, kind=PersonEventKind.LINK_REFUSED)
    assert refused.detail == {"kinds": ["email"], "held_by": [vera.pk]}


def test_her_own_claim_link_cannot_be_used_to_pull_in_someone_else(vera, campaign):
    """A reward link proves who holds it, not whose e-mail they type next."""
    holder = ingest(campaign, email="holder@example.com").reward
    claim_details_submit(
        link=payout_link_find(token=payout_link_issue(reward_id=holder.pk)),
        details=PayoutDetails(name="Holder", email=VERA_EMAIL, whatsapp="", iban=ATTACKER_IBAN),
        ip="",
    )
    assert person_current_bank_account(person=holder.person).iban() == ATTACKER_IBAN
    assert_untouched(vera)


def test_the_brand_changes_its_own_persons_account_and_she_is_told(
    api, vera, campaign, django_capture_on_commit_callbacks
):
    mail.outbox.clear()
    FakeWhatsAppSender.reset()
    new_iban = iban("IT", 12)
    with django_capture_on_commit_callbacks(execute=True):
        ingest(campaign, email=VERA_EMAIL, iban=new_iban)
    assert person_current_bank_account(person=vera).iban() == new_iban
    change = PersonEvent.objects.filter(person=vera, kind=PersonEventKind.IBAN_SET).latest("id")
    assert change.detail["previous_bank_account"] is not None
    (message,) = [m for m in mail.outbox if m.to == [VERA_EMAIL]]
    assert "payout account changed" in message.subject.lower()
    assert BankAccount.objects.get(pk=change.detail["bank_account"]).masked in message.body


def test_one_human_at_two_brands_counts_once_for_the_iban_signal(vera, rival, rival_api):
    fingerprint = vera.bank_accounts.get().iban_fingerprint
    rival_api.post("/api/v1/people/", {"email": VERA_EMAIL, "iban": VERA_IBAN}, format="json")
    assert people_sharing_iban_count(brand_id=rival.pk, fingerprint=fingerprint) == 1
    BankAccount.objects.filter(person=vera).update(payee_check_result="match")  # her bank confirmed her
    rival_api.post("/api/v1/people/", {"email": "someone-else@example.com", "iban": VERA_IBAN}, format="json")
    # At the rival that second e-mail is the same person (same IBAN): two e-mails now hold it.
    assert people_sharing_iban_count(brand_id=rival.pk, fingerprint=fingerprint) == 2
    # The rival's registrations prove nothing about Joy's IBAN: Joy counts Vera alone.
    assert people_sharing_iban_count(brand_id=vera.brand_id, fingerprint=fingerprint) == 1


@pytest.mark.postgres
@pytest.mark.parametrize(
    "statement",
    [
        # An identifier filed under another brand than its person's.
        "UPDATE recipients_identifier SET brand_id = {rival} WHERE person_id = {vera}",
        # A merge across brands.
        "UPDATE recipients_person SET merged_into_id = {vera}, merged_at = now() WHERE id = {rivals_person}",
        # An event of the rival pointing at Joy's person.
        "UPDATE campaigns_triggerevent SET person_id = {vera} WHERE brand_id = {rival}",
    ],
)
def test_the_database_refuses_to_cross_brands(vera, rival, rival_campaign, statement):
    rivals_person = ingest(rival_campaign, email="rival-fan@example.com").event.person
    sql = statement.format(vera=vera.pk, rival=rival.pk, rivals_person=rivals_person.pk)
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_people_take_strings_only_and_answer_in_utc(api, brand):
    """The people endpoints are as strict as the others (core.api.fields): a number is no e-mail."""
    response = api.post("/api/v1/people/", {"email": 12345, "name": "Num"}, format="json")
    assert_problem(response, 400, "validation_error")
    assert not Person.objects.exists()
    created = api.post("/api/v1/people/", {"email": "utc@example.com"}, format="json").json()
    assert created["created_at"].endswith("Z")
