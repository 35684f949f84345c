"""``manage.py data_sizing`` (issue 30): on a small dataset, the JSON has a row per table with rows,
with positive figures, totals that add up, and the retention purge's periods where it deletes."""

import json

import pytest
from django.core.management import CommandError, call_command

from campaigns.models import TriggerEvent
from campaigns.services import event_ingest
from core.models import IdempotencyRecord
from tests.campaigns.conftest import event
from tests.campaigns.factories import BrandFactory, funded_campaign

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=False)]


@pytest.fixture
def some_events(db):
    brand = BrandFactory(slug="sizing")
    funded_campaign(brand=brand, amount_minor=100_000, rules=[{"trigger": "tiktok_login", "fixed_minor": 200}])
    for _ in range(5):
        event_ingest(brand=brand, payload=event())
    assert TriggerEvent.objects.count() == 5


def test_the_json_report_measures_every_table_with_rows_per_event(some_events, capsys):
    call_command("data_sizing", "--json", "--events-per-day", "1000")

    report = json.loads(capsys.readouterr().out)
    assert (report["events"], report["events_per_day"]) == (5, 1000)
    tables = {t["table"]: t for t in report["tables"]}
    events = tables["campaigns_triggerevent"]
    assert events["rows"] == 5 and events["rows_per_event"] == 1.0 and events["retention_days"] is None
    assert events["grows"] and not tables["campaigns_brand"]["grows"]  # one brand for five events
    for t in report["tables"]:
        assert t["rows"] > 0 and t["bytes"] > 0 and t["bytes_per_event"] > 0
        assert t["bytes"] == t["heap_bytes"] + t["index_bytes"] + t["toast_bytes"]
        assert t["bytes_per_year"] == t["bytes_per_day"] * 365
        assert 0 <= t["bytes_per_year_with_retention"] <= t["bytes_per_year"]
        assert (t["bytes_per_day"] > 0) == t["grows"] and (t["bytes_per_year_with_retention"] > 0) == t["grows"]
    total = report["total"]
    assert total["bytes"] == sum(t["bytes"] for t in report["tables"]) > total["fixed_bytes"] > 0
    assert 0 < total["bytes_per_year_with_retention"] <= total["bytes_per_year"]
    # the ledger is among what is kept for ever
    assert any(t["table"].startswith("reconciliation_posting") and t["retention_days"] is None for t in tables.values())


def test_a_table_the_purge_deletes_from_is_projected_over_its_period_only(some_events, capsys, settings):
    settings.RETENTION_IDEMPOTENCY_DAYS = 7
    brand = TriggerEvent.objects.first().brand
    IdempotencyRecord.objects.create(
        brand=brand, key="k", method="POST", path="/api/v1/events", request_hash="0" * 64,
        created_at="2026-01-01T00:00:00Z", expires_at="2026-01-02T00:00:00Z",
    )  # fmt: skip

    call_command("data_sizing", "--json")

    tables = {t["table"]: t for t in json.loads(capsys.readouterr().out)["tables"]}
    kept = tables[IdempotencyRecord._meta.db_table]
    assert kept["retention_days"] == 7
    assert kept["bytes_per_year_with_retention"] == kept["bytes_per_day"] * 7


def test_the_table_prints_a_line_per_table_and_a_total(some_events, capsys):
    call_command("data_sizing")

    out = capsys.readouterr().out
    assert "5 trigger events measured; projected at 100,000 events/day" in out
    *_, total, fixed = out.rstrip().splitlines()
    assert "campaigns_triggerevent" in out and total.startswith("total") and fixed.startswith("fixed tables")


def test_without_events_it_says_there_is_nothing_to_measure(db):
    with pytest.raises(CommandError, match="no trigger events"):
        call_command("data_sizing")
