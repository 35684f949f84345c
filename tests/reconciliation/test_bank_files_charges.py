"""Bank charges in camt (Chrgs, issue 25): a booking that differs from its transaction details by
the charges the bank reports is not an amount mismatch."""

from decimal import Decimal

import pytest

from reconciliation.models import StatementLine
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import platform_bank_account_create, statement_import
from reconciliation.statements import parse_camt
from tests.reconciliation.crafted import Booking, books_mirror, camt053, statement

pytestmark = pytest.mark.django_db

FEE_V8 = (
    '<Chrgs><TtlChrgsAndTaxAmt Ccy="EUR">0.35</TtlChrgsAndTaxAmt><Rcrd><Amt Ccy="EUR">0.35</Amt>'
    "<CdtDbtInd>DBIT</CdtDbtInd><ChrgInclInd>true</ChrgInclInd></Rcrd></Chrgs>"
)
BILLED_APART = (
    '<Chrgs><Rcrd><Amt Ccy="EUR">0.35</Amt><CdtDbtInd>DBIT</CdtDbtInd><ChrgInclInd>false</ChrgInclInd></Rcrd></Chrgs>'
)


def _file() -> bytes:
    return camt053(
        statement(
            [
                # money in: 100.00 sent, 99.65 booked, the bank's 0.35 fee in the details' Chrgs
                Booking("99.65", reference="A", details=f'<Amt Ccy="EUR">100.00</Amt>{FEE_V8}'),
                # money out: 100.00 paid, 100.35 booked
                Booking("100.35", direction="DBIT", reference="B", details=f'<Amt Ccy="EUR">100.00</Amt>{FEE_V8}'),
                # a charge billed apart explains nothing: still a mismatch
                Booking("99.65", reference="C", details=f'<Amt Ccy="EUR">100.00</Amt>{BILLED_APART}'),
            ]
        )
    )


def test_the_charges_of_each_transaction_are_read():
    (parsed,) = parse_camt(_file())
    entries = list(parsed.entries)
    assert [e.details[0].charges for e in entries] == [Decimal("0.35"), Decimal("0.35"), None]
    assert [e.details_charges for e in entries] == [Decimal("0.35"), Decimal("0.35"), Decimal(0)]


def test_a_booking_that_differs_from_its_details_by_the_charges_is_not_flagged():
    platform_bank_account_create(name="Operating", iban="NL91ABNA0417164300", currency="EUR")
    result = statement_import(source=_file(), filename="f.xml", origin="command", match=False)
    statement_lines_match()
    flags = list(StatementLine.objects.order_by("sequence").values_list("amount_mismatch", flat=True))
    assert flags == [False, False, True]
    books_mirror(result.statements, entries=3)
