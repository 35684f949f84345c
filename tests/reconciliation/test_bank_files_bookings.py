"""No booking of a bank file is lost or counted twice (issue 15): shared references, paged
statements, statements a file repeats, and bookings an earlier file already brought."""

from decimal import Decimal

import pytest

from core.exceptions import Conflict, InvalidTransition
from reconciliation.models import BankStatement, StatementImport, StatementLine, StatementLineStatus
from reconciliation.selectors import account_balance
from reconciliation.services.matching import statement_line_duplicate_decide, statement_lines_match
from reconciliation.services.statements import platform_bank_account_create, statement_import
from tests.reconciliation.crafted import Booking, books_mirror, camt053, page, statement

pytestmark = pytest.mark.django_db


@pytest.fixture
def bank():
    return platform_bank_account_create(name="Operating", iban="NL91ABNA0417164300", currency="EUR")


def _import(data: bytes, name: str = "f.xml"):
    return statement_import(source=data, filename=name, origin="command", match=False)


def test_two_bookings_sharing_a_bank_reference_are_both_stored(bank):
    # Given one file where the bank gave two bookings of one order the same AcctSvcrRef
    data = camt053(statement([Booking("11.00", reference="REF-7"), Booking("20.00", reference="REF-7")]))
    # When it is imported and matched
    result = _import(data)
    statement_lines_match()
    # Then both are lines, neither is a suspected duplicate, and the books hold 31.00
    assert (result.new_lines, result.duplicate_lines) == (2, 0)
    assert sorted(StatementLine.objects.values_list("amount", "possible_duplicate")) == [
        (Decimal("11.00000"), False),
        (Decimal("20.00000"), False),
    ]
    assert result.statements[0].balance_difference == 0
    books_mirror(result.statements, entries=2)


def test_the_same_booking_twice_in_one_file_is_stored_and_flagged(bank):
    data = camt053(statement([Booking("5.00", reference="REF-1"), Booking("5.00", reference="REF-1")]))
    result = _import(data)
    statement_lines_match()
    first, second = StatementLine.objects.order_by("sequence")
    assert (first.possible_duplicate, second.possible_duplicate) == (False, True)
    assert "line 1" in second.review_note
    books_mirror(result.statements, entries=2)


def test_a_booking_an_earlier_file_brought_is_known_and_a_second_one_is_new(bank):
    # Given a notification with one booking, then the day's statement with it and an identical twin
    _import(camt053(statement([Booking("5.00", reference="REF-1")], statement_id="NTF-1")), "a.xml")
    later = camt053(
        statement([Booking("5.00", reference="REF-1"), Booking("5.00", reference="REF-1")], statement_id="STMT-2"),
        message_id="MSG-2",
    )
    result = _import(later, "b.xml")
    # Then the first confirms the known booking (stored, posting nothing), the twin holds a
    # booking of its own (flagged), and the statement accounts for both
    assert (result.new_lines, result.duplicate_lines) == (1, 1)
    stmt = result.statements[0]
    assert (stmt.entry_count, stmt.known_count, stmt.lines.count()) == (2, 0, 2)
    confirmation, twin = stmt.lines.order_by("sequence")
    assert (confirmation.status, confirmation.confirms.statement.statement_id) == ("confirmation", "NTF-1")
    assert (twin.status, twin.possible_duplicate) == ("new", True)


def test_a_statement_paged_over_two_messages_adds_up_to_one_statement(bank):
    page1 = camt053(
        statement([Booking("10.00", reference="A"), Booking("1.00", reference="B")], opening="100.00", closing=None),
        message_id="MSG-P1",
        message_pagination=page(1, last=False),
    )
    page2 = camt053(
        statement([Booking("4.00", direction="DBIT", reference="C")], opening=None, closing="107.00"),
        message_id="MSG-P2",
        message_pagination=page(2, last=True),
    )
    first = _import(page1, "p1.xml")
    second = _import(page2, "p2.xml")
    statement_lines_match()
    assert second.skipped_statements == [] and second.new_lines == 1
    pages = list(BankStatement.objects.order_by("page_number"))
    assert [(p.page_number, p.last_page, p.balance_difference) for p in pages] == [
        (1, False, None),
        (2, True, Decimal("0")),
    ]
    books_mirror(first.statements + second.statements, entries=3)


