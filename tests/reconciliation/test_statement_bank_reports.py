"""One booking reported twice (camt.054 advice, then the camt.053 statement, or the other way
round) is posted once; what cannot be told apart is held for a person; each statement's closing
balance is held against the ledger's bank account (issue 25)."""

import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from campaigns.services.brands import brand_create, brand_funds_account
from core.exceptions import InvalidInput, InvalidTransition
from reconciliation.bank_selectors import open_exceptions, statement_balance_checks
from reconciliation.models import ReconciliationAction, StatementLine, StatementLineStatus
from reconciliation.selectors import account_balance
from reconciliation.services.bank_reports import statement_line_report_decide
from reconciliation.services.matching import statement_line_duplicate_decide, statement_lines_match, suspense_account
from reconciliation.services.statements import platform_bank_account_create, statement_import
from tests.reconciliation.crafted import Booking, camt053, page, statement

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

OTHER_IBAN = "DE89370400440532013000"
NS054 = "urn:iso:std:iso:20022:tech:xsd:camt.054.001.08"
BRAND = "<RltdPties><Dbtr><Pty><Nm>Brand BV</Nm></Pty></Dbtr></RltdPties>"
CREATOR = "<RltdPties><Cdtr><Pty><Nm>Creator One</Nm></Pty></Cdtr></RltdPties>"


@pytest.fixture
def bank():
    return platform_bank_account_create(name="Operating", iban="NL91ABNA0417164300", currency="EUR")


