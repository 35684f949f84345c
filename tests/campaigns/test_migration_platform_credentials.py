"""Migration campaigns 0034 moves the access tokens video submissions kept to their account's
one ``PlatformCredential``: a token still alive (younger than the day TikTok gave it) moves, the
newest submission's winning; a dead one is dropped with the column."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from campaigns.models import PlatformCredential, VideoSubmission
from campaigns.selectors import withdrawal_account
from recipients import crypto
from tests.campaigns.factories import BrandFactory, funded_campaign
from tests.recipients.factories import PersonFactory

BEFORE = [("campaigns", "0033_analytics")]


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_live_submission_tokens_move_to_their_account_and_dead_ones_are_dropped():
    brand = BrandFactory(name="Alpha", slug="alpha")
    campaign = funded_campaign(
        brand=brand, amount_minor=10_000, slug="ugc", rules=[{"trigger": "ugc_share", "fixed_minor": 800}]
    )
    person = PersonFactory(brand=brand)
    rows = {
        name: VideoSubmission.objects.create(
            campaign=campaign, person=person, social_uid=uid, video_id=name, platform="tiktok"
        )
        for name, uid in (("older", "acct-1"), ("newer", "acct-1"), ("dead", "acct-2"))
    }
    now = timezone.now()
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            for name, age in (
                ("older", timedelta(hours=5)),
                ("newer", timedelta(hours=1)),
                ("dead", timedelta(days=3)),
            ):
                cursor.execute(
                    "UPDATE campaigns_videosubmission SET token_ciphertext = %s, created_at = %s WHERE id = %s",
                    [crypto.encrypt(f"act.{name}"), now - age, rows[name].pk],
                )
    finally:
        _migrate(None)

    (credential,) = PlatformCredential.objects.all()
    assert credential.account == withdrawal_account(platform="tiktok", uid="acct-1")
    assert crypto.decrypt(credential.access_ciphertext) == "act.newer" and credential.refresh_ciphertext == ""
    assert abs(credential.access_expires_at - (now + timedelta(hours=23))) < timedelta(minutes=1)
