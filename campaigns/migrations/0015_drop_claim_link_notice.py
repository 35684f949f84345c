"""Claim links are notices now (``recipients.Notice``, kind ``claim_link``; recipients 0007
copied the sent ones)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0014_drop_ingest_requests"),
        ("recipients", "0008_claim_link_notices_into_outbox"),
    ]

    operations = [migrations.DeleteModel(name="ClaimLinkNotice")]