def camt054(
    bookings: list[Booking],
    *,
    notification_id: str = "NTF-1",
    message_id: str = "N-MSG-1",
    iban: str = "NL91ABNA0417164300",
) -> bytes:
    """An intraday notification: the same entries as a statement, no balances."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Document xmlns="{NS054}"><BkToCstmrDbtCdtNtfctn>'
        f"<GrpHdr><MsgId>{message_id}</MsgId><CreDtTm>2026-01-15T11:00:00+01:00</CreDtTm></GrpHdr>"
        f"<Ntfctn><Id>{notification_id}</Id><CreDtTm>2026-01-15T11:00:00+01:00</CreDtTm>"
        f"<Acct><Id><IBAN>{iban}</IBAN></Id><Ccy>EUR</Ccy></Acct>"
        f"{''.join(b.xml() for b in bookings)}</Ntfctn></BkToCstmrDbtCdtNtfctn></Document>"
    ).encode()


def _import(data: bytes, name: str):
    result = statement_import(source=data, filename=name, origin="command", match=False)
    statement_lines_match()
    return result


def _bank_minor(bank) -> int:
    return account_balance(account_id=bank.ledger_account_id).posted_minor


def _verify_fails(capsys) -> str:
    with pytest.raises(CommandError):
        call_command("ledger_verify")
    return capsys.readouterr().out


TOPUP = Booking("3000.00", details=f"<Refs><EndToEndId>TOPUP-7</EndToEndId></Refs>{BRAND}")
PAYOUT = Booking("25.00", direction="DBIT", details=f"<Refs><EndToEndId>PAY-7</EndToEndId></Refs>{CREATOR}")
# Neither a bank nor a payment reference: told by amount, side, day and counterparty alone.
TOPUP_BARE = Booking("3000.00", details=BRAND)
PAYOUT_BARE = Booking("25.00", direction="DBIT", details=CREATOR)


def _with_reference(booking: Booking, reference: str | None) -> Booking:
    return Booking(booking.amount, booking.direction, reference, booking.booked, booking.details)


@pytest.mark.parametrize(
    ("booking", "advice_ref", "statement_ref"),
    [
        (TOPUP, "N-REF-1", "S-REF-9"),  # the bank's references differ
        (TOPUP_BARE, None, None),  # no reference at all
        (PAYOUT, "N-REF-2", "S-REF-8"),
        (PAYOUT_BARE, None, None),
    ],
    ids=["topup-refs-differ", "topup-no-refs", "payout-refs-differ", "payout-no-refs"],
)
def test_a_booking_notified_then_on_the_statement_is_posted_once(bank, booking, advice_ref, statement_ref, capsys):
    signed = 300_000 if booking.direction == "CRDT" else -2_500
    # Given the booking notified intraday (camt.054) and posted
    _import(camt054([_with_reference(booking, advice_ref)]), "n.xml")
    assert _bank_minor(bank) == signed
    # When the day's statement (camt.053) reports it again
    result = _import(camt053(statement([_with_reference(booking, statement_ref)], opening="0.00")), "s.xml")
    # Then it is stored as a confirmation of the notified line, and nothing more is posted
    first, again = StatementLine.objects.order_by("pk")
    assert (again.status, again.confirms_id) == (StatementLineStatus.CONFIRMATION, first.pk)
    assert (result.new_lines, result.duplicate_lines) == (0, 1)
    assert _bank_minor(bank) == signed
    # And the statement's closing balance agrees with the ledger's bank account
    (check,) = statement_balance_checks()
    assert (check.difference, check.unexplained) == (0, 0)
    call_command("ledger_verify")
    assert "The books verify." in capsys.readouterr().out


@pytest.mark.parametrize("booking", [TOPUP, PAYOUT], ids=["topup", "payout"])
def test_a_third_report_under_the_second_ones_reference_posts_nothing(bank, booking):
    signed = 300_000 if booking.direction == "CRDT" else -2_500
    # Given a booking notified (camt.054) and confirmed by the statement under another reference
    _import(camt054([_with_reference(booking, "N-REF-1")]), "n.xml")
    _import(camt053(statement([_with_reference(booking, "S-REF-9")])), "s.xml")
    # When the bank sends that statement again under another Stmt/Id
    again = camt053(statement([_with_reference(booking, "S-REF-9")], statement_id="STMT-1-RESENT"), message_id="M2")
    _import(again, "s-again.xml")
    # Then the third report confirms the line that holds the booking, and nothing more is posted
    first, *later = StatementLine.objects.order_by("pk")
    assert [(line.status, line.confirms_id) for line in later] == [("confirmation", first.pk)] * 2
    assert _bank_minor(bank) == signed


def test_the_statement_first_and_the_notification_later_posts_once(bank):
    _import(camt053(statement([_with_reference(TOPUP, "S-REF-1")])), "s.xml")
    result = _import(camt054([_with_reference(TOPUP, "N-REF-1")]), "n.xml")
    first, again = StatementLine.objects.order_by("pk")
    assert (first.statement.kind, again.status, again.confirms_id) == ("camt053", "confirmation", first.pk)
    assert result.duplicate_lines == 1 and _bank_minor(bank) == 300_000
    # The later report keeps no counterparty of its own: the confirmed line holds it
    assert (again.counterparty_name, first.counterparty_name) == ("", "Brand BV")


@pytest.mark.parametrize(
    "other",
    [
        Booking("3000.00", booked="<Dt>2026-01-16</Dt>", details=BRAND),  # another day
        Booking("3000.00", details="<RltdPties><Dbtr><Pty><Nm>Other Brand SpA</Nm></Pty></Dbtr></RltdPties>"),
        Booking("3000.00", details=f"<Refs><EndToEndId>TOPUP-8</EndToEndId></Refs>{BRAND}"),  # another payment
    ],
    ids=["other-day", "other-counterparty", "other-end-to-end-id"],
)
def test_a_different_booking_of_the_same_amount_is_posted(bank, other):
    _import(camt054([TOPUP]), "n.xml")
    _import(camt053(statement([TOPUP, other])), "s.xml")
    assert (
        not StatementLine.objects.filter(status__in=["confirmation", "ambiguous"])
        .exclude(end_to_end_id="TOPUP-7")
        .exists()
    )
    assert StatementLine.objects.exclude(status="confirmation").count() == 2
    assert _bank_minor(bank) == 600_000


def test_look_alikes_in_other_numbers_are_held_for_a_person_and_never_posted_twice(bank, admin_user, capsys):
    # Given one notified 3,000.00 without references, then a statement with two of them
    _import(camt054([TOPUP_BARE]), "n.xml")
    result = _import(camt053(statement([TOPUP_BARE, TOPUP_BARE])), "s.xml")
    # Then both statement lines are held: which one is the notified booking nobody can say
    held = list(StatementLine.objects.filter(status=StatementLineStatus.AMBIGUOUS).order_by("pk"))
    assert len(held) == 2 and result.ambiguous_lines == 2
    assert _bank_minor(bank) == 300_000
    exceptions = {e.kind: e for e in open_exceptions()}
    assert exceptions["ambiguous_reports"].count == 2
    # The statement books 6,000.00, the ledger holds 3,000.00 and 6,000.00 are held: until someone
    # decides, the books do not verify
    (check,) = statement_balance_checks()
    assert (check.difference, check.unposted, check.unexplained) == (3000, 6000, -3000)
    assert "6000.00 in lines not yet posted or held, -3000.00 unexplained" in _verify_fails(capsys)
    # When a person says the first repeats the notification and the second is a booking of its own
    notified = StatementLine.objects.get(statement__kind="camt054")
    statement_line_report_decide(line_id=held[0].pk, actor=admin_user, confirms_line_id=notified.pk, reason="same")
    # (the notification reports one booking: the second line cannot confirm it too)
    with pytest.raises(InvalidInput) as refused:
        statement_line_report_decide(line_id=held[1].pk, actor=admin_user, confirms_line_id=notified.pk, reason="too")
    assert refused.value.code == "booking_already_reported"
    statement_line_report_decide(line_id=held[1].pk, actor=admin_user, confirms_line_id=None, reason="second one")
    statement_lines_match()
    # Then the books hold the two bookings once each, and they verify
    assert _bank_minor(bank) == 600_000
    (check,) = statement_balance_checks()
    assert check.unexplained == 0
    call_command("ledger_verify")


def test_a_doubled_booking_fails_the_closing_balance_check(bank, capsys):
    # Given a clean import: the check passes
    _import(camt054([_with_reference(TOPUP, "N-REF-1")]), "n.xml")
    _import(camt053(statement([_with_reference(TOPUP, "S-REF-9")], statement_id="STMT-15"), message_id="M2"), "s.xml")
    call_command("ledger_verify")
    assert "[ok] every closing balance equals the ledger" in capsys.readouterr().out
    # When the confirmation is posted anyway, as the old importer did
    StatementLine.objects.filter(status="confirmation").update(status="new", confirms=None)
    statement_lines_match()
    assert _bank_minor(bank) == 600_000
    # Then ledger_verify fails naming the statement, the day and the difference
    out = _verify_fails(capsys)
    assert "[FAIL] every closing balance equals the ledger" in out
    assert "on 2026-01-15 (statement STMT-15" in out and "-3000.00 unexplained" in out
    exceptions = {e.kind: e for e in open_exceptions()}
    assert exceptions["closing_balance_vs_ledger"].count == 1


def test_a_statement_paged_over_two_messages_and_a_second_run_the_same_day_check_out(bank, capsys):
    page1 = camt053(
        statement([Booking("10.00", reference="A")], opening="100.00", closing=None, pagination=page(1, last=False)),
        message_id="P1",
    )
    page2 = camt053(
        statement([Booking("4.00", direction="DBIT", reference="C")], opening=None, closing="106.00"),
        message_id="P2",
        message_pagination=page(2, last=True),
    )
    # A later statement for the same day: its closing balance is the day's, the earlier one's is not
    evening = camt053(
        statement(
            [Booking("1.00", reference="D")],
            statement_id="STMT-2",
            opening="106.00",
            created="2026-01-15T21:00:00+01:00",
        ),
        message_id="P3",
    )
    for n, data in enumerate([page1, page2, evening]):
        _import(data, f"{n}.xml")
    checks = statement_balance_checks()
    assert [(c.statement.statement_id, c.closing_balance, c.unexplained) for c in checks] == [("STMT-2", 107, 0)]
    call_command("ledger_verify")
    assert "[ok] every closing balance equals the ledger" in capsys.readouterr().out


def test_a_notification_the_statement_did_not_confirm_is_an_open_exception(bank, capsys):
    _import(camt054([TOPUP]), "n.xml")
    _import(camt053(statement([], opening="0.00")), "s.xml")
    exceptions = {e.kind: e for e in open_exceptions()}
    assert exceptions["unconfirmed_advices"].count == 1
    # The bank did not book it: the closing balance says so, and the books do not verify
    assert "-3000.00 unexplained" in _verify_fails(capsys)


def _import_queries(data: bytes, name: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        statement_import(source=data, filename=name, origin="command", match=False)
    return len(queries.captured_queries)


def _day(n: int) -> list[Booking]:
    return [Booking(f"{k}.00", details=f"<Refs><EndToEndId>E-{k}</EndToEndId></Refs>{BRAND}") for k in range(1, n + 1)]


def test_importing_reports_takes_as_many_queries_whatever_the_size(bank):
    """Set-wise: an advice and the statement confirming it cost the same queries for 3 lines as
    for 300 (two accounts, so that the two runs do not meet)."""
    platform_bank_account_create(name="Second", iban=OTHER_IBAN, currency="EUR")
    counts = []
    for size, iban in ((3, bank.iban), (300, OTHER_IBAN)):
        advice = _import_queries(camt054(_day(size), iban=iban), f"n{size}.xml")
        account = f"<IBAN>{iban}</IBAN>"
        confirming = _import_queries(camt053(statement(_day(size), account=account)), f"s{size}.xml")
        counts.append((advice, confirming))
    assert StatementLine.objects.filter(status="confirmation").count() == 303
    assert counts[0] == counts[1]


def test_a_brand_top_up_notified_then_on_the_statement_credits_the_brand_once(bank, capsys):
    brand = brand_create(name="Gelato Bros")
    details = f"{BRAND}<RmtInf><Ustrd>Top-up {brand.funding_reference}</Ustrd></RmtInf>"
    _import(camt054([Booking("3000.00", reference="N-REF-1", details=details)]), "n.xml")
    _import(camt053(statement([Booking("3000.00", reference="S-REF-9", details=details)])), "s.xml")
    funds = brand_funds_account(brand=brand, currency="EUR")
    assert account_balance(account_id=funds.pk).posted_minor == 300_000
    assert _bank_minor(bank) == 300_000
    assert StatementLine.objects.filter(status="matched").count() == 1
    call_command("ledger_verify")
    assert "The books verify." in capsys.readouterr().out


def test_ops_settle_an_ambiguous_line_from_its_explain_page(bank, admin_client):
    _import(camt054([TOPUP_BARE]), "n.xml")
    _import(camt053(statement([TOPUP_BARE, TOPUP_BARE])), "s.xml")
    notified = StatementLine.objects.get(statement__kind="camt054")
    first, second = StatementLine.objects.filter(status="ambiguous").order_by("pk")
    url = reverse("admin:reconciliation_line_explain", args=[first.pk])
    admin_client.post(url, {"action": "reported_before", "target_id": str(notified.pk), "reason": "same booking"})
    first.refresh_from_db()
    assert (first.status, first.confirms_id) == ("confirmation", notified.pk)
    # Without a reason nothing changes
    url = reverse("admin:reconciliation_line_explain", args=[second.pk])
    admin_client.post(url, {"action": "own_booking", "reason": ""})
    second.refresh_from_db()
    assert second.status == "ambiguous"
    admin_client.post(url, {"action": "own_booking", "reason": "a second top-up"})
    second.refresh_from_db()
    assert second.status == "new"
    assert ReconciliationAction.objects.filter(line__in=[first, second]).count() == 2


def _match_queries() -> int:
    with CaptureQueriesContext(connection) as queries:
        statement_lines_match()
    return len(queries.captured_queries)


def _mixed_day(n: int) -> list[Booking]:
    """Credits and debits naming payments nobody knows: each matcher looks, each line is parked."""
    return [
        Booking(
            f"{k}.00", direction="DBIT" if k % 2 else "CRDT", details=f"<Refs><EndToEndId>M-{k}</EndToEndId></Refs>"
        )
        for k in range(1, n + 1)
    ]


def test_matching_a_statement_takes_as_many_queries_whatever_its_size(bank):
    """Set-wise matching: 300 lines cost the queries of 3 (a 50,000-line file must not run one
    query per line before or while it is matched)."""
    platform_bank_account_create(name="Second", iban=OTHER_IBAN, currency="EUR")
    suspense_account("EUR")  # made once, by whichever run parks a line first
    counts = []
    for size, iban in ((3, bank.iban), (300, OTHER_IBAN)):
        account = f"<IBAN>{iban}</IBAN>"
        statement_import(
            source=camt053(statement(_mixed_day(size), account=account)),
            filename=f"m{size}.xml",
            origin="command",
            match=False,
        )
        counts.append(_match_queries())
    assert StatementLine.objects.filter(status="new").count() == 0
    assert counts[0] == counts[1]


def test_a_pending_entry_reported_again_is_skipped_and_the_file_still_imports(bank):
    # Given an advice with a pending entry
    pending = Booking("40.00", reference="P-1", status="PDNG", details=BRAND)
    _import(camt054([pending]), "n1.xml")
    # When the next advice repeats it beside a new booking
    result = _import(camt054([pending, TOPUP], notification_id="NTF-2", message_id="N-MSG-2"), "n2.xml")
    # Then the file is imported: the pending entry is known, the booking is posted
    assert result.new_lines == 1
    assert StatementLine.objects.filter(bank_status="PDNG").count() == 1
    assert _bank_minor(bank) == 300_000


@pytest.mark.django_db(transaction=True)
def test_imports_naming_accounts_in_opposite_orders_both_land(bank):
    """Imports take turns on one lock taken first: files naming two accounts in opposite orders,
    imported at once, cannot wait on each other."""
    platform_bank_account_create(name="Second", iban=OTHER_IBAN, currency="EUR")
    one = f"<IBAN>{bank.iban}</IBAN>"
    two = f"<IBAN>{OTHER_IBAN}</IBAN>"
    files = [
        camt053(statement(_day(3), statement_id="A1", account=one), statement(_day(3), statement_id="B1", account=two)),
        camt053(
            statement(_day(3), statement_id="B2", account=two),
            statement(_day(3), statement_id="A2", account=one),
            message_id="MSG-2",
        ),
    ]
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run(data: bytes, name: str) -> None:
        try:
            barrier.wait(timeout=10)
            statement_import(source=data, filename=name, origin="command", match=False)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(data, f"f{n}.xml")) for n, data in enumerate(files)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert StatementLine.objects.count() == 12


def test_a_repeat_in_one_file_that_another_report_confirms_cannot_be_set_aside(bank, admin_user):
    # Given an advice showing one booking twice (the second flagged), and the statement showing both
    twice = [_with_reference(TOPUP, "N-1"), _with_reference(TOPUP, "N-1")]
    _import(camt054(twice), "n.xml")
    _import(camt053(statement(twice)), "s.xml")
    flagged = StatementLine.objects.get(statement__kind="camt054", possible_duplicate=True)
    assert flagged.confirmations.exists()
    # When staff try to set it aside as a duplicate, it is refused: the bank booked it twice
    with pytest.raises(InvalidTransition) as refused:
        statement_line_duplicate_decide(line_id=flagged.pk, actor=admin_user, duplicate=True, reason="looks twice")
    assert refused.value.code == "booking_confirmed"
    assert _bank_minor(bank) == 600_000
