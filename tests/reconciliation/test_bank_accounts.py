"""Platform accounts a bank identifies without an IBAN, and one IBAN held in several currencies
(issue 15): both could not be registered, so their statements could never be imported."""

from decimal import Decimal

import pytest

from core.exceptions import InvalidInput
from reconciliation.models import PlatformBankAccount
from reconciliation.selectors import account_balance
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import platform_bank_account_create, statement_import
from tests.reconciliation.crafted import Booking, balance, books_mirror, camt053, statement

pytestmark = pytest.mark.django_db

IBAN = "SE4550000000058398257466"
USD_ACCOUNT = "<Othr><Id>8833001122</Id><SchmeNm><Prtry>BBAN</Prtry></SchmeNm></Othr>"


def _import(data: bytes):
    return statement_import(source=data, filename="f.xml", origin="command", match=False)


def test_an_account_identified_by_othr_id_imports_its_statement():
    account = platform_bank_account_create(name="USD", other_id="8833001122", other_scheme="BBAN", currency="USD")
    data = camt053(
        statement([Booking("100.00", currency="USD", reference="U1")], account=USD_ACCOUNT, currency="USD").replace(
            'Ccy="EUR"', 'Ccy="USD"'
        )
    )
    result = _import(data)
    statement_lines_match()
    assert account.ledger_account.code == "platform:bank:othr:8833001122:USD" and str(account).startswith("USD (8833")
    assert result.statements[0].bank_account == account
    books_mirror(result.statements, entries=1)


def test_one_iban_in_two_currencies_has_a_ledger_account_each():
    eur = platform_bank_account_create(name="Main", iban=IBAN, currency="EUR")
    sek = platform_bank_account_create(name="Main", iban=IBAN, currency="SEK")
    assert eur.ledger_account_id != sek.ledger_account_id
    assert platform_bank_account_create(name="Main", iban=IBAN, currency="SEK") == sek  # idempotent
    account = f"<IBAN>{IBAN}</IBAN>"
    data = camt053(
        statement([Booking("5.00", reference="E1")], statement_id="S-EUR", account=account, currency="EUR"),
        statement(
            [Booking("70.00", currency="SEK", reference="K1")], statement_id="S-SEK", account=account, currency="SEK"
        ).replace('<Amt Ccy="EUR">', '<Amt Ccy="SEK">'),
    )
    result = _import(data)
    statement_lines_match()
    assert [(s.statement_id, s.bank_account.currency) for s in result.statements] == [
        ("S-EUR", "EUR"),
        ("S-SEK", "SEK"),
    ]
    assert account_balance(account_id=eur.ledger_account_id).posted_minor == 500
    assert account_balance(account_id=sek.ledger_account_id).posted_minor == 7000
    books_mirror(result.statements, entries=2)


def test_a_statement_without_currency_for_a_two_currency_account_is_refused():
    platform_bank_account_create(name="Main", iban=IBAN, currency="EUR")
    platform_bank_account_create(name="Main", iban=IBAN, currency="SEK")
    data = camt053(statement([], account=f"<IBAN>{IBAN}</IBAN>", currency=None, opening=None, closing=None))
    with pytest.raises(InvalidInput) as caught:
        _import(data)
    assert caught.value.code == "currency_ambiguous" and "EUR, SEK" in caught.value.message


def test_a_closing_balance_in_another_currency_is_not_used_and_the_statement_says_so():
    platform_bank_account_create(name="Main", iban=IBAN, currency="EUR")
    block = statement([Booking("5.00")], account=f"<IBAN>{IBAN}</IBAN>", closing=None)
    data = camt053(block.replace("</Bal>", "</Bal>" + balance("CLBD", Decimal("5.00"), "USD"), 1))
    result = _import(data)
    statement_lines_match()
    (stmt,) = result.statements
    assert (stmt.closing_balance, stmt.balance_difference) == (None, None)
    assert stmt.balance_note == "Not checked: the closing balance is in USD, not the account's EUR."
    assert result.balance_mismatches == [stmt]
    books_mirror(result.statements, entries=1)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({}, "account_identifier"),
        ({"iban": IBAN, "other_id": "1"}, "account_identifier"),
        ({"iban": "NL00"}, "invalid_iban"),
    ],
)
def test_an_account_needs_exactly_one_valid_identifier(kwargs, code):
    with pytest.raises(InvalidInput) as caught:
        platform_bank_account_create(name="X", currency="EUR", **kwargs)
    assert caught.value.code == code and not PlatformBankAccount.objects.exists()
