from django.core.management.base import BaseCommand
from django.utils import timezone

from core.retention import retention_purge


class Command(BaseCommand):
    help = (
        "Pseudonymise or delete data past its retention period (RETENTION_*_DAYS, "
        "PRIVACY_PAYOUT_NAME_KEEP_DAYS): trigger events' personal fields, inbound webhook bodies, "
        "finished task records, idempotency records, kept payout names of erased people, outbound "
        "webhook events and deliveries, notices and their deliveries. Never ledger, rewards, payout "
        "amounts or audit rows. --dry-run only counts."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="count the rows each kind would touch; change nothing"
        )
        parser.add_argument(
            "--max-seconds",
            type=float,
            default=0,
            help="start no batch after this many seconds (default 0: run until every kind is done, "
            "e.g. to catch up a backlog; the daily task uses RETENTION_MAX_SECONDS)",
        )

    def handle(self, *args, dry_run: bool = False, max_seconds: float = 0, **options):
        report = retention_purge(now=timezone.now(), dry_run=dry_run, max_seconds=max_seconds)
        verb = "would touch" if dry_run else "touched"
        for kind, count in report.counts.items():
            self.stdout.write(f"  {kind}: {verb} {count} rows")
        if report.unfinished:
            self.stdout.write(f"Out of time; left for the next run: {', '.join(report.unfinished)}")
        self.stdout.write(f"{'Dry run: nothing changed' if dry_run else 'Retention purge done'} ({report.total} rows).")
