"""Hand-written bank files for the edge cases real customers' files showed (issue 15).

Each file is written here from the ISO 20022 camt.053.001.08 element order (GrpHdr, Stmt: Id,
StmtPgntn, CreDtTm, Acct, Bal, Ntry), not copied from any parser's fixtures, so a test states
exactly which element it is about. ``books_mirror`` is the proof every such test ends with.
"""

from dataclasses import dataclass
from decimal import Decimal

from core.money import currency_exponent
from reconciliation.models import BankStatement, StatementLine, StatementLineStatus
from reconciliation.selectors import account_balance

NS053 = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"


@dataclass(frozen=True)
class Booking:
    amount: str
    direction: str = "CRDT"
    reference: str | None = None  # AcctSvcrRef
    booked: str = "<Dt>2026-01-15</Dt>"  # the inside of BookgDt
    details: str = ""  # the inside of NtryDtls/TxDtls (written only when given)
    status: str = "BOOK"
    currency: str = "EUR"

    def xml(self) -> str:
        reference = f"<AcctSvcrRef>{self.reference}</AcctSvcrRef>" if self.reference else ""
        details = f"<NtryDtls><TxDtls>{self.details}</TxDtls></NtryDtls>" if self.details else ""
        return (
            f'<Ntry><Amt Ccy="{self.currency}">{self.amount}</Amt><CdtDbtInd>{self.direction}</CdtDbtInd>'
            f"<Sts><Cd>{self.status}</Cd></Sts><BookgDt>{self.booked}</BookgDt>"
            f"<ValDt><Dt>2026-01-15</Dt></ValDt>{reference}"
            "<BkTxCd><Domn><Cd>PMNT</Cd><Fmly><Cd>RCDT</Cd><SubFmlyCd>ESCT</SubFmlyCd></Fmly></Domn></BkTxCd>"
            f"{details}</Ntry>"
        )


def balance(code: str, amount: Decimal | str, currency: str = "EUR") -> str:
    amount = Decimal(amount)
    direction = "CRDT" if amount >= 0 else "DBIT"
    return (
        f'<Bal><Tp><CdOrPrtry><Cd>{code}</Cd></CdOrPrtry></Tp><Amt Ccy="{currency}">{abs(amount):.2f}</Amt>'
        f"<CdtDbtInd>{direction}</CdtDbtInd><Dt><Dt>2026-01-15</Dt></Dt></Bal>"
    )


def statement(
    bookings: list[Booking],
    *,
    statement_id: str = "STMT-1",
    account: str = "<IBAN>NL91ABNA0417164300</IBAN>",
    currency: str | None = "EUR",
    opening: str | None = "0.00",
    closing: str | None = "auto",
    pagination: str = "",
    created: str = "2026-01-15T18:00:00+01:00",
) -> str:
    """One Stmt block. ``closing="auto"`` is opening + the booked entries."""
    if closing == "auto":
        net = sum(
            (Decimal(b.amount) * (1 if b.direction == "CRDT" else -1) for b in bookings if b.status == "BOOK"),
            Decimal(0),
        )
        closing = str(Decimal(opening or 0) + net)
    balances = (balance("OPBD", opening) if opening is not None else "") + (
        balance("CLBD", closing) if closing is not None else ""
    )
    ccy = f"<Ccy>{currency}</Ccy>" if currency else ""
    pagination = f"<StmtPgntn>{pagination}</StmtPgntn>" if pagination else ""
    return (
        f"<Stmt><Id>{statement_id}</Id>{pagination}<CreDtTm>{created}</CreDtTm>"
        f"<Acct><Id>{account}</Id>{ccy}</Acct>{balances}{''.join(b.xml() for b in bookings)}</Stmt>"
    )


def page(number: int, last: bool) -> str:
    return f"<PgNb>{number}</PgNb><LastPgInd>{'true' if last else 'false'}</LastPgInd>"


def camt053(*statements: str, message_id: str = "MSG-1", message_pagination: str = "") -> bytes:
    paging = f"<MsgPgntn>{message_pagination}</MsgPgntn>" if message_pagination else ""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Document xmlns="{NS053}"><BkToCstmrStmt>'
        f"<GrpHdr><MsgId>{message_id}</MsgId><CreDtTm>2026-01-15T18:00:00+01:00</CreDtTm>{paging}</GrpHdr>"
        f"{''.join(statements)}</BkToCstmrStmt></Document>"
    ).encode()


def books_mirror(statements: list[BankStatement], *, entries: int) -> None:
    """The proof: every entry of the file is a stored line, none is left ``new``, and the ledger's
    bank account moved by exactly what the statements booked."""
    lines = StatementLine.objects.filter(statement__in=statements)
    assert lines.count() == entries == sum(s.entry_count for s in statements)
    assert not lines.filter(status=StatementLineStatus.NEW).exists()
    by_account: dict[int, Decimal] = {}
    for s in statements:
        by_account[s.bank_account.ledger_account_id] = (
            by_account.get(s.bank_account.ledger_account_id, Decimal(0)) + s.credit_total - s.debit_total
        )
    for ledger_account_id, net in by_account.items():
        balance_ = account_balance(account_id=ledger_account_id)
        assert balance_.posted_minor == int(net.scaleb(currency_exponent(balance_.currency)))
