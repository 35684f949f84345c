"""Bank CSV exports the platform reads, each a ``CsvMapping`` registered as ``csv:<bank>``.

Adding a bank is one mapping and one ``StatementFormat`` in ``BANK_FORMATS`` here, a sample file
under ``tests/fixtures/statements/`` and a test (README "Extending → A statement format"). Map the
bank's own transaction id as ``reference`` whenever the export has one: a CSV has no statement id,
so that id is what makes a booking in two overlapping exports one booking (rule 1 of
``services.bank_reports``), not two.
"""

from .csv_import import CsvMapping
from .formats import StatementFormat

# Wise Business, balance statement as CSV (Statements → one currency → CSV): one file per currency
# balance, comma-separated, a header row, "." decimals without thousands separators, dates
# DD-MM-YYYY. "Amount" is signed (negative = money out) and is what moved the balance, fees
# included ("Total fees" says how much of it was Wise's fee). "TransferWise ID" is unique per
# movement (TRANSFER-…, BALANCE-…, CARD-…, FEE-…). "Payer Name" is filled for money in, "Payee Name"
# and "Payee Account Number" for money out.
WISE = CsvMapping(
    name="wise",
    booking_date="Date",
    date_format="%d-%m-%Y",
    amount="Amount",
    currency="Currency",
    reference="TransferWise ID",
    payer_name="Payer Name",
    payee_name="Payee Name",
    counterparty_iban="Payee Account Number",
    remittance=("Payment Reference", "Description"),
)

# Revolut Business, transactions statement as CSV (Home → Statements → Transactions statement →
# CSV): comma-separated, "." decimals, times "YYYY-MM-DD HH:MM:SS" in UTC (some exports give the
# date alone). "ID" is Revolut's transaction id. "State" is COMPLETED for a booking, PENDING before;
# DECLINED, FAILED and REVERTED rows moved no money. "Total amount" is the signed movement of the
# balance in "Payment currency", fee included ("Amount" is before the fee). "Payer" names who paid
# us; "Beneficiary IBAN" whom we paid.
REVOLUT_BUSINESS = CsvMapping(
    name="revolut-business",
    booking_date="Date completed (UTC)",
    date_format=("%Y-%m-%d %H:%M:%S", "%Y-%m-%d"),
    time_zone="UTC",
    status="State",
    booked_statuses=("COMPLETED",),
    pending_statuses=("PENDING",),
    amount="Total amount",
    currency="Payment currency",
    reference="ID",
    payer_name="Payer",
    counterparty_iban="Beneficiary IBAN",
    counterparty_bic="Beneficiary BIC",
    remittance=("Reference", "Description"),
)

BANK_FORMATS = (
    StatementFormat(name="csv:wise", label="Wise Business balance statement (CSV)", csv=WISE),
    StatementFormat(
        name="csv:revolut-business", label="Revolut Business transactions statement (CSV)", csv=REVOLUT_BUSINESS
    ),
)
