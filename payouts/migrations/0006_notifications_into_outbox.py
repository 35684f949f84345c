"""Notifications sent before the outbox become notices (done, with their channels sent), so an
access request still shows them; then the Notification table goes."""

from django.db import migrations


def forward(apps, schema_editor):
    Notification = apps.get_model("payouts", "Notification")
    Notice = apps.get_model("recipients", "Notice")
    NoticeDelivery = apps.get_model("recipients", "NoticeDelivery")
    batch = []
    for old in Notification.objects.order_by("id").iterator(chunk_size=2000):
        batch.append(old)
        if len(batch) >= 2000:
            _write(Notice, NoticeDelivery, batch)
            batch = []
    _write(Notice, NoticeDelivery, batch)


def _write(Notice, NoticeDelivery, batch):
    if not batch:
        return
    Notice.objects.bulk_create(
        [
            Notice(
                key=old.key,
                person_id=old.person_id,
                kind=old.kind,
                payout_id=old.payout_id,
                status="done",
                next_attempt_at=old.created_at,
                created_at=old.created_at,
                done_at=old.sent_at or old.created_at,
            )
            for old in batch
        ],
        ignore_conflicts=True,
    )
    ids = dict(Notice.objects.filter(key__in=[old.key for old in batch]).values_list("key", "id"))
    NoticeDelivery.objects.bulk_create(
        [
            NoticeDelivery(notice_id=ids[old.key], channel=channel, status="sent", attempts=1, sent_at=old.sent_at)
            for old in batch
            if old.sent_at
            for channel in old.channels or []
            if channel in ("email", "whatsapp")
        ],
        ignore_conflicts=True,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("payouts", "0005_claim_tasks_moved"),
        ("recipients", "0008_claim_link_notices_into_outbox"),
    ]

    operations = [
        migrations.RunPython(forward, migrations.RunPython.noop),
        migrations.DeleteModel(name="Notification"),
    ]
