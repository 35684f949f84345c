"""People in the admin: masked IBANs unless permitted, search by any identifier, permissioned erasure."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from recipients.accounts import account_normalise
from recipients.models import Person
from recipients.services import IdentityInput, person_export, person_resolve
from tests.recipients.factories import iban, people_brand

pytestmark = pytest.mark.django_db

IBAN_A = iban("NL", 1234567)
FORMATTED_A = " ".join(IBAN_A[i : i + 4] for i in range(0, len(IBAN_A), 4))
MASKED_A = f"{IBAN_A[:4]} **** **** {IBAN_A[-4:]}"


def staff_client(client, *codenames: str):
    user = get_user_model().objects.create_user(f"staff-{'-'.join(codenames)}", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="recipients", codename__in=codenames))
    client.force_login(user)
    return client


@pytest.fixture
def anna() -> Person:
    return person_resolve(
        brand_id=people_brand().pk,
        identity=IdentityInput(name="Anna Rossi", email="anna@example.com", whatsapp="+393331234567", iban=IBAN_A),
        source="test",
    )


def change_page(client, person: Person) -> str:
    response = client.get(reverse("admin:recipients_person_change", args=[person.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_staff_without_the_permission_see_the_iban_masked(client, anna):
    page = change_page(staff_client(client, "view_person"), anna)

    assert MASKED_A in page
    assert FORMATTED_A not in page and IBAN_A not in page


def test_staff_with_the_permission_see_the_full_iban(client, anna):
    page = change_page(staff_client(client, "view_person", "view_full_iban"), anna)

    assert FORMATTED_A in page


@pytest.mark.parametrize("term", ["  ANNA@example.com ", "+39 333 123 4567", "333 1234567", IBAN_A.lower(), "Rossi"])
def test_search_finds_the_person_by_any_identifier_in_any_format(client, anna, term):
    other = person_resolve(
        brand_id=people_brand().pk, identity=IdentityInput(name="Bruno", email="bruno@example.com"), source="test"
    )

    response = staff_client(client, "view_person").get(reverse("admin:recipients_person_changelist"), {"q": term})

    assert list(response.context["cl"].result_list) == [anna]
    assert other not in response.context["cl"].result_list


def test_erasure_action_needs_its_permission(client, anna):
    url = reverse("admin:recipients_person_changelist")
    viewer = staff_client(client, "view_person")

    listing = viewer.get(url)
    assert "erase_selected" not in listing.context["cl"].model_admin.get_actions(listing.wsgi_request)
    viewer.post(url, {"action": "erase_selected", "_selected_action": [anna.pk]})
    anna.refresh_from_db()
    assert anna.erased_at is None


def test_erasure_action_erases_with_the_staff_user_as_actor(client, anna):
    url = reverse("admin:recipients_person_changelist")
    eraser = staff_client(client, "view_person", "erase_person")

    # the first POST shows what will happen and erases nothing
    page = eraser.post(url, {"action": "erase_selected", "_selected_action": [anna.pk]})
    assert page.status_code == 200 and page.templates[0].name == "admin/action_confirmation.html"
    assert "Anna Rossi" in page.content.decode() and "cannot be undone" in page.content.decode()
    anna.refresh_from_db()
    assert anna.erased_at is None and anna.display_name == "Anna Rossi"

    response = eraser.post(
        url, {"action": "erase_selected", "_selected_action": [anna.pk], "confirm": "yes"}, follow=True
    )

    anna.refresh_from_db()
    assert anna.erased_at is not None
    assert anna.events.get(kind="erased").actor.username == "staff-view_person-erase_person"
    assert "Erased 1 people." in response.content.decode()


def test_people_cannot_be_added_changed_or_deleted_in_the_admin(client, anna):
    admin_client = staff_client(client, "view_person", "add_person", "change_person", "delete_person")

    assert admin_client.get(reverse("admin:recipients_person_add")).status_code == 403
    assert (
        admin_client.post(reverse("admin:recipients_person_delete", args=[anna.pk]), {"post": "yes"}).status_code == 403
    )
    assert Person.objects.filter(pk=anna.pk).exists()


def test_a_local_account_is_masked_and_shown_whole_only_with_the_permission(client):
    account = account_normalise(
        kind="aba",
        currency="USD",
        details={
            "abartn": "026009593",
            "accountNumber": "987654321",
            "accountType": "CHECKING",
            "address.country": "US",
            "address.state": "NY",
            "address.city": "New York",
            "address.firstLine": "1 Main Street",
            "address.postCode": "10001",
        },
    )
    ava = person_resolve(
        brand_id=people_brand().pk, identity=IdentityInput(name="Ava Johnson", account=account), source="test"
    )

    masked = change_page(staff_client(client, "view_person"), ava)
    full = change_page(staff_client(client, "view_person", "view_full_iban"), ava)

    assert "US 026009593 ****4321" in masked and "987654321" not in masked and "1 Main Street" not in masked
    assert "accountNumber: 987654321" in full and "address.firstLine: 1 Main Street" in full
    (exported,) = person_export(person=ava)["bank_accounts"]
    assert (exported["kind"], exported["currency"], exported["details"]["accountNumber"]) == ("aba", "USD", "987654321")
