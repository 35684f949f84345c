"""Access requests (issue 18): everything held about a person, across the tables their data lands
in, as JSON — from the admin (a permissioned action) or ``manage.py person_export`` — and every
export is an audited ``exported`` event with who asked."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.urls import reverse

from core.audit import audit_verify
from recipients.models import PersonEvent, PersonEventKind
from recipients.services import person_export
from tests.payouts.payout_fixtures import debtor, sandbox  # noqa: F401 - fixtures
from tests.portal.conftest import brand_a, campaign_a, fake_tiktok  # noqa: F401 - fixtures
from tests.recipients.test_erasure_scan import EMAIL, IBAN, NAME, NUMBER, giulia  # noqa: F401 - fixture

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=False)]

PEOPLE = reverse("admin:recipients_person_changelist")


def staff(username: str, *codenames: str):
    user = get_user_model().objects.create_user(username, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="recipients", codename__in=codenames))
    return user


def test_the_export_holds_her_data_from_every_table_and_is_audited(giulia):  # noqa: F811
    person, _, _ = giulia
    support = staff("support-anna", "view_person", "export_person")

    export = person_export(person=person, actor=support)

    text = json.dumps(export)
    assert EMAIL in text and f"+{NUMBER}" in text and NAME in text
    assert IBAN in [account["iban"] for account in export["bank_accounts"]]
    assert export["bank_accounts"][0]["masked"].startswith("IT60")
    assert export["rewards"] and all(r["amount_minor"] > 0 and r["currency"] == "EUR" for r in export["rewards"])
    assert {p["status"] for p in export["payouts"]} >= {"settled", "returned"}
    assert all(p["creditor_name"] == NAME and "***" in p["creditor_iban_masked"] for p in export["payouts"])
    assert export["trigger_events"] and export["consents"] and export["whatsapp_codes"]
    assert "ciphertext" not in text
    event = PersonEvent.objects.get(person=person, kind=PersonEventKind.EXPORTED)
    assert event.actor == support
    assert event.detail["sections"]["payouts"] == len(export["payouts"])
    assert EMAIL not in json.dumps(event.detail)
    assert audit_verify().ok


def test_the_admin_action_downloads_the_export_with_the_staff_user_as_actor(client, giulia):  # noqa: F811
    person, _, _ = giulia
    client.force_login(staff("support-bea", "view_person", "export_person"))

    response = client.post(PEOPLE, {"action": "export_selected", "_selected_action": [person.pk]})

    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="person-{person.pk}.json"'
    assert EMAIL in response.content.decode()
    assert PersonEvent.objects.get(person=person, kind=PersonEventKind.EXPORTED).actor.username == "support-bea"


def test_staff_without_the_permission_neither_see_nor_run_the_action(client, giulia):  # noqa: F811
    person, _, _ = giulia
    client.force_login(staff("viewer", "view_person"))

    listing = client.get(PEOPLE)
    assert "export_selected" not in listing.context["cl"].model_admin.get_actions(listing.wsgi_request)
    response = client.post(PEOPLE, {"action": "export_selected", "_selected_action": [person.pk]})

    assert EMAIL not in response.content.decode()
    assert not PersonEvent.objects.filter(kind=PersonEventKind.EXPORTED).exists()


def test_the_support_role_may_export():
    assert Group.objects.get(name="Support").permissions.filter(codename="export_person").exists()


def test_the_command_writes_the_export_to_a_file(giulia, tmp_path):  # noqa: F811
    person, _, _ = giulia
    staff("support-cia")
    out = tmp_path / "export.json"

    call_command("person_export", str(person.pk), "--out", str(out), "--actor", "support-cia")

    export = json.loads(out.read_text())
    assert export["person_id"] == person.pk and IBAN in out.read_text()
    assert PersonEvent.objects.get(person=person, kind=PersonEventKind.EXPORTED).source == "command"
