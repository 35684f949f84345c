"""Plain builders for rail payments (dataclasses, not models: factory_boy adds nothing here)."""

import itertools
from datetime import date

from payouts.rails.base import RailPayment

_sequence = itertools.count(1)


def rail_payment(**overrides) -> RailPayment:
    n = next(_sequence)
    values = {
        "end_to_end_id": f"PO-TEST-{n:08d}",
        "amount_minor": 1250,
        "currency": "EUR",
        "creditor_name": "Giulia Rossi",
        "creditor_country": "IT",
        "creditor_iban": "IT60X0542811101000000123456",
        "remittance": "JoyBack reward",
        "debtor_account_code": "platform:bank:DE89370400440532013000:EUR",
        "requested_execution_date": None,
    }
    values.update(overrides)
    return RailPayment(**values)


def gbp_payment(**overrides) -> RailPayment:
    values = {
        "currency": "GBP",
        "creditor_name": "Oliver Smith",
        "creditor_country": "GB",
        "creditor_iban": None,
        "creditor_account": {"type": "sort_code", "sortCode": "040075", "accountNumber": "37778842"},
        "remittance": "JoyBack",
    }
    values.update(overrides)
    return rail_payment(**values)


def usd_payment(**overrides) -> RailPayment:
    values = {
        "currency": "USD",
        "creditor_name": "Ava Johnson",
        "creditor_country": "US",
        "creditor_iban": None,
        "creditor_account": {
            "type": "aba",
            "abartn": "026009593",
            "accountNumber": "12345678",
            "accountType": "CHECKING",
            "address.country": "US",
            "address.firstLine": "1 Main Street",
            "address.city": "New York",
            "address.postCode": "10001",
            "address.state": "NY",
        },
    }
    values.update(overrides)
    return rail_payment(**values)


TODAY = date(2025, 1, 2)
