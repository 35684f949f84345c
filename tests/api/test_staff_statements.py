"""POST /api/v1/staff/statements/: staff import a bank file through the API — the admin upload's
service, the API's error format, and nothing half-written."""

from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from bench.camt_gen import GenLine, GenStatement, write_camt053
from reconciliation.models import BankStatement, StatementImport, StatementLine
from reconciliation.services.statements import platform_bank_account_create
from tests.api.conftest import assert_problem
from tests.reconciliation.test_bank_import import FIXTURES

pytestmark = pytest.mark.django_db

URL = "/api/v1/staff/statements/"
IBAN = "NL91ABNA0417164300"


def staff_client(*, staff=True, perm=True, csrf=False) -> APIClient:
    user = get_user_model().objects.create_user(f"ops{staff}{perm}", password="x", is_staff=staff)
    if perm:
        user.user_permissions.add(Permission.objects.get(codename="reconcile_statement"))
    client = APIClient(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def camt_file(tmp_path):
    platform_bank_account_create(name="Operating", iban=IBAN, currency="EUR")
    path = tmp_path / "stmt.xml"
    lines = [GenLine(amount=Decimal("10.00"), credit_debit="CRDT", remittance=f"r{i}") for i in range(3)]
    write_camt053(
        path,
        [
            GenStatement(
                statement_id="STMT-API", account_iban=IBAN, currency="EUR", opening_balance=Decimal("0"), lines=lines
            )
        ],
    )
    return path.read_bytes()


def upload(client, data: bytes, name: str = "stmt.xml"):
    return client.post(URL, {"file": SimpleUploadedFile(name, data, content_type="application/xml")})


def test_staff_import_a_statement_and_the_same_file_again_changes_nothing(camt_file):
    client = staff_client()

    first = upload(client, camt_file)

    assert first.status_code == 201, first.content
    body = first.json()
    assert (body["replayed"], body["statements"], body["new_lines"]) == (False, ["STMT-API"], 3)
    assert StatementImport.objects.get().source == "api" and StatementLine.objects.count() == 3

    again = upload(client, camt_file, name="renamed.xml")

    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["import_id"] == body["import_id"]
    assert (StatementImport.objects.count(), BankStatement.objects.count(), StatementLine.objects.count()) == (1, 1, 3)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (lambda good: (FIXTURES / "camt053.v2.wrong.xml").read_bytes(), None),  # whatever the parser names it
        (lambda good: good[: len(good) * 2 // 3], "malformed_xml"),  # cut off mid-way: nothing of it is kept
        (lambda good: b"<?xml version='1.0'?><Document><Other/></Document>", "unsupported_document"),
        (
            lambda good: (
                b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><Document>&x;</Document>'
            ),
            "dtd_forbidden",
        ),
    ],
    ids=["wrong-sample", "truncated", "not-camt", "xxe"],
)
def test_a_bad_file_is_a_problem_and_imports_nothing(camt_file, data, code):
    response = upload(staff_client(), data(camt_file))

    assert response.status_code == 400 and response["Content-Type"].startswith("application/problem+json")
    if code:
        assert_problem(response, 400, code)
    assert not StatementImport.objects.exists() and not StatementLine.objects.exists()


def test_an_oversize_file_is_refused(camt_file, settings):
    settings.STATEMENT_MAX_BYTES = 100
    assert_problem(upload(staff_client(), camt_file), 400, "file_too_large")
    assert not StatementImport.objects.exists()


def test_no_file_is_a_clear_error():
    assert_problem(staff_client().post(URL, {}), 400, "file_missing")


@pytest.mark.parametrize(("staff", "perm"), [(True, False), (False, True)], ids=["staff-no-perm", "perm-not-staff"])
def test_without_staff_and_the_permission_nothing_is_imported(camt_file, staff, perm):
    assert_problem(upload(staff_client(staff=staff, perm=perm), camt_file), 403, "permission_denied")
    assert not StatementImport.objects.exists()


def test_no_session_and_api_keys_do_not_work_here(camt_file, api):
    assert upload(APIClient(), camt_file).status_code == 403
    assert upload(api, camt_file).status_code == 403  # a brand's partner key is not staff
    assert not StatementImport.objects.exists()


def test_csrf_is_checked_for_the_session(camt_file):
    assert upload(staff_client(csrf=True), camt_file).status_code == 403
    assert not StatementImport.objects.exists()


def test_where_the_admin_needs_two_factor_so_does_the_import(camt_file, settings):
    settings.ADMIN_REQUIRES_TWO_FACTOR = True  # production's setting
    assert_problem(upload(staff_client(), camt_file), 403, "mfa_required")
    assert not StatementImport.objects.exists()


def test_refusals_say_what_the_staff_endpoint_needs(api, camt_file):
    assert_problem(upload(APIClient(), camt_file), 403, "login_required")
    assert_problem(upload(api, camt_file), 403, "login_required")  # a partner key is no staff session
    body = assert_problem(upload(staff_client(csrf=True), camt_file), 403, "csrf_failed")
    assert "X-CSRFToken" in body["detail"]
    assert not StatementImport.objects.exists()


WISE_CSV = Path(__file__).resolve().parent.parent / "fixtures" / "statements" / "wise_business_eur.csv"
WISE_IBAN = "BE68539007547034"


@pytest.fixture
def wise_account():
    return platform_bank_account_create(name="Wise", iban=WISE_IBAN, currency="EUR")


def test_a_csv_export_is_imported_in_the_format_sent(wise_account):
    client = staff_client()
    data = {"file": SimpleUploadedFile("wise.csv", WISE_CSV.read_bytes()), "format": "csv:wise"}

    response = client.post(URL, {**data, "bank_account": wise_account.pk})

    assert response.status_code == 201, response.content
    assert response.json()["new_lines"] == 4
    assert StatementImport.objects.get().kind == "csv"
    assert StatementLine.objects.filter(bank_account=wise_account).count() == 4


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"format": "csv:nobank", "bank_account": "account"}, "unknown_statement_format"),
        ({"format": "csv:wise"}, "bank_account_required"),
        ({"format": "csv:wise", "bank_account": "IBAN"}, "invalid_bank_account"),
        ({"format": "csv:wise", "bank_account": "999999"}, "unknown_bank_account"),
        ({"bank_account": "account"}, "unsupported_document"),  # the account has no format: camt only
    ],
)
def test_a_format_or_account_that_cannot_be_used_is_a_400_and_nothing_is_written(wise_account, fields, code):
    fields = {k: str(wise_account.pk) if v == "account" else v for k, v in fields.items()}

    response = staff_client().post(URL, {"file": SimpleUploadedFile("wise.csv", WISE_CSV.read_bytes()), **fields})

    body = assert_problem(response, 400, code)
    assert not StatementImport.objects.exists() and not StatementLine.objects.exists()
    if code == "unknown_statement_format":
        assert "csv:wise" in body["detail"]
