from django.core.management.base import BaseCommand, CommandError

from core.audit import audit_seal, audit_verify


class Command(BaseCommand):
    help = (
        "Recompute the hash chain of every audit table (reward, payout, campaign and person events) and "
        "check that the rows the last seal covered are all still there; --seal appends a new seal when "
        "everything verifies. Exits non-zero on any problem."
    )

    def add_arguments(self, parser):
        parser.add_argument("--seal", action="store_true", help="seal the trail as it is now once it verifies")

    def handle(self, *args, seal: bool = False, **options):
        report = audit_verify()
        for table, rows in report.rows.items():
            self.stdout.write(f"  {table}: {rows} rows")
        for problem in report.problems:
            self.stdout.write(f"  [FAIL] {problem}")
        if not report.ok:
            raise CommandError(f"audit trail broken: {len(report.problems)} problem(s)")
        if seal:
            sealed = audit_seal()
            self.stdout.write(f"Sealed as #{sealed.pk} ({sealed.seal_hash}).")
        self.stdout.write("Audit trail verified.")