def test_pages_arriving_last_page_first_are_checked_once_complete(bank):
    page2 = camt053(
        statement([Booking("4.00", reference="C")], opening=None, closing="99.00", pagination=page(2, last=True))
    )
    page1 = camt053(
        statement([Booking("5.00", reference="A")], opening="100.00", closing=None, pagination=page(1, last=False)),
        message_id="MSG-2",
    )
    _import(page2, "p2.xml")
    assert BankStatement.objects.get().balance_difference is None
    _import(page1, "p1.xml")
    # 100 + 5 + 4 = 109, the bank says 99: the whole statement is flagged, on the page with the close
    assert BankStatement.objects.get(page_number=2).balance_difference == Decimal("-10.00")


def test_a_statement_a_file_repeats_is_stored_as_a_second_part_with_flagged_bookings(bank):
    block = statement([Booking("3.00", reference="R1"), Booking("2.00")])
    result = _import(camt053(block, block))
    statement_lines_match()
    assert [(s.statement_id, s.part) for s in result.statements] == [("STMT-1", 1), ("STMT-1", 2)]
    assert result.skipped_statements == []
    lines = StatementLine.objects.order_by("statement__part", "sequence")
    # Both repeated bookings are apparent duplicates: the one without a reference by its position
    # in the page (the repeat's part is not part of its identity, or 2.00 would count twice unflagged).
    assert [line.possible_duplicate for line in lines] == [False, False, True, True]
    books_mirror(result.statements, entries=4)


def test_the_same_page_in_a_new_file_is_skipped_when_equal_and_refused_when_not(bank):
    _import(camt053(statement([Booking("3.00", reference="R1")])), "a.xml")
    again = _import(camt053(statement([Booking("3.00", reference="R1")]), message_id="MSG-2"), "b.xml")
    assert again.skipped_statements == ["STMT-1"] and again.new_lines == 0
    changed = camt053(statement([Booking("3.00", reference="R1"), Booking("8.00")]), message_id="MSG-3")
    with pytest.raises(Conflict) as caught:
        _import(changed, "c.xml")
    assert caught.value.code == "statement_conflict"
    assert (StatementImport.objects.count(), StatementLine.objects.count()) == (2, 1)


def test_a_person_confirms_or_sets_aside_a_possible_duplicate(bank, admin_user):
    data = camt053(
        statement([Booking("5.00", reference="R"), Booking("5.00", reference="R"), Booking("5.00", reference="R")])
    )
    result = _import(data)
    statement_lines_match()
    first, second, third = StatementLine.objects.order_by("sequence")
    statement_line_duplicate_decide(line_id=second.pk, actor=admin_user, duplicate=False)
    statement_line_duplicate_decide(line_id=third.pk, actor=admin_user, duplicate=True, reason="bank sent it twice")
    second.refresh_from_db()
    third.refresh_from_db()
    assert (second.possible_duplicate, second.status) == (False, StatementLineStatus.UNMATCHED)
    assert (third.possible_duplicate, third.status) == (False, StatementLineStatus.IGNORED)
    # The set-aside booking left the books: the bank account holds the two real ones.
    assert account_balance(account_id=bank.ledger_account_id).posted_minor == 1000
    assert result.possible_duplicates == 2
    with pytest.raises(InvalidTransition):
        statement_line_duplicate_decide(line_id=first.pk, actor=admin_user, duplicate=True, reason="x")


def test_a_page_in_its_own_file_repeating_a_booking_of_an_earlier_page_is_stored_and_flagged(bank):
    """Page 2, delivered in a later file, holds a second booking with page 1's reference, amount and
    day: it is a further booking of the statement (stored, flagged), not 'known from an earlier file'."""
    page1 = camt053(
        statement([Booking("5.00", reference="R")], opening="0.00", closing=None, pagination=page(1, last=False)),
        message_id="MSG-A",
    )
    page2 = camt053(
        statement([Booking("5.00", reference="R")], opening=None, closing="10.00", pagination=page(2, last=True)),
        message_id="MSG-B",
    )
    first = _import(page1, "p1.xml")
    second = _import(page2, "p2.xml")
    statement_lines_match()
    assert second.new_lines == 1
    lines = list(StatementLine.objects.order_by("statement__page_number"))
    assert [line.possible_duplicate for line in lines] == [False, True]
    books_mirror(first.statements + second.statements, entries=2)
