import json

from django.core.management.base import BaseCommand, CommandError

from campaigns.sizing import data_sizing_measure
from core.exceptions import InvalidInput

MB = 1024 * 1024
GB = 1024 * MB


class Command(BaseCommand):
    help = (
        "Measure the database per trigger event (bytes of each table with its indexes and TOAST, and "
        "rows, divided by the events) and project a day and a year at --events-per-day, without and "
        "with the retention purge. Run it on a database with thousands of events (after a benchmark "
        "or a seeded run): the fixed cost of small tables swamps the figures of a near-empty one."
    )

    def add_arguments(self, parser):
        parser.add_argument("--events-per-day", type=int, default=100_000, help="the rate projected (100,000)")
        parser.add_argument(
            "--min-rows-per-event",
            type=float,
            default=0.25,
            help="a table with fewer rows per event does not grow with events and is not projected (0.25)",
        )
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the report as JSON")

    def handle(
        self, *args, events_per_day: int = 100_000, min_rows_per_event: float = 0.25, as_json: bool = False, **options
    ):
        try:
            report = data_sizing_measure(events_per_day=events_per_day, min_rows_per_event=min_rows_per_event)
        except InvalidInput as exc:
            raise CommandError(exc.message) from exc
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
            return
        self.stdout.write(f"{report.events:,} trigger events measured; projected at {events_per_day:,} events/day")
        header = f"{'table':<44} {'rows/ev':>8} {'B/ev':>9} {'MB/day':>8} {'GB/yr':>8} {'kept':>6} {'GB/yr kept':>10}"
        self.stdout.write(header)
        self.stdout.write("-" * len(header))
        for t in report.tables:
            kept = f"{t.retention_days}d" if t.retention_days is not None else "ever"
            if not t.grows:
                kept = "fixed"
            self.stdout.write(
                f"{t.table:<44} {t.rows_per_event:>8.3f} {t.bytes_per_event:>9,.0f} {t.bytes_per_day / MB:>8.1f} "
                f"{t.bytes_per_year / GB:>8.2f} {kept:>6} {t.bytes_per_year_with_retention / GB:>10.2f}"
            )
        total = report.total
        self.stdout.write("-" * len(header))
        self.stdout.write(
            f"{'total':<44} {total['rows_per_event']:>8.3f} {total['bytes_per_event']:>9,.0f} "
            f"{total['bytes_per_day'] / MB:>8.1f} {total['bytes_per_year'] / GB:>8.2f} {'':>6} "
            f"{total['bytes_per_year_with_retention'] / GB:>10.2f}"
        )
        self.stdout.write(f"fixed tables (not projected): {total['fixed_bytes'] / MB:.1f} MB in all")
