"""Run by tests/core/test_replica.py in a process of its own whose DATABASE_URL is a throwaway
primary and DATABASE_REPLICA_URL its streaming standby (pg_basebackup -R), both started by the test.

The standby's replay is paused while the primary takes writes, so what each read saw says where
it read: a lag-tolerant read on the standby misses the new rows, a read on the primary has them.
Prints one JSON line with what happened."""

import json
import os
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

DEADLINE_SECONDS = 60


def _one(alias: str, sql: str):
    with connections[alias].cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def caught_up() -> None:
    """Wait until the standby has replayed everything the primary has written so far."""
    target = _one("default", "SELECT pg_current_wal_lsn()::text")
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not _one("replica", f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"):
        if time.monotonic() > deadline:
            raise SystemExit("the standby did not catch up")
        time.sleep(0.05)


class Both:
    """The queries run on each alias inside the block."""

    def __enter__(self):
        self.default = CaptureQueriesContext(connections["default"]).__enter__()
        self.replica = CaptureQueriesContext(connections["replica"]).__enter__()
        return self

    def __exit__(self, *exc):
        self.replica.__exit__(*exc)
        self.default.__exit__(*exc)

    def counts(self) -> dict:
        return {"default": len(self.default.captured_queries), "replica": len(self.replica.captured_queries)}


def dashboard_view(client: Client, slug: str) -> dict:
    with Both() as seen:
        page = client.get(f"/portal/{slug}/")
    data = page.context["data"]
    return {
        "status": page.status_code,
        "funded_minor": data.campaigns[0].funded_minor,
        "rewards": sum(row["total"] for row in data.rewards_by_trigger),
        **seen.counts(),
    }


def main() -> dict:
    setup_test_environment()
    call_command("migrate", verbosity=0)

    from campaigns.api_keys import api_key_create
    from campaigns.models import BrandRole, Reward
    from campaigns.services import brand_membership_set, brand_topup_record
    from campaigns.webhooks import webhook_endpoint_create, webhook_events_collect
    from core.health import readiness
    from core.metrics import metrics_render, replica_metrics
    from tests.campaigns.factories import BrandFactory, funded_campaign

    brand = BrandFactory(name="Replicated", slug="replicated")
    campaign = funded_campaign(
        brand=brand,
        amount_minor=100_000,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 100, "verification": "partner_attested"}],
    )
    brand_topup_record(
        brand=brand,
        amount_minor=50_000,
        currency=campaign.currency,
        bank_account_code="NL00TEST0000000001",
        idempotency_key="topup:replica:2",
        reference=brand.funding_reference,
    )
    users = get_user_model()
    owner = users.objects.create_user(username="owner", email="owner@replicated.example", password="x")
    analyst = users.objects.create_user(username="analyst", email="analyst@replicated.example", password="x")
    brand_membership_set(brand=brand, user=owner, role=BrandRole.OWNER)
    brand_membership_set(brand=brand, user=analyst, role=BrandRole.ANALYST)
    staff = users.objects.create_superuser("replica-ops", password="x")
    token = api_key_create(brand=brand, name="replica", scopes=["read", "write", "events"]).token
    webhook_endpoint_create(brand=brand, url="http://127.0.0.1:9/hooks", event_types=[])
    api = APIClient(HTTP_AUTHORIZATION=f"Bearer {token}")
    for n in range(3):
        api.post(
            "/api/v1/events/",
            {"external_id": f"before-{n}", "campaign": "summer", "type": "tiktok_login", "email": f"b{n}@example.com"},
            format="json",
        )
    owner_client, analyst_client, staff_client = Client(), Client(), Client()
    owner_client.force_login(owner)
    analyst_client.force_login(analyst)
    staff_client.force_login(staff)
    webhook_events_collect()
    caught_up()
    result: dict = {"before": dashboard_view(analyst_client, brand.slug)}

    # The standby stops replaying: from here on it is behind by everything the primary writes.
    _one("replica", "SELECT pg_wal_replay_pause()::text")
    try:
        # Money and ingestion: events in, rewards made, tasks run inline, and the webhook
        # collector, which emits the new rewards' events (rows only the primary has yet) from its
        # snapshot horizon: never a query on the replica.
        with Both() as money:
            statuses = [
                api.post(
                    "/api/v1/events/",
                    {"external_id": f"during-{n}", "campaign": "summer", "type": "tiktok_login", "email": f"d{n}@x.io"},
                    format="json",
                ).status_code
                for n in range(4)
            ]
        result["money"] = {"statuses": statuses, **money.counts()}
        with Both() as collector:
            result["collector_emitted"] = webhook_events_collect()
        result["collector"] = collector.counts()
        result["rewards_on_primary"] = Reward.objects.filter(campaign__brand=brand).count()

        # Read after write: the owner moves money to the campaign, then looks at the dashboard.
        with Both() as allocate:
            moved = owner_client.post(
                f"/portal/{brand.slug}/campaigns/{campaign.pk}/allocate/",
                {"amount": "100.00", "idempotency_key": "replica-smoke"},
            )
        result["allocate"] = {"status": moved.status_code, "pinned": "joyback_primary_until" in moved.cookies}
        result["allocate"].update(allocate.counts())
        result["owner_after_write"] = dashboard_view(owner_client, brand.slug)
        # Another member of the team wrote nothing: the dashboard reads the standby, a moment behind.
        result["analyst"] = dashboard_view(analyst_client, brand.slug)

        with Both() as export:
            response = analyst_client.get(f"/portal/{brand.slug}/rewards/?format=csv")
            rows = b"".join(response.streaming_content).decode().strip().splitlines()
        result["export"] = {"rows": len(rows) - 1, **export.counts()}

        # Admin: the rewards change list reads the standby; a reward's change form, the primary.
        newest = Reward.objects.filter(campaign__brand=brand).order_by("-id").first()
        with Both() as changelist:
            listed = staff_client.get("/admin/campaigns/reward/")
        result["changelist"] = {"status": listed.status_code, "count": listed.context["cl"].result_count}
        result["changelist"].update(changelist.counts())
        with Both() as change:
            form = staff_client.get(f"/admin/campaigns/reward/{newest.pk}/change/")
        result["change_form"] = {"status": form.status_code, **change.counts()}
        with Both() as queue:
            review = staff_client.get("/admin/campaigns/rewardinreview/")
        result["review_queue"] = {"status": review.status_code, **queue.counts()}
        # An action's selection is read on the primary: the newest reward, which the standby has
        # not seen, is voided.
        with Both() as action:
            acted = staff_client.post(
                "/admin/campaigns/reward/", {"action": "void", "_selected_action": [newest.pk], "index": 0}
            )
        newest.refresh_from_db()
        result["action"] = {"status": acted.status_code, "reward": newest.status, **action.counts()}

        with Both() as ready:
            ok, _checks = readiness()
        result["readiness"] = {"ok": ok, **ready.counts()}
        result["lag_paused"] = {m.name: m.samples[0].value for m in replica_metrics()}
    finally:
        _one("replica", "SELECT pg_wal_replay_resume()::text")

    caught_up()
    result["after_resume"] = dashboard_view(analyst_client, brand.slug)
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (lag := {m.name: m.samples[0].value for m in replica_metrics()})["joyback_replica_lag_seconds"]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    result["lag_caught_up"] = lag
    result["metrics_text_has_lag"] = b"joyback_replica_lag_seconds" in metrics_render()
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
