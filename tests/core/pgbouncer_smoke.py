"""Run by tests/core/test_pgbouncer.py in a process of its own whose DATABASE_URL points at a
PgBouncer in transaction mode: the partner API (single events from several threads, one bulk
call, tasks run inline as a worker runs them) and a CSV export that reads with ``.iterator()``.
Prints one JSON line with what happened."""

import json
import os
from concurrent.futures import ThreadPoolExecutor

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from campaigns.api_keys import api_key_create  # noqa: E402
from tests.campaigns.factories import BrandFactory, funded_campaign  # noqa: E402

THREADS, PER_THREAD = 4, 8


def main() -> dict:
    brand = BrandFactory(name="Pooled", slug="pooled")
    funded_campaign(
        brand=brand,
        amount_minor=1_000_000,
        rules=[{"trigger": "tiktok_login", "fixed_minor": 100, "verification": "partner_attested"}],
    )
    token = api_key_create(brand=brand, name="pooled", scopes=["read", "write", "events"]).token

    def post(thread: int) -> list[int]:
        api = APIClient(HTTP_AUTHORIZATION=f"Bearer {token}")
        statuses = []
        for n in range(PER_THREAD):
            event = {"external_id": f"p-{thread}-{n}", "campaign": "summer", "type": "tiktok_login"}
            event["email"] = f"p{thread}x{n}@example.com"
            statuses.append(api.post("/api/v1/events/", event, format="json").status_code)
        connection.close()
        return statuses

    with ThreadPoolExecutor(THREADS) as pool:
        statuses = [s for batch in pool.map(post, range(THREADS)) for s in batch]

    bulk = [
        {"external_id": f"bulk-{n}", "campaign": "summer", "type": "tiktok_login", "email": f"b{n}@example.com"}
        for n in range(20)
    ]
    response = APIClient(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/v1/events/bulk/", {"events": bulk}, format="json"
    )
    bulk_outcomes = [r["outcome"] for r in response.json()["results"]] if response.status_code == 200 else []

    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("pooled-auditor", password="x"))
    export = staff.get("/admin/core/audittrail/export/")
    csv_lines = b"".join(export.streaming_content).decode().strip().splitlines()
    return {
        "event_statuses": statuses,
        "bulk_status": response.status_code,
        "bulk_outcomes": bulk_outcomes,
        "export_status": export.status_code,
        "export_rows": len(csv_lines) - 1,
    }


if __name__ == "__main__":
    print(json.dumps(main()))
