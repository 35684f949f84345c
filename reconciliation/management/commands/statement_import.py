from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ApplicationError
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import statement_import
from reconciliation.statements.formats import statement_formats


class Command(BaseCommand):
    help = "Import a bank statement file (camt.053 / camt.054, or a bank's CSV export) and match its lines."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument(
            "--format",
            default="",
            dest="statement_format",
            help=f"Statement format ({', '.join(f.name for f in statement_formats())}); default: the account's, "
            "else camt as the file says.",
        )
        parser.add_argument(
            "--account", type=int, default=None, help="Platform bank account id; needed for a CSV export."
        )
        parser.add_argument("--no-match", action="store_true", help="Import only; match later.")
        parser.add_argument("--dry-run-match", action="store_true", help="Show what matching would do.")

    def handle(
        self,
        *args,
        path: Path,
        statement_format: str,
        account: int | None,
        no_match: bool,
        dry_run_match: bool,
        **options,
    ):
        if not path.is_file():
            raise CommandError(f"No file at {path}.")
        try:
            result = statement_import(
                source=path,
                filename=path.name,
                origin="command",
                statement_format=statement_format,
                bank_account_id=account,
                match=False,
            )
        except ApplicationError as exc:
            raise CommandError(f"{exc.code}: {exc.message} — nothing was imported.") from exc
        if result.replayed:
            self.stdout.write(
                f"{path.name} was imported before (import #{result.statement_import.pk}); nothing changed."
            )
            return
        self.stdout.write(
            f"Imported {len(result.statements)} statement(s), {result.new_lines} new line(s), "
            f"{result.duplicate_lines} already known; skipped statements: {result.skipped_statements or 'none'}."
        )
        if result.possible_duplicates:
            self.stdout.write(
                self.style.WARNING(
                    f"  {result.possible_duplicates} line(s) repeat another booking of this file: stored and "
                    "flagged for a person to confirm."
                )
            )
        for statement in result.balance_mismatches:
            self.stdout.write(self.style.WARNING(f"  Statement {statement.statement_id}: {statement.balance_problem}."))
        if no_match:
            return
        ids = [line.pk for s in result.statements for line in s.lines.all().only("pk")]
        run = statement_lines_match(line_ids=ids, dry_run=dry_run_match)
        label = "Would match" if dry_run_match else "Matched"
        self.stdout.write(
            f"{label} {run.matched_total} line(s) {dict(run.matched)}; suggested {run.suggested}; "
            f"unmatched (suspense) {run.unmatched}."
        )
