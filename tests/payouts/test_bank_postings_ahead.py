"""A payout its rail settled before the bank's statement shows the debit is a timing difference of
the closing-balance check, named as such, not a discrepancy that fails ``ledger_verify`` (issue 25)."""

import pytest
from django.core.management import call_command

from payouts.models import PayoutStatus
from payouts.services import payout_execute
from reconciliation.bank_selectors import statement_balance_checks
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import statement_import
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import DEBTOR_IBAN, bank_minor, iban
from tests.payouts.test_payout_execute import one_payout
from tests.reconciliation.crafted import Booking, camt053, statement

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

ACCOUNT = f"<IBAN>{DEBTOR_IBAN}</IBAN>"


def _import(bookings: list[Booking], *, statement_id: str, opening: str) -> None:
    data = camt053(statement(bookings, statement_id=statement_id, account=ACCOUNT, opening=opening))
    statement_import(source=data, filename=f"{statement_id}.xml", origin="command", match=False)
    statement_lines_match()


def test_a_payout_settled_by_its_rail_before_the_statement_is_explained_then_matched(
    sandbox, debtor, brand, campaign, capsys
):
    # Given a payout the instant rail settled: the ledger's bank account is 5.00 lower
    payout = one_payout(brand, account_iban=iban())
    payout_execute(payout_id=payout.pk)
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.SETTLED and bank_minor(debtor) == -500
    # When the day's statement arrives without the debit (the bank books it tomorrow)
    _import([], statement_id="STMT-D", opening="0.00")
    # Then the check names the 5.00 the rail posted ahead of the bank, and the books verify
    (check,) = statement_balance_checks()
    assert (check.ahead, check.difference, check.unexplained) == (-5, 0, 0)
    call_command("ledger_verify")
    # When the next statement books the debit, it settles nothing twice and nothing is ahead
    debit = Booking("5.00", direction="DBIT", details=f"<Refs><EndToEndId>{payout.end_to_end_id}</EndToEndId></Refs>")
    _import([debit], statement_id="STMT-D1", opening="0.00")
    payout.refresh_from_db()
    assert payout.bank_debit_line_id is not None and bank_minor(debtor) == -500
    (check,) = statement_balance_checks()
    assert (check.ahead, check.unexplained) == (0, 0)
    call_command("ledger_verify")
    assert "The books verify." in capsys.readouterr().out
