"""The small things real bank files showed (issue 15): a booking time is booked on its local day,
a CreDtTm without offset is the bank's local time, transaction details that do not add up to the
booking are flagged, and the UETR is kept."""

import warnings
from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest

from reconciliation.models import StatementLine
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import platform_bank_account_create, statement_import
from tests.reconciliation.crafted import Booking, books_mirror, camt053, statement

pytestmark = pytest.mark.django_db

UETR = "8A562C67-CA16-48BA-B074-65581BE6F001"


@pytest.fixture
def bank():
    return platform_bank_account_create(name="Operating", iban="NL91ABNA0417164300", currency="EUR")


def _import(data: bytes):
    result = statement_import(source=data, filename="f.xml", origin="command", match=False)
    statement_lines_match()
    return result


def test_a_booking_time_is_booked_on_its_day_in_the_accounts_time_zone(bank):
    result = _import(
        camt053(
            statement(
                [
                    Booking("1.00", reference="A", booked="<DtTm>2014-01-04T23:00:00Z</DtTm>"),
                    Booking("2.00", reference="B", booked="<DtTm>2014-01-04T22:59:00Z</DtTm>"),
                    Booking("3.00", reference="C", booked="<DtTm>2014-01-04T23:30:00</DtTm>"),  # no offset: as written
                ]
            )
        )
    )
    assert list(StatementLine.objects.order_by("sequence").values_list("booking_date", flat=True)) == [
        date(2014, 1, 5),
        date(2014, 1, 4),
        date(2014, 1, 4),
    ]
    books_mirror(result.statements, entries=3)


def test_a_creation_time_without_offset_is_the_banks_local_time_and_warns_nothing(bank):
    data = camt053(statement([Booking("1.00", reference="A")], created="2026-01-15T18:00:00"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = _import(data)
    assert result.statements[0].created_at_bank == datetime(2026, 1, 15, 18, 0, tzinfo=ZoneInfo("Europe/Amsterdam"))


def test_details_that_do_not_add_up_to_the_booking_are_flagged(bank):
    result = _import(
        camt053(
            statement(
                [
                    Booking("10.00", reference="A", details='<Amt Ccy="EUR">9.00</Amt>'),
                    Booking("10.00", reference="B", details='<Amt Ccy="EUR">10.00</Amt>'),
                    Booking(
                        "10.00", reference="C", details='<Amt Ccy="USD">11.20</Amt>'
                    ),  # another currency: not compared
                ]
            )
        )
    )
    flags = list(StatementLine.objects.order_by("sequence").values_list("amount_mismatch", "review_note"))
    assert flags[0] == (True, "The transaction details add up to 9.00, the booking is 10.00: check which is right.")
    assert flags[1:] == [(False, ""), (False, "")]
    books_mirror(result.statements, entries=3)


def test_the_uetr_is_kept_on_the_line_and_in_its_details(bank):
    details = f"<Refs><EndToEndId>NOTPROVIDED</EndToEndId><UETR>{UETR}</UETR></Refs>"
    result = _import(camt053(statement([Booking("4.00", direction="DBIT", reference="A", details=details)])))
    line = StatementLine.objects.get()
    assert (line.end_to_end_id, line.uetr, line.details[0]["uetr"]) == ("", UETR.lower(), UETR.lower())
    books_mirror(result.statements, entries=1)
