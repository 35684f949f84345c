"""The demo's bank: camt.053 statements for the demo's platform account, written as its bank would
send them, so a new user has something real to reconcile (issue 16).

* ``demo_funding_import`` (run by ``seed_demo``): the brand's transfer arrives on a statement and
  the funding-reference matcher books it as the brand's top-up — the way production money comes in.
* ``demo_statement_import`` (the dashboard's "Import the demo statement", staff with
  ``reconcile_statement``, demo only): the next statement, with a debit for every payout the demo
  sent that no statement showed yet, plus two lines nobody explained (a bank fee, a credit from an
  unknown sender) — matched at once, so the dashboard shows matched payouts and two exceptions.

Demo code: it knows the demo's account and stitches several apps together, like ``seed_demo``;
it lives in the front door (``web``), above every app it stitches.
"""

import io
from dataclasses import replace
from datetime import date
from decimal import Decimal

from django.utils import timezone

from bench.camt_gen import GenLine, GenStatement, write_camt053
from core.money import minor_to_decimal
from payouts.models import Payout, PayoutStatus
from reconciliation.models import BankStatement, PlatformBankAccount
from reconciliation.services.matching import MatchRunResult, statement_lines_match
from reconciliation.services.statements import statement_import

PLATFORM_IBAN = "NL91ABNA0417164300"
FUNDING_STATEMENT = "DEMO-FUNDING"
STATEMENT_PREFIX = "DEMO-STMT-"
UNEXPLAINED = (
    GenLine(amount=Decimal("2.50"), credit_debit="DBIT", remittance="Account charges", counterparty_name="Demo Bank"),
    GenLine(amount=Decimal("12.00"), credit_debit="CRDT", remittance="Thanks!", counterparty_name="M. Unknown"),
)


def _import(statement: GenStatement, *, actor=None) -> MatchRunResult:
    buffer = io.BytesIO()
    write_camt053(buffer, [statement], message_id=statement.statement_id, created_at=timezone.now())
    statement_import(
        source=buffer.getvalue(), filename=f"{statement.statement_id}.xml", origin="demo", actor=actor, match=False
    )
    return statement_lines_match()


def demo_funding_import(*, funding_reference: str, amount_minor: int, today: date) -> bool:
    """The brand's top-up as the first statement of the demo account. False when it was imported
    before (idempotent by the statement id)."""
    if BankStatement.objects.filter(statement_id=FUNDING_STATEMENT).exists():
        return False
    _import(
        GenStatement(
            statement_id=FUNDING_STATEMENT,
            account_iban=PLATFORM_IBAN,
            currency="EUR",
            opening_balance=Decimal(0),
            booking_date=today,
            lines=[
                GenLine(
                    amount=minor_to_decimal(amount_minor, "EUR"),
                    credit_debit="CRDT",
                    remittance=f"Top-up {funding_reference}",
                    counterparty_name="Sole Shoes SRL",
                    counterparty_iban="IT60X0542811101000000999999",
                    entry_reference=f"{FUNDING_STATEMENT}-1",
                )
            ],
        )
    )
    return True


def demo_statement_import(*, actor) -> tuple[str, int, MatchRunResult]:
    """The demo account's next statement: every payout sent from it that no statement showed yet,
    and the two unexplained lines. Returns (statement id, payouts on it, the matching run)."""
    bank = PlatformBankAccount.objects.get(iban=PLATFORM_IBAN, currency="EUR")
    last = BankStatement.objects.filter(bank_account=bank).order_by("-closing_balance_date", "-pk").first()
    opening = last.closing_balance if last is not None and last.closing_balance is not None else Decimal(0)
    payouts = list(
        Payout.objects.filter(
            bank_debit_line_id__isnull=True,
            status__in=[PayoutStatus.SUBMITTED, PayoutStatus.SETTLED],
            currency="EUR",
            debtor_account_code=bank.ledger_account.code,
        ).order_by("id")
    )
    number = BankStatement.objects.filter(statement_id__startswith=STATEMENT_PREFIX).count() + 1
    statement_id = f"{STATEMENT_PREFIX}{number}"
    lines = [
        GenLine(
            amount=minor_to_decimal(p.amount_minor, p.currency),
            credit_debit="DBIT",
            end_to_end_id=p.end_to_end_id,
            counterparty_name=p.creditor_name,
            remittance=f"JoyBack payout {p.end_to_end_id}",
        )
        for p in payouts
    ]
    lines += UNEXPLAINED
    lines = [replace(line, entry_reference=f"{statement_id}-{i}") for i, line in enumerate(lines, start=1)]
    result = _import(
        GenStatement(
            statement_id=statement_id,
            account_iban=PLATFORM_IBAN,
            currency="EUR",
            opening_balance=opening,
            booking_date=timezone.localdate(),
            electronic_sequence_number=number + 1,
            lines=lines,
        ),
        actor=actor,
    )
    return statement_id, len(payouts), result
