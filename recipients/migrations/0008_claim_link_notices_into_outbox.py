"""Claim links already sent become ``claim_link`` notices (done), so the sweep that now records
them through the outbox tells nobody twice; campaigns 0015 then drops ClaimLinkNotice."""

from django.db import migrations


def forward(apps, schema_editor):
    ClaimLinkNotice = apps.get_model("campaigns", "ClaimLinkNotice")
    Notice = apps.get_model("recipients", "Notice")
    NoticeDelivery = apps.get_model("recipients", "NoticeDelivery")
    rows = ClaimLinkNotice.objects.select_related("reward").order_by("id").iterator(chunk_size=2000)
    batch = []
    for old in rows:
        done = old.sent_at or old.created_at
        batch.append(
            (
                Notice(
                    key=f"reward:{old.reward_id}:claim_link",
                    person_id=old.reward.person_id,
                    kind="claim_link",
                    reward_id=old.reward_id,
                    status="done",
                    next_attempt_at=old.created_at,
                    created_at=old.created_at,
                    done_at=done,
                ),
                old.channels if old.sent_at else [],
                old.sent_at,
            )
        )
        if len(batch) >= 2000:
            _write(Notice, NoticeDelivery, batch)
            batch = []
    _write(Notice, NoticeDelivery, batch)


def _write(Notice, NoticeDelivery, batch):
    if not batch:
        return
    Notice.objects.bulk_create([notice for notice, _, _ in batch], ignore_conflicts=True)
    ids = dict(Notice.objects.filter(key__in=[n.key for n, _, _ in batch]).values_list("key", "id"))
    NoticeDelivery.objects.bulk_create(
        [
            NoticeDelivery(notice_id=ids[notice.key], channel=channel, status="sent", attempts=1, sent_at=sent_at)
            for notice, channels, sent_at in batch
            for channel in channels
            if channel in ("email", "whatsapp")
        ],
        ignore_conflicts=True,
    )


def backward(apps, schema_editor):
    Notice = apps.get_model("recipients", "Notice")
    ClaimLinkNotice = apps.get_model("campaigns", "ClaimLinkNotice")
    for notice in Notice.objects.filter(kind="claim_link").prefetch_related("deliveries").iterator(chunk_size=2000):
        sent = [d.channel for d in notice.deliveries.all() if d.status == "sent"]
        ClaimLinkNotice.objects.get_or_create(
            reward_id=notice.reward_id,
            defaults={"channels": sent, "sent_at": notice.done_at if sent else None},
        )
    apps.get_model("recipients", "NoticeDelivery").objects.filter(notice__kind="claim_link").delete()
    Notice.objects.filter(kind="claim_link").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("recipients", "0007_notices_outbox"),
        ("campaigns", "0014_drop_ingest_requests"),
    ]

    operations = [migrations.RunPython(forward, backward)]
