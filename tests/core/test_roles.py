"""Ops roles (issue 16): each staff group opens what its job needs and gets a plain-language 403
page for the rest; the admin shows no link a role cannot follow; the demo ops user can work."""

import logging
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone
from django_q.models import Task

from core.roles import ROLES

pytestmark = pytest.mark.django_db

REVIEW_QUEUE = "/admin/campaigns/rewardinreview/"
PAYOUTS = "/admin/payouts/payout/"
BATCHES = "/admin/payouts/payoutbatch/"
PEOPLE = "/admin/recipients/person/"
REWARDS = "/admin/campaigns/reward/"
LINES = "/admin/reconciliation/statementline/"
WRITE_OFFS = "/admin/reconciliation/reconciliationaction/"
AUDIT = "/admin/core/audittrail/"
NOTICES = "/admin/recipients/notice/"
UPLOAD = "upload"  # reversed below: the statement upload page
DASHBOARD = "dashboard"

CAN = {
    "Reviewer": ([REVIEW_QUEUE, REWARDS, PEOPLE, PAYOUTS], [LINES, BATCHES, UPLOAD, AUDIT, NOTICES]),
    "Payout approver": ([PAYOUTS, BATCHES, PEOPLE], [LINES, UPLOAD, REVIEW_QUEUE, AUDIT]),
    "Reconciler": ([DASHBOARD, UPLOAD, LINES, PAYOUTS], [BATCHES, REVIEW_QUEUE, AUDIT]),
    "Support": ([PEOPLE, PAYOUTS, REWARDS, AUDIT, NOTICES], [LINES, BATCHES, UPLOAD, REVIEW_QUEUE]),
    "Finance admin": ([DASHBOARD, LINES, WRITE_OFFS, BATCHES, PAYOUTS, AUDIT], [UPLOAD, REVIEW_QUEUE, NOTICES]),
}


def _url(name: str) -> str:
    if name == UPLOAD:
        return reverse("admin:reconciliation_statement_upload")
    if name == DASHBOARD:
        return reverse("reconciliation_dashboard")
    return name


def staff_in(django_user_model, *roles):
    user = django_user_model.objects.create_user(username="-".join(roles).lower(), password="x", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=roles))
    return user


def test_each_role_group_holds_exactly_its_permissions():
    for name, perms in ROLES.items():
        group = Group.objects.get(name=name)
        held = {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}
        assert held == set(perms), name


@pytest.mark.parametrize("role", sorted(CAN))
def test_a_role_opens_its_pages_and_gets_a_plain_403_for_the_rest(client, django_user_model, role, caplog):
    client.force_login(staff_in(django_user_model, role))
    allowed, refused = CAN[role]
    for page in allowed:
        assert client.get(_url(page)).status_code == 200, (role, page)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        for page in refused:
            response = client.get(_url(page))
            assert response.status_code == 403, (role, page)
            assert "not part of your role" in response.content.decode(), (role, page)
    assert caplog.records and all(r.exc_info is None for r in caplog.records)  # one line each, no traceback


def test_the_dashboard_offers_the_upload_only_to_who_may_upload(client, django_user_model):
    client.force_login(staff_in(django_user_model, "Finance admin"))
    assert reverse("admin:reconciliation_statement_upload") not in client.get(_url(DASHBOARD)).content.decode()
    client.force_login(staff_in(django_user_model, "Reconciler"))
    assert reverse("admin:reconciliation_statement_upload") in client.get(_url(DASHBOARD)).content.decode()


def test_the_demo_ops_user_holds_every_role_and_can_do_each_job(client, django_user_model, settings):
    from django.core.management import call_command

    settings.DEBUG = True
    call_command("seed_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115 - closed with the process
    ops = django_user_model.objects.get(username="ops")
    assert set(ops.groups.values_list("name", flat=True)) >= set(ROLES)
    client.force_login(ops)
    for page in [REVIEW_QUEUE, PAYOUTS, REWARDS, PEOPLE, UPLOAD, DASHBOARD, BATCHES, AUDIT, NOTICES]:
        assert client.get(_url(page)).status_code == 200, page


def test_failed_tasks_say_whether_a_later_run_of_the_same_task_succeeded(client, admin_user):
    now = timezone.now()
    common = {"func": "payouts.tasks.payout_execute_task", "hook": None, "kwargs": {}, "group": None}
    Task.objects.create(id="a" * 32, name="f1", args=(7,), started=now, stopped=now, success=False, **common)
    Task.objects.create(id="b" * 32, name="f2", args=(8,), started=now, stopped=now, success=False, **common)
    later = now + timedelta(minutes=1)
    Task.objects.create(id="c" * 32, name="s1", args=(7,), started=later, stopped=later, success=True, **common)
    client.force_login(admin_user)
    page = client.get("/admin/django_q/failure/").content.decode()
    assert page.count("redone: succeeded at") == 1 and page.count("not redone yet") == 1
