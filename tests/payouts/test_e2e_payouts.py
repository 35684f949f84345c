"""End to end on PostgreSQL: a trigger event becomes a reward, the reward becomes payable, and a
payout settles on the sandbox rail, with the books verified after every step; once driven by
hand, once by the hooks with django-q2 in sync mode, and once by a real ``qcluster`` process."""

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core import mail
from django.db import connection
from django_q.conf import Conf

from campaigns.models import Reward, RewardStatus
from campaigns.services import event_ingest, rewards_mature
from payouts.models import Payout, PayoutStatus
from payouts.services import payout_execute, payouts_create_for_payable
from payouts.tasks import payout_settled_followup_task
from recipients import crypto
from recipients.services.notices import notices_send_due
from recipients.whatsapp_cloud import FakeWhatsAppSender
from tests.campaigns.conftest import event
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import (
    assert_books_ok,
    bank_minor,
    iban,
    in_transit_minor,
    payable_minor,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_event_to_settled_payout_step_by_step(sandbox, debtor, brand, campaign, monkeypatch):
    # Tasks go to the queue and nobody runs them: each step below is taken by hand.
    monkeypatch.setattr(Conf, "SYNC", False)
    account = iban()
    # 1. the event is accepted: money reserved on the budget, nothing payable yet
    result = event_ingest(brand=brand, payload=event(iban=account, name="Giulia Rossi", email="giulia@example.com"))
    reward = result.reward
    assert result.outcome == "rewarded" and reward.status == RewardStatus.HELD
    assert_books_ok()
    # 2. it matures: budget → payable
    assert rewards_mature() == 1
    assert payable_minor(reward.person_id) == 500
    assert_books_ok()
    # 3. a payout is created: nothing moves yet
    (payout_id,) = payouts_create_for_payable().created
    assert payable_minor(reward.person_id) == 500 and in_transit_minor() == 0
    assert_books_ok()
    # 4. the payout task runs: payable → in transit → bank
    payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    assert payout.status == PayoutStatus.SETTLED and sandbox.transfer_count(payout.end_to_end_id) == 1
    assert payable_minor(reward.person_id) == 0 and in_transit_minor() == 0 and bank_minor(debtor) == -500
    assert_books_ok()
    # 5. the follow-up marks the reward paid; the notice recorded with the settlement tells the person
    payout_settled_followup_task(payout_id)
    reward.refresh_from_db()
    assert reward.status == RewardStatus.PAID and reward.payout_ref == payout.end_to_end_id
    assert notices_send_due().sent == 1
    assert mail.outbox[-1].to == ["giulia@example.com"]
    assert_books_ok()


def test_event_to_settled_payout_through_the_hooks(sandbox, debtor, brand, campaign, settings):
    # given the payable hook on (django-q2 runs every enqueued task at once, after commit)
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = True
    # when one event arrives
    result = event_ingest(brand=brand, payload=event(iban=iban(), name="Marco Bianchi", whatsapp="+39 347 765 4321"))
    # then the reward matured, was paid out, marked paid, and the person was told
    reward = Reward.objects.get(pk=result.reward.pk)
    payout = Payout.objects.get(person_id=reward.person_id)
    assert payout.status == PayoutStatus.SETTLED and reward.status == RewardStatus.PAID
    assert sandbox.transfer_count(payout.end_to_end_id) == 1
    assert [m.template for m in FakeWhatsAppSender.sent] == ["payout_paid"]
    assert payable_minor(reward.person_id) == 0 and in_transit_minor() == 0
    assert_books_ok()


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def qcluster(tmp_path, settings, monkeypatch):
    """A real django-q2 cluster on the test database (pytest-django's ``test_<name>``), with the
    bench settings (which do not force sync mode), sharing the sandbox bank through a file and
    the IBAN keys with this process. Stopped afterwards: SIGTERM to its process group, killed
    if it has not stopped after 10 s (the data it works on is about to be flushed anyway)."""
    store = tmp_path / "sandbox.sqlite3"
    settings.SANDBOX_STORE_PATH = str(store)
    settings.PAYOUT_DEFAULT_RAIL = "sandbox"
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = True
    monkeypatch.setattr(Conf, "SYNC", False)
    # Task payloads are signed with the SECRET_KEY: sign ours with the cluster's.
    monkeypatch.setattr(Conf, "SECRET_KEY", importlib.import_module("config.settings.bench").SECRET_KEY)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.bench",
        "DATABASE_URL": _database_url(),
        "SANDBOX_STORE_PATH": str(store),
        "FIELD_ENCRYPTION_KEY": crypto._secret("FIELD_ENCRYPTION_KEY"),
        "FIELD_FINGERPRINT_KEY": crypto._secret("FIELD_FINGERPRINT_KEY"),
        # The ORM broker's queue is named after the cluster: the same name as this process's.
        "Q_CLUSTER_NAME": Conf.PREFIX,
        "Q_WORKERS": "2",
        "Q_SYNC": "0",
    }
    log = open(tmp_path / "qcluster.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        # System checks (URLs, templates, admin) belong to the web process; the worker skips them.
        [sys.executable, str(Path(django_settings.BASE_DIR) / "manage.py"), "qcluster", "--skip-checks"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    log.close()


def test_event_to_settled_payout_with_a_real_qcluster(sandbox, debtor, brand, campaign, qcluster, tmp_path):
    from payouts.rails.sandbox import sandbox_store

    # when events arrive and the worker cluster does the rest
    rewards = [event_ingest(brand=brand, payload=event(iban=iban(), name=f"Person {n}")).reward for n in range(3)]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if (
            Payout.objects.filter(status=PayoutStatus.SETTLED).count() == 3
            and not Reward.objects.exclude(status=RewardStatus.PAID).exists()
        ):
            break
        assert qcluster.poll() is None, (tmp_path / "qcluster.log").read_text()[-2000:]
        time.sleep(0.2)
    # then each reward was paid by exactly one transfer, and the books balance
    payouts = list(Payout.objects.all())
    assert len(payouts) == 3 and {p.status for p in payouts} == {PayoutStatus.SETTLED}, (
        tmp_path / "qcluster.log"
    ).read_text()[-2000:]
    assert {p.person_id for p in payouts} == {r.person_id for r in rewards}
    assert [sandbox_store().transfer_count(p.end_to_end_id) for p in payouts] == [1, 1, 1]
    assert set(Reward.objects.values_list("status", flat=True)) == {RewardStatus.PAID}
    assert in_transit_minor() == 0 and bank_minor(debtor) == -1_500
    assert_books_ok()
