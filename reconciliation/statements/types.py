"""What every statement parser produces (camt.053, camt.054, CSV): plain frozen dataclasses, no ORM.

Amounts are exact ``Decimal`` as the bank wrote them (ISO 20022 allows five decimals), always positive;
the direction is ``credit_debit`` from the account holder's view (``CRDT`` money in, ``DBIT`` money out).
Optional ISO elements the bank left out are ``None`` (or empty tuples), never guessed.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Literal

StatementKind = Literal["camt053", "camt054", "csv"]
CreditDebit = Literal["CRDT", "DBIT"]

CREDIT: CreditDebit = "CRDT"
DEBIT: CreditDebit = "DBIT"


@dataclass(frozen=True, slots=True)
class ParsedParty:
    """One side of a transaction as the bank reported it (RltdPties + RltdAgts)."""

    name: str | None = None
    iban: str | None = None
    account_other_id: str | None = None  # Acct/Id/Othr/Id when the bank gave no IBAN
    bic: str | None = None

    @property
    def is_empty(self) -> bool:
        return not (self.name or self.iban or self.account_other_id or self.bic)


@dataclass(frozen=True, slots=True)
class ParsedReturn:
    """RtrInf: why a payment came back (R-transaction)."""

    reason_code: str | None  # ISO ExternalReturnReason1Code, e.g. AC04, MD07
    reason_proprietary: str | None
    additional_info: str | None  # every AddtlInf, joined with a space
    # camt carries no OrgnlEndToEndId in RtrInf: banks repeat the original one in Refs/EndToEndId.
    original_end_to_end_id: str | None


@dataclass(frozen=True, slots=True)
class ParsedTxDetail:
    """One TxDtls: one underlying payment. A batch booking has several per entry."""

    end_to_end_id: str | None  # None when missing or NOTPROVIDED
    instruction_id: str | None
    tx_id: str | None
    uetr: str | None  # Refs/UETR (SWIFT gpi / SEPA), lower case
    message_id: str | None
    payment_information_id: str | None
    account_servicer_reference: str | None
    amount: Decimal | None  # TxDtls/Amt (v8) or AmtDtls/TxAmt|InstdAmt (v2/v4); None when not given
    currency: str | None
    credit_debit: CreditDebit | None
    # The other party from the account holder's view: the debtor of money that came in, the creditor
    # of money that went out (a reversal flips it); falls back to the other side when the bank
    # repeated our own account there.
    counterparty_name: str | None
    counterparty_iban: str | None
    counterparty_bic: str | None
    debtor: ParsedParty
    creditor: ParsedParty
    remittance: str | None  # every RmtInf/Ustrd joined with a space
    structured_reference: str | None  # first RmtInf/Strd/CdtrRefInf/Ref
    return_info: ParsedReturn | None
    bank_tx_code: str | None  # "PMNT/ICDT/DMCT"
    additional_info: str | None  # AddtlTxInf
    # Chrgs: the bank's charges on this payment included in the booking (a fee taken from money
    # in, added to money out), in the booking's currency; None when the bank reported none.
    charges: Decimal | None = None


@dataclass(frozen=True, slots=True)
class ParsedBatch:
    """NtryDtls/Btch: the bank booked several payments as one entry."""

    message_id: str | None
    payment_information_id: str | None
    number_of_transactions: int | None
    total_amount: Decimal | None
    currency: str | None
    credit_debit: CreditDebit | None


@dataclass(frozen=True, slots=True)
class ParsedEntry:
    """One Ntry: one booking on the account (one line of the bank statement)."""

    sequence: int  # 1-based position inside its statement (stable for a given file)
    line: int | None  # source line of the <Ntry> (or CSV row)
    entry_reference: str | None  # AcctSvcrRef, else NtryRef, else None
    account_servicer_reference: str | None
    entry_ref: str | None  # NtryRef as given
    amount: Decimal
    currency: str
    credit_debit: CreditDebit
    status: str  # BOOK, PDNG, INFO (as given, upper case)
    booking_date: date | None
    booking_datetime: datetime | None  # only when the bank sent DtTm
    value_date: date | None
    value_datetime: datetime | None
    reversal: bool  # RvslInd: CRDT+reversal undoes an earlier debit, DBIT+reversal an earlier credit
    bank_tx_code: str | None  # "PMNT/ICDT/DMCT"
    bank_tx_code_proprietary: str | None
    batch: ParsedBatch | None
    details: tuple[ParsedTxDetail, ...]
    additional_info: str | None  # AddtlNtryInf
    charges: Decimal | None = None  # Ntry/Chrgs included in the booking (see ParsedTxDetail.charges)

    @property
    def signed_amount(self) -> Decimal:
        """Effect on the account balance (a reversal is booked in its own direction)."""
        return self.amount if self.credit_debit == CREDIT else -self.amount

    @property
    def details_charges(self) -> Decimal:
        """The charges the booking includes beyond its details' amounts: the entry's own Chrgs,
        else the sum of its details'. A credit's details may state the amount sent and the
        booking what arrived after the fee; a debit's booking may carry the fee on top."""
        if self.charges is not None:
            return self.charges
        return sum((d.charges for d in self.details if d.charges is not None), Decimal(0))

    @property
    def is_batch(self) -> bool:
        return self.batch is not None or len(self.details) > 1


