"""Combined ingestion is gone: every event queued for it is ingested now, then the queue goes.

A pending request is an event whose caller may still be waiting or may have died; ingesting it
here means a retry by the partner replays it instead of losing it. Failed or replayed rows only
waited for their caller to read the outcome: the caller's retry gets the same answer anew.
This runs the release's own ingestion service (not a historical model), so it must run with the
code it ships with; it does nothing when the queue is empty (a fresh database, a drained one).
"""

import json
import logging

from django.db import migrations
from django.utils.dateparse import parse_datetime

logger = logging.getLogger(__name__)
SWEEP = "campaigns.ingest_requests_sweep"


def pending_ingest(apps, schema_editor):
    # The live services, imported only when there is something to ingest: see the docstring.
    IngestRequest = apps.get_model("campaigns", "IngestRequest")
    pending = IngestRequest.objects.filter(state="pending").order_by("id")
    if not pending.exists():
        return
    from dataclasses import fields

    from campaigns.models import Brand
    from campaigns.services import EventInput, event_ingest_bulk
    from recipients.crypto import decrypt

    names = {f.name for f in fields(EventInput)}
    by_brand: dict[int, list] = {}
    for request in pending:
        data = json.loads(request.prepared if request.prepared.startswith("{") else decrypt(request.prepared))
        payload = {k: v for k, v in data["payload"].items() if k in names}
        payload["occurred_at"] = parse_datetime(payload["occurred_at"]) if payload.get("occurred_at") else None
        by_brand.setdefault(request.brand_id, []).append(EventInput(**payload))
    for brand_id, payloads in by_brand.items():
        brand = Brand.objects.get(pk=brand_id)
        for start in range(0, len(payloads), 1000):
            for payload, result in zip(
                payloads[start : start + 1000],
                event_ingest_bulk(brand=brand, payloads=payloads[start : start + 1000]),
                strict=True,
            ):
                if result.error is not None:  # nothing stored: the partner's retry gets the error
                    logger.warning("queued event %s of brand %s: %s", payload.external_id, brand_id, result.reason)


def schedule_remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SWEEP).delete()


class Migration(migrations.Migration):
    # Ingestion runs its own durable transactions.
    atomic = False

    dependencies = [
        ("campaigns", "0013_webhook_delivery_queued"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [
        migrations.RunPython(pending_ingest, migrations.RunPython.noop),
        migrations.RunPython(schedule_remove, migrations.RunPython.noop),
        migrations.DeleteModel(name="IngestRequest"),
    ]
