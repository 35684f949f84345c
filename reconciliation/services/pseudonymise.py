"""An erased person out of the platform's copy of bank statement lines.

A statement line is the bank's record of a booking and the books rest on it, but once a line is
matched to a payout the platform's copy needs no payee: the match, the ledger entry, the payout
and the bank's own statement say who was paid. So for an erased person the lines tied to their
payouts keep everything but who they were: amount, currency, dates, direction, status, the
bank's references (AcctSvcrRef, EndToEndId, UETR, batch ids), the return reason, the dedupe key
and the matches; the counterparty name becomes ``(erased)``, the IBAN ``<country>00ERASED``
(``core.personal_data.pseudonym_iban``), and their values in remittance text, notes and the
transaction details are replaced by ``(erased)``.

Re-import. A booking's identity (``dedupe_key``, ``services.statements.booking_identity``) is its
account, status, reference, direction, amount and date — never the counterparty — so it is kept
as it was, and a file imported again (a camt.053 after the camt.054) still finds the booking
known and stores none of its clear values again; a known page is compared by counts and totals.

Which lines: those a match (active or undone) or a payout (its debit or return line) ties to the
person's payouts. Of a line booking a whole pain.001 file only the person's own transactions in
its details are rewritten (by EndToEndId); the other payees stay. A line merely naming someone of
the same name is somebody else's record and is left alone; a line carrying one of the person's
IBANs is theirs (an IBAN is not a name) and is rewritten wherever it is.
"""

import re
import unicodedata
from collections.abc import Collection

from django.db import transaction
from django.db.models import Q

from core.personal_data import ERASED, pseudonym_iban
from reconciliation.models import Match, StatementLine

# The payouts app's match target types (``payouts.matchers``): a single payout, a whole file.
PAYOUT_TARGET = "payout"
BATCH_TARGET = "payout_batch"
_TEXT_COLUMNS = ("remittance", "review_note", "status_note", "matching_error")


def _folded(text: str) -> str:
    """'Zoë' as a bank's EPC Latin spells it: 'Zoe'."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _pattern(needles: Collection[str], ibans: Collection[str]) -> re.Pattern | None:
    parts = set()
    for needle in needles:
        if len(needle) >= 4:
            parts |= {re.escape(needle), re.escape(_folded(needle))}
    for iban in ibans:
        compact = iban.replace(" ", "")
        if compact:
            parts.add(r"\s?".join(re.escape(c) for c in compact))  # also as printed, in groups of four
    if not parts:
        return None
    return re.compile("|".join(sorted(parts, key=len, reverse=True)), re.IGNORECASE)


def statement_lines_tied(
    *, payout_ids: Collection[int], line_ids: Collection[int], batch_ids: Collection[int]
) -> set[int]:
    """The lines tied to these payouts: ``line_ids`` (their own debit and return lines) and every
    line a match, active or undone, points at them or at the files in ``batch_ids`` with."""
    matched = Match.objects.filter(
        Q(target_type=PAYOUT_TARGET, target_id__in=[str(p) for p in payout_ids])
        | Q(target_type=BATCH_TARGET, target_id__in=[str(b) for b in batch_ids])
    )
    return set(line_ids) | set(matched.values_list("line_id", flat=True))


def statement_lines_pseudonymise(
    *,
    payout_ids: Collection[int],
    line_ids: Collection[int],
    batch_end_to_end_ids: dict[int, Collection[str]],
    end_to_end_ids: Collection[str],
    ibans: Collection[str],
    needles: Collection[str],
) -> tuple[int, set[int]]:
    """Pseudonymise a person's data on the statement lines tied to their payouts
    (``statement_lines_tied``) and on any line with one of their ``ibans`` as counterparty. Of a
    line booking a file (``batch_end_to_end_ids``: batch id → the person's EndToEndIds in it) only
    those transactions are rewritten. ``needles`` are their other clear values (names, e-mail,
    number), replaced in free text. Returns how many lines changed and the ids of the lines tied.

    Idempotent. Joins the caller's transaction and locks the lines first: the matching engine
    locks lines before batches and payouts (lock order: ``core.locks``)."""
    compact_ibans = {i.replace(" ", "").upper() for i in ibans if i}
    pattern = _pattern(needles, compact_ibans)
    tied = statement_lines_tied(payout_ids=payout_ids, line_ids=line_ids, batch_ids=list(batch_end_to_end_ids))
    booking_files = {
        line_id: set(batch_end_to_end_ids[int(target)])
        for line_id, target in Match.objects.filter(
            target_type=BATCH_TARGET, target_id__in=[str(b) for b in batch_end_to_end_ids]
        ).values_list("line_id", "target_id")
    }
    wanted = set(end_to_end_ids)
    changed = 0
    lines = StatementLine.objects.select_for_update(of=("self",)).filter(
        Q(pk__in=tied) | Q(counterparty_iban__in=compact_ibans)
    )
    with transaction.atomic():
        for line in lines.order_by("pk"):
            whole = line.pk not in booking_files or line.end_to_end_id in wanted
            own = booking_files.get(line.pk, wanted)
            changed += _rewrite(line, whole=whole, wanted=own, ibans=compact_ibans, pattern=pattern)
    return changed, tied


def _rewrite(line: StatementLine, *, whole: bool, wanted: set[str], ibans: set[str], pattern) -> bool:
    before = (line.counterparty_name, line.counterparty_iban, line.details, *(getattr(line, c) for c in _TEXT_COLUMNS))
    if whole or line.counterparty_iban.replace(" ", "").upper() in ibans:
        if line.counterparty_name:
            line.counterparty_name = ERASED
        if line.counterparty_iban:
            line.counterparty_iban = pseudonym_iban(line.counterparty_iban)
    for column in _TEXT_COLUMNS:
        if pattern is not None:
            setattr(line, column, pattern.sub(ERASED, getattr(line, column) or ""))
    details = []
    for detail in line.details or []:
        detail = dict(detail)
        iban = (detail.get("counterparty_iban") or "").replace(" ", "").upper()
        if whole or detail.get("end_to_end_id") in wanted or iban in ibans:
            if detail.get("counterparty_name"):
                detail["counterparty_name"] = ERASED
            if detail.get("counterparty_iban"):
                detail["counterparty_iban"] = pseudonym_iban(detail["counterparty_iban"])
        if pattern is not None and detail.get("remittance"):
            detail["remittance"] = pattern.sub(ERASED, detail["remittance"])
        details.append(detail)
    line.details = details
    after = (line.counterparty_name, line.counterparty_iban, line.details, *(getattr(line, c) for c in _TEXT_COLUMNS))
    if after == before:
        return False
    line.save(update_fields=["counterparty_name", "counterparty_iban", "details", *_TEXT_COLUMNS])
    return True
