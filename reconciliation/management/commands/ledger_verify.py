from django.core.management.base import BaseCommand, CommandError

from core.money import format_minor
from reconciliation.bank_selectors import bank_verify_report
from reconciliation.selectors import ledger_verify_report


class Command(BaseCommand):
    help = (
        "Recompute every balance from the postings, check every entry balances per currency and the "
        "trial balance is zero; on the bank side, that no line stays new past the match sweeps, every "
        "statement stored a line per entry, every statement's closing balance equals the ledger's bank "
        "account on its day, and no match task is stuck. Exits non-zero on any discrepancy."
    )

    def handle(self, *args, **options):
        report = ledger_verify_report()
        out = self.stdout
        out.write(
            f"Checked {report.accounts_checked} accounts, {report.entries_checked} entries, "
            f"{report.postings_checked} postings."
        )
        checks = [
            ("materialised balances equal the sum of postings", report.balance_mismatches),
            ("held amounts equal the pending holds", report.held_mismatches),
            ("every entry balances per currency", report.unbalanced_entries),
            ("every entry has at least two postings", report.short_entries),
            ("no-overdraft accounts are not below their holds", report.overdrawn_accounts),
            ("no entry mixes test mode's books with the platform's real ones", report.mixed_books_entries),
        ]
        for label, problems in checks:
            out.write(f"  [{'ok' if not problems else 'FAIL'}] {label}")
            for problem in problems:
                out.write(f"        {problem}")
        for row in report.trial_balance:
            status = "ok" if row.difference_minor == 0 else "FAIL"
            out.write(
                f"  [{status}] trial balance {row.currency}: debit side "
                f"{format_minor(row.debit_balances_minor, row.currency)}, credit side "
                f"{format_minor(row.credit_balances_minor, row.currency)}, difference {row.difference_minor}"
            )
        bank = bank_verify_report()
        bank_checks = [
            ("no bank line stays new past the match sweeps", bank.stale_new_lines),
            ("every statement stored a line for each entry it did not already know", bank.short_statements),
            (
                "every closing balance equals the ledger's bank account that day (but for lines not yet posted)",
                bank.balance_differences,
            ),
            ("no match task is stuck in the queue", bank.stuck_match_tasks),
        ]
        for label, problems in bank_checks:
            out.write(f"  [{'ok' if not problems else 'FAIL'}] {label}")
            for problem in problems:
                out.write(f"        {problem}")
        if not (report.ok and bank.ok):
            raise CommandError("The books do not verify: see the FAIL lines above.")
        out.write(self.style.SUCCESS("The books verify."))
