"""Erasure pseudonymises a person without touching anything that money or history points at;
consent is recorded per acceptance."""

import pytest
from django.contrib.auth import get_user_model

from core.exceptions import InvalidInput, InvalidTransition
from recipients.models import BankAccount, Consent, Identifier, Person, PersonEvent, PersonEventKind
from recipients.selectors import (
    iban_fingerprint,
    iban_holder_ids,
    people_sharing_iban_count,
    person_current_bank_account,
    person_find,
)
from recipients.services import IdentityInput, consent_record, person_erase, person_resolve, person_set_iban
from reconciliation.selectors import account_balance, ledger_verify_report
from reconciliation.services import Leg, account_get_or_create, ledger_entry_post
from tests.recipients.factories import iban, people_brand

pytestmark = pytest.mark.django_db

IBAN_A = iban("NL", 1)


def resolve(**identity) -> Person:
    return person_resolve(brand_id=people_brand().pk, identity=IdentityInput(**identity), source="test")


@pytest.fixture
def ops_user():
    return get_user_model().objects.create_user("ops", is_staff=True)


@pytest.fixture
def anna_paid():
    """Anna (merged from two registrations), with consent and 25.00 EUR owed to her in the books."""
    anna = resolve(name="Anna Rossi", email="anna@example.com", iban=IBAN_A, language="it")
    also_anna = resolve(whatsapp="+393331234567", social_provider="tiktok", social_uid="open-anna")
    resolve(email="anna@example.com", whatsapp="+393331234567")
    consent_record(person=also_anna, terms_version="2025-01", channel="claim_page", ip="203.0.113.7")
    bank = account_get_or_create(code="platform:bank:TEST:EUR", name="bank", kind="asset", currency="EUR")
    payable = account_get_or_create(
        code=f"recipient:{anna.id}:payable:EUR",
        name="payable",
        kind="liability",
        currency="EUR",
        owner_type="recipients.person",
        owner_id=str(anna.id),
    )
    ledger_entry_post(
        idempotency_key="test-anna-reward",
        kind="test",
        legs=[Leg.debit(bank, 2500), Leg.credit(payable, 2500)],
        reference_type="recipients.person",
        reference_id=str(anna.id),
    )
    return anna, also_anna, payable


def test_erasure_wipes_personal_data_of_the_whole_cluster(anna_paid, ops_user):
    anna, also_anna, _ = anna_paid

    erased = person_erase(person=also_anna, actor=ops_user)

    assert erased == anna
    for person in Person.objects.all():
        assert (person.display_name, person.preferred_language) == ("", "")
        assert person.erased_at is not None
        assert str(person) == f"Erased person #{person.id}"
    assert not Identifier.objects.filter(is_active=True).exists()
    assert set(Identifier.objects.exclude(kind="iban").values_list("value", flat=True)) == {""}
    account = BankAccount.objects.get()
    assert (account.ciphertext, account.masked, account.iban()) == ("", "NL (erased)", "")
    assert Consent.objects.get().ip is None
    event = PersonEvent.objects.get(kind=PersonEventKind.ERASED)
    assert (event.person, event.actor, event.source) == (anna, ops_user, "admin")
    assert event.detail["people"] == [anna.id, also_anna.id]


def test_erasure_keeps_rows_that_money_and_history_point_at(anna_paid, ops_user):
    anna, _, payable = anna_paid
    counts = {m: m.objects.count() for m in (Person, Identifier, BankAccount, Consent)}

    person_erase(person=anna, actor=ops_user)

    assert {m: m.objects.count() for m in counts} == counts
    assert account_balance(account_id=payable.id).posted_minor == 2500
    assert ledger_verify_report().ok
    assert PersonEvent.objects.filter(kind=PersonEventKind.MERGED).count() == 2


def test_fingerprints_survive_erasure_for_caps_but_not_for_linking(anna_paid, ops_user):
    anna, also_anna, _ = anna_paid
    fingerprint = iban_fingerprint(IBAN_A)

    person_erase(person=anna, actor=ops_user)
    returning = resolve(email="anna@example.com", iban=IBAN_A)

    assert returning.id not in (anna.id, also_anna.id)
    assert BankAccount.objects.filter(iban_fingerprint=fingerprint).count() == 2
    assert iban_holder_ids(fingerprint=fingerprint) == [anna.id, also_anna.id, returning.id]
    # Erased people are not "other people" sharing the IBAN: coming back is not fraud by itself.
    assert people_sharing_iban_count(brand_id=people_brand().pk, fingerprint=fingerprint) == 1
    assert person_find(brand_id=people_brand().pk, kind="email", value="anna@example.com") == returning


def test_erasure_is_idempotent(anna_paid, ops_user):
    anna, _, _ = anna_paid
    person_erase(person=anna, actor=ops_user)

    person_erase(person=anna, actor=ops_user)

    assert PersonEvent.objects.filter(kind=PersonEventKind.ERASED).count() == 1


def test_an_erased_person_takes_no_new_data(anna_paid, ops_user):
    anna, _, _ = anna_paid
    person_erase(person=anna, actor=ops_user)

    assert person_current_bank_account(person=anna) is None
    with pytest.raises(InvalidTransition) as exc:
        person_set_iban(person=anna, iban=iban("DE", 9), source="test")
    assert exc.value.code == "person_erased"
    with pytest.raises(InvalidTransition):
        consent_record(person=anna, terms_version="2025-02", channel="claim_page")
    assert BankAccount.objects.count() == 1 and Consent.objects.count() == 1


def test_consent_is_recorded_on_the_root_each_time():
    anna = resolve(email="anna@example.com")
    also_anna = resolve(whatsapp="+393331234567")
    resolve(email="anna@example.com", whatsapp="+393331234567")

    first = consent_record(person=also_anna, terms_version=" 2025-01 ", channel="whatsapp", ip="2001:db8::1")
    second = consent_record(person=anna, terms_version="2025-02", channel="claim_page")

    assert (first.person, first.terms_version, first.channel, first.ip) == (anna, "2025-01", "whatsapp", "2001:db8::1")
    assert (second.person, second.ip) == (anna, None)


@pytest.mark.parametrize(
    ("terms_version", "channel", "ip", "code"),
    [
        ("", "claim_page", "", "invalid_consent"),
        ("v1", " ", "", "invalid_consent"),
        ("v1", "api", "1.2.3", "invalid_ip"),
    ],
)
def test_bad_consent_records_nothing(terms_version, channel, ip, code):
    anna = resolve(email="anna@example.com")

    with pytest.raises(InvalidInput) as exc:
        consent_record(person=anna, terms_version=terms_version, channel=channel, ip=ip)

    assert exc.value.code == code
    assert not Consent.objects.exists()