@dataclass(frozen=True, slots=True)
class ParsedStatement:
    """One Stmt (camt.053), Ntfctn (camt.054) or CSV file.

    ``entries`` is a tuple from ``parse_camt``/``parse_csv``; from ``iter_camt_statements`` it is a
    one-shot iterator that must be read before advancing to the next statement.
    """

    kind: StatementKind
    version: str | None  # "001.08" for camt; None for CSV
    message_id: str | None  # GrpHdr/MsgId
    statement_id: str
    electronic_sequence_number: int | None
    legal_sequence_number: int | None
    # StmtPgntn, else GrpHdr/MsgPgntn: a statement a bank split over several messages or blocks.
    page_number: int | None
    last_page: bool | None
    created_at: datetime | None  # Stmt/CreDtTm, else GrpHdr/CreDtTm
    from_datetime: datetime | None  # FrToDt
    to_datetime: datetime | None
    account_iban: str | None  # Acct/Id/IBAN, or Othr/Id when that is a valid IBAN
    account_other_id: str | None  # Acct/Id/Othr/Id
    currency: str | None  # Acct/Ccy, else the opening/closing balance currency; None if unknown
    opening_balance: Decimal | None  # signed (DBIT negative); OPBD, else PRCD
    opening_balance_date: date | None
    closing_balance: Decimal | None  # signed; CLBD
    closing_balance_date: date | None
    # The currencies the balances were given in: one that is not the account's is not used.
    opening_balance_currency: str | None
    closing_balance_currency: str | None
    line: int | None
    entries: Iterable[ParsedEntry]

    @property
    def account_id(self) -> str | None:
        return self.account_iban or self.account_other_id


@dataclass(frozen=True, slots=True)
class StatementSummary:
    """What ``validate_camt`` learns from a full pass without keeping the entries."""

    statement_id: str
    account_id: str | None
    currency: str | None
    entry_count: int
    booked_credit_total: Decimal
    booked_debit_total: Decimal
    opening_balance: Decimal | None
    closing_balance: Decimal | None

    @property
    def computed_closing_balance(self) -> Decimal | None:
        if self.opening_balance is None:
            return None
        return self.opening_balance + self.booked_credit_total - self.booked_debit_total

    @property
    def balances_match(self) -> bool | None:
        """Opening + booked entries == closing; None when the bank sent no opening/closing balance."""
        computed = self.computed_closing_balance
        if computed is None or self.closing_balance is None:
            return None
        return computed == self.closing_balance
