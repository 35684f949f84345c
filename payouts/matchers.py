"""Bank statement lines that payouts explain, plugged into reconciliation's matching engine
(registered in ``PayoutsConfig.ready``). The engine runs them in ``order`` inside its transaction,
records each match with the entry ``apply`` returns, and reverses that entry when a match is
undone (``unapply`` only puts the payout back).

* 10 ``payout_end_to_end``: a debit whose EndToEndId is a payout (or, without one, whose UETR is
  the one the payout's pain.001 carried) → settled (in transit → bank).
  Also the matcher staff use by hand for ``payout`` targets (debits and returns).
* 15 ``payout_return``: a credit with a return reason whose EndToEndId is a payout → returned.
* 20 ``payout_batch``: a batch booking → the payouts it pays settled with one entry: the payouts
  its transaction details name by EndToEndId, else the pain.001 file's (PmtInfId or MsgId) less
  the ones the bank rejected; count and control sum must agree.
  Staff matching by hand pick files from ``candidates`` (the same fit).
* 90 ``payout_suggest``: same amount, close date, same creditor IBAN or name → a suggestion.
  Also the candidates staff pick from to match a line by hand (``candidates``).

A line whose EndToEndId (or UETR) is a payout's names that payout (``names``): it is that payout's
or nobody's — never suggested for another person's payout, nor confirmable against one.

Bank charges: a line naming its payout by EndToEndId matches it when it differs from the payout's
amount by at most ``PAYOUT_BANK_CHARGE_MAX_MINOR`` in the charge's direction (a debit larger:
the bank added its fee; a return smaller: the bank kept one). The difference is booked to
``platform:bank_fees``; a line that names its payout only by UETR, or by nothing, must be exact.

A bank reversal (RvslInd) of a matched payout debit comes here through ``reverse``: the money is
back, so the payout is returned exactly as a return line would return it (person told and asked
for their account, payable again), and the reversal line books it.
"""

from collections.abc import Sequence
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from core.exceptions import InvalidInput
from core.money import format_minor
from payouts import conf
from payouts.models import Payout, PayoutBatch, PayoutStatus
from payouts.rails.sepa_file import uetr_for
from payouts.services.actions import (
    payout_bank_debit_record,
    payout_bank_debit_undo,
    payout_bank_return_record,
    payout_bank_return_undo,
    payouts_bank_debits_record,
)
from payouts.services.states import in_transit_account
from recipients import crypto
from reconciliation.matching import Applied, Candidate, Named, Proposal
from reconciliation.models import Match, StatementLine
from reconciliation.services import Leg, ledger_entry_post

PAYOUT = "payout"
BATCH = "payout_batch"
# A reversal carries no return reason of its own: the person is told the bank sent the money back.
REVERSAL_REASON_CODE = "NARR"
REVERSAL_REASON_TEXT = "The bank reversed the payment and the money came back."


def _debit_open(payout: Payout) -> bool:
    return payout.bank_debit_line_id is None and payout.status in (
        PayoutStatus.SUBMITTED,
        PayoutStatus.SETTLED,
        PayoutStatus.RETURNED,
    )


def _return_open(payout: Payout) -> bool:
    return payout.bank_return_line_id is None and payout.status in (
        PayoutStatus.SUBMITTED,
        PayoutStatus.SETTLED,
        PayoutStatus.RETURNED,
    )


# What proposing and the bulk settlement read of a payout: a statement chunk loads a thousand of
# them twice, and the full rows (a dozen timestamps each) cost more to build than to fetch.
_MATCH_FIELDS = ("id", "end_to_end_id", "status", "amount_minor", "currency", "bank_debit_line_id")
_MATCH_FIELDS += ("bank_return_line_id",)


def _by_e2e(lines: Sequence[StatementLine]) -> dict[str, Payout]:
    ids = {line.end_to_end_id for line in lines if line.end_to_end_id}
    if not ids:
        return {}
    return {p.end_to_end_id: p for p in Payout.objects.filter(end_to_end_id__in=ids).only(*_MATCH_FIELDS)}


def _by_uetr(lines: Sequence[StatementLine]) -> dict[str, Payout]:
    """Lines whose bank dropped the EndToEndId but kept the UETR our pain.001 gave the payment
    (``uetr_for``): it is derived, not stored, so the payouts of the same amounts still waiting
    for their debit are the candidates."""
    wanted = [line for line in lines if line.uetr and not line.end_to_end_id]
    if not wanted:
        return {}
    candidates = Payout.objects.filter(
        amount_minor__in={line.amount_minor for line in wanted},
        status__in=(PayoutStatus.SUBMITTED, PayoutStatus.SETTLED, PayoutStatus.RETURNED),
        bank_debit_line_id__isnull=True,
    ).only(*_MATCH_FIELDS)
    by_uetr = {uetr_for(p.end_to_end_id): p for p in candidates}
    return {line.uetr: by_uetr[line.uetr] for line in wanted if line.uetr in by_uetr}


def bank_charge(line: StatementLine, payout: Payout) -> int | None:
    """The bank's charge in minor units when ``line`` can book ``payout`` (0: the exact amount),
    else None: same currency; the line names the payout by EndToEndId for any difference; a debit
    at most the configured charge above the payout, a return at most that below it."""
    if line.amount_minor is None or line.currency != payout.currency:
        return None
    charge = payout.amount_minor - line.amount_minor if line.is_credit else line.amount_minor - payout.amount_minor
    if charge == 0:
        return 0
    named = bool(line.end_to_end_id) and line.end_to_end_id == payout.end_to_end_id
    if named and 0 < charge <= conf.bank_charge_max_minor() and line.amount_minor > 0:
        return charge
    return None


class _PayoutLineMatcher:
    """Shared by the end-to-end and return matchers: a proposal ties a line to one payout; debits
    settle it, credits return it."""

    target_type = PAYOUT
    name = ""

    def apply(self, proposals: Sequence[Proposal], *, lines: dict[int, StatementLine]) -> list[Applied]:
        applied, rest = self._apply_plain_debits(proposals, lines)
        for proposal in rest:
            line = lines[proposal.line_id]
            bank = line.bank_account.ledger_account
            payout = Payout.objects.get(pk=int(proposal.target_id))
            charge = proposal.data.get("charge_minor", 0)
            if line.is_credit:
                if not _return_open(payout):
                    continue
                entry = payout_bank_return_record(
                    payout_id=payout.pk,
                    line_id=line.pk,
                    bank=bank,
                    reason_code=line.return_reason_code or "NARR",
                    bank_minor=payout.amount_minor - charge,
                )
            else:
                if not _debit_open(payout):
                    continue
                entry = payout_bank_debit_record(payout_id=payout.pk, line_id=line.pk, bank=bank, charge_minor=charge)
            applied.append(
                Applied(
                    line_id=line.pk,
                    target_type=PAYOUT,
                    target_id=str(payout.pk),
                    amount_minor=payout.amount_minor,
                    entry=entry,
                )
            )
        return applied

    def _propose_by_e2e(self, lines: Sequence[StatementLine], *, is_open, reason) -> list[Proposal]:
        """Lines whose EndToEndId names a payout that can still take them, for the same amount."""
        payouts, by_uetr = _by_e2e(lines), _by_uetr(lines)
        proposals = []
        for line in lines:
            payout = payouts.get(line.end_to_end_id) if line.end_to_end_id else by_uetr.get(line.uetr)
            # Same currency, and the same amount but for a bank charge (``bank_charge``): a USD
            # line for a EUR payout of equal minor units would settle it across currencies.
            charge = bank_charge(line, payout) if payout else None
            if payout and is_open(payout) and charge is not None:
                proposals.append(
                    Proposal(
                        line_id=line.pk,
                        target_type=PAYOUT,
                        target_id=str(payout.pk),
                        amount_minor=payout.amount_minor,
                        reason=reason(line, payout) + (f", bank charge {charge}" if charge else ""),
                        data={"charge_minor": charge} if charge else {},
                    )
                )
        return proposals

    def names(self, lines: Sequence[StatementLine]) -> dict[int, Named]:
        """Lines whose EndToEndId (or, without one, UETR) is a payout's, whatever its status."""
        payouts, by_uetr = _by_e2e(lines), _by_uetr(lines)
        named = {}
        for line in lines:
            payout = payouts.get(line.end_to_end_id) if line.end_to_end_id else by_uetr.get(line.uetr)
            if payout is not None:
                named[line.pk] = Named(PAYOUT, str(payout.pk), f"payout {payout.end_to_end_id} ({payout.status})")
        return named

    def reverse(self, match: Match, line: StatementLine) -> Applied | None:
        """The bank reversed the debit line of ``match``: the payout is returned from ``line``
        (``payout_bank_return_record``, the return path; a charge the bank gives back with it
        comes off the bank-fee account). A reversed return line is not reopened here (None:
        the reversal matcher undoes the return's match, the payout is settled again)."""
        payout = Payout.objects.get(pk=int(match.target_id))
        if not line.is_credit or payout.bank_debit_line_id != match.line_id:
            return None
        entry = payout_bank_return_record(
            payout_id=payout.pk,
            line_id=line.pk,
            bank=line.bank_account.ledger_account,
            reason_code=line.return_reason_code or REVERSAL_REASON_CODE,
            reason_text="" if line.return_reason_code else REVERSAL_REASON_TEXT,
            bank_minor=line.amount_minor,
        )
        return Applied(
            line_id=line.pk, target_type=PAYOUT, target_id=str(payout.pk), amount_minor=line.amount_minor, entry=entry
        )

    def _apply_plain_debits(
        self, proposals: Sequence[Proposal], lines: dict[int, StatementLine]
    ) -> tuple[list[Applied], list[Proposal]]:
        """The common case in bulk: a debit line for a submitted payout nobody saw leave yet. The
        payouts are locked in id order, then settled together (``payouts_bank_debits_record``);
        everything else (returns, repeats, payouts settled by the rail first) goes the single way."""
        targets = sorted({int(p.target_id) for p in proposals})
        locked = {
            p.pk: p
            for p in Payout.objects.select_for_update(of=("self",))
            .filter(pk__in=targets)
            .only(*_MATCH_FIELDS)
            .order_by("pk")
        }
        plain: dict[int, list[tuple[Payout, int]]] = {}
        rest, taken = [], set()
        for proposal in proposals:
            line = lines[proposal.line_id]
            payout = locked.get(int(proposal.target_id))
            if (
                payout is not None
                and not line.is_credit
                and not proposal.data.get("charge_minor")
                and payout.pk not in taken
                and payout.status == PayoutStatus.SUBMITTED
                and payout.bank_debit_line_id is None
            ):
                taken.add(payout.pk)
                plain.setdefault(line.bank_account.ledger_account_id, []).append((payout, line.pk))
            else:
                rest.append(proposal)
        applied = []
        for items in plain.values():
            bank = lines[items[0][1]].bank_account.ledger_account
            entries = payouts_bank_debits_record(items=items, bank=bank)
            applied += [
                Applied(
                    line_id=line_id,
                    target_type=PAYOUT,
                    target_id=str(payout.pk),
                    amount_minor=payout.amount_minor,
                    entry=entries[payout.pk],
                )
                for payout, line_id in items
            ]
        return applied, rest

    def unapply(self, match: Match) -> None:
        payout = Payout.objects.get(pk=int(match.target_id))
        if payout.bank_return_line_id == match.line_id:
            payout_bank_return_undo(payout_id=payout.pk, line_id=match.line_id)
        else:
            payout_bank_debit_undo(payout_id=payout.pk, line_id=match.line_id)

    def propose_manual(self, line: StatementLine, target_id: str) -> Proposal:
        payout = Payout.objects.filter(pk=int(target_id) if target_id.isdigit() else None).first()
        if payout is None:
            payout = Payout.objects.filter(end_to_end_id=target_id).first()
        if payout is None:
            raise InvalidInput(f"No payout {target_id}.", code="unknown_payout")
        if line.reversal:
            raise InvalidInput("Reversals are matched automatically.", code="reversal_is_automatic")
        charge = bank_charge(line, payout)
        if charge is None:
            raise InvalidInput("The line's amount is not the payout's.", code="amount_mismatch")
        if not (_return_open(payout) if line.is_credit else _debit_open(payout)):
            raise InvalidInput(f"A {payout.status} payout cannot take this line.", code="payout_moved_on")
        return Proposal(
            line_id=line.pk,
            target_type=PAYOUT,
            target_id=str(payout.pk),
            amount_minor=payout.amount_minor,
            data={"charge_minor": charge} if charge else {},
        )


class EndToEndMatcher(_PayoutLineMatcher):
    name = "payout_end_to_end"
    order = 10

    def propose(self, lines: Sequence[StatementLine]) -> list[Proposal]:
        return self._propose_by_e2e(
            [line for line in lines if not line.is_credit and not line.reversal and (line.end_to_end_id or line.uetr)],
            is_open=_debit_open,
            reason=lambda line, payout: (
                f"EndToEndId {payout.end_to_end_id}"
                if line.end_to_end_id
                else f"UETR {line.uetr} of {payout.end_to_end_id}"
            ),
        )


class ReturnMatcher(_PayoutLineMatcher):
    name = "payout_return"
    order = 15
    names = None  # the end-to-end matcher already names every payout line, debits and credits

    def propose(self, lines: Sequence[StatementLine]) -> list[Proposal]:
        return self._propose_by_e2e(
            [
                line
                for line in lines
                if line.is_credit and not line.reversal and line.end_to_end_id and line.return_reason_code
            ],
            is_open=_return_open,
            reason=lambda line, payout: f"Return {line.return_reason_code} of {payout.end_to_end_id}",
        )


class BatchMatcher:
    """One debit booking several payouts. Which ones: those its transaction details name by
    EndToEndId (every detail must name a payout of one file), else the pain.001 file its
    PmtInfId or MsgId names, less the payouts the bank rejected (failed) or that were cancelled.
    Count and control sum must equal theirs exactly; a booking that does not fit yet waits in
    suspense and is tried again when a pain.002 decides the file's payouts."""

    name = "payout_batch"
    order = 20
    target_type = BATCH

    @staticmethod
    def _expected(batch: PayoutBatch) -> list[Payout]:
        return list(batch.payouts.exclude(status__in=[PayoutStatus.FAILED, PayoutStatus.CANCELLED]).order_by("id"))

    @staticmethod
    def _detail_end_to_end_ids(line: StatementLine) -> list[str] | None:
        """The EndToEndIds of a multi-payment booking's details, when every detail has one."""
        if not line.batch_count or line.batch_count < 2 or line.end_to_end_id:
            return None
        ids = [d.get("end_to_end_id") for d in line.details or []]
        return ids if len(ids) > 1 and all(ids) else None

    def _batch_for(self, line: StatementLine) -> PayoutBatch | None:
        keys = Q()
        if line.batch_payment_information_id:
            keys |= Q(payment_information_id=line.batch_payment_information_id)
        if line.batch_message_id:
            keys |= Q(batch_id=line.batch_message_id)
        return PayoutBatch.objects.filter(keys).first() if keys else None

    def _payouts_for(self, line: StatementLine) -> tuple[PayoutBatch | None, list[Payout]]:
        """The batch and the payouts the booking pays (see the class docstring)."""
        ids = self._detail_end_to_end_ids(line)
        if ids is not None:
            payouts = list(Payout.objects.filter(end_to_end_id__in=ids).order_by("id"))
            batches = {p.batch_id for p in payouts}
            if len(payouts) != len(set(ids)) or len(ids) != len(set(ids)) or len(batches) != 1 or None in batches:
                return None, []
            return PayoutBatch.objects.get(pk=batches.pop()), payouts
        if not (line.batch_payment_information_id or line.batch_message_id):
            return None, []
        batch = self._batch_for(line)
        return batch, self._expected(batch) if batch is not None else []

    @staticmethod
    def _fits(line: StatementLine, batch: PayoutBatch, payouts: list[Payout]) -> bool:
        return (
            bool(payouts)
            and all(_debit_open(p) for p in payouts)
            and line.currency == batch.currency
            and line.amount_minor == sum(p.amount_minor for p in payouts)
            and (line.batch_count is None or line.batch_count == len(payouts))
        )

    def propose(self, lines: Sequence[StatementLine]) -> list[Proposal]:
        proposals = []
        for line in lines:
            if line.is_credit or line.reversal:
                continue
            if not (line.batch_payment_information_id or line.batch_message_id or (line.batch_count or 0) > 1):
                continue
            batch, payouts = self._payouts_for(line)
            if batch is not None and self._fits(line, batch, payouts):
                proposals.append(self._proposal(line, batch, payouts))
        return proposals

    @staticmethod
    def _proposal(line: StatementLine, batch: PayoutBatch, payouts: list[Payout]) -> Proposal:
        return Proposal(
            line_id=line.pk,
            target_type=BATCH,
            target_id=str(batch.pk),
            amount_minor=line.amount_minor,
            reason=f"Batch {batch.batch_id}, {len(payouts)} payouts",
            data={"payout_ids": [p.pk for p in payouts]},
        )

    def apply(self, proposals: Sequence[Proposal], *, lines: dict[int, StatementLine]) -> list[Applied]:
        applied = []
        for proposal in proposals:
            line = lines[proposal.line_id]
            batch = PayoutBatch.objects.select_for_update().get(pk=int(proposal.target_id))
            payouts = list(Payout.objects.filter(pk__in=proposal.data["payout_ids"]).order_by("id"))
            if not self._fits(line, batch, payouts):
                continue
            bank = line.bank_account.ledger_account
            in_transit = [p for p in payouts if p.settled_entry_id is None]
            entry = None
            if in_transit:
                undone = Match.objects.filter(target_type=BATCH, target_id=str(batch.pk), status="undone").count()
                entry = ledger_entry_post(
                    idempotency_key=f"payout_batch:{batch.pk}:line:{line.pk}:{undone}",
                    kind="payout_settled",
                    legs=[
                        Leg.debit(in_transit_account(batch.currency), sum(p.amount_minor for p in in_transit)),
                        Leg.credit(bank, sum(p.amount_minor for p in in_transit)),
                    ],
                    memo=f"Payout batch {batch.batch_id} booked by the bank",
                    reference_type="payout_batch",
                    reference_id=str(batch.pk),
                ).entry
            for payout in payouts:
                payout_bank_debit_record(payout_id=payout.pk, line_id=line.pk, bank=bank, entry=entry)
            applied.append(
                Applied(
                    line_id=line.pk,
                    target_type=BATCH,
                    target_id=str(batch.pk),
                    amount_minor=line.amount_minor,
                    entry=entry,
                )
            )
        return applied

    def unapply(self, match: Match) -> None:
        for payout_id in Payout.objects.filter(
            batch_id=int(match.target_id), bank_debit_line_id=match.line_id
        ).values_list("id", flat=True):
            payout_bank_debit_undo(payout_id=payout_id, line_id=match.line_id)

    def reverse(self, match: Match, line: StatementLine) -> Applied | None:
        """The bank reversed the whole booking: each payout it paid is returned (the return path,
        one entry each); the reversal line records the first of them."""
        if not line.is_credit:
            return None
        entries = [
            payout_bank_return_record(
                payout_id=payout_id,
                line_id=line.pk,
                bank=line.bank_account.ledger_account,
                reason_code=line.return_reason_code or REVERSAL_REASON_CODE,
                reason_text="" if line.return_reason_code else REVERSAL_REASON_TEXT,
            )
            for payout_id in Payout.objects.filter(bank_debit_line_id=match.line_id)
            .order_by("id")
            .values_list("id", flat=True)
        ]
        return Applied(
            line_id=line.pk,
            target_type=BATCH,
            target_id=match.target_id,
            amount_minor=line.amount_minor,
            entry=next((e for e in entries if e is not None), None),
        )

    def candidates(self, line: StatementLine) -> list[Candidate]:
        """pain.001 files a debit could book, for the explain page's picker: executed up to a
        month before the booking (a day after), whose payouts still waiting for the bank add up
        to the line (``_fits``, what ``propose_manual`` checks). At most 20 files are looked at."""
        if line.is_credit or line.reversal or not line.amount_minor or not line.booking_date:
            return []
        batches = PayoutBatch.objects.filter(
            currency=line.currency,
            execution_date__gte=line.booking_date - SuggestionMatcher.manual_window,
            execution_date__lte=line.booking_date + timedelta(days=1),
        ).order_by("-execution_date", "-id")[:20]
        return [
            Candidate(
                BATCH,
                str(b.pk),
                f"Payout batch {b.batch_id}: {format_minor(line.amount_minor, b.currency)} for {b.count} payouts, "
                f"executed {b.execution_date:%Y-%m-%d} ({b.status})",
            )
            for b in batches
            if self._fits(line, b, self._expected(b))
        ]

    def propose_manual(self, line: StatementLine, target_id: str) -> Proposal:
        batch = PayoutBatch.objects.filter(
            Q(batch_id=target_id) | Q(pk=int(target_id) if target_id.isdigit() else None)
        ).first()
        if batch is None:
            raise InvalidInput(f"No payout batch {target_id}.", code="unknown_batch")
        named, payouts = self._payouts_for(line)
        if named is None or named.pk != batch.pk:
            payouts = self._expected(batch)
        if line.is_credit or line.reversal or not self._fits(line, batch, payouts):
            raise InvalidInput("The line's amount or count is not the batch's.", code="amount_mismatch")
        return self._proposal(line, batch, payouts)


class SuggestionMatcher:
    """A debit without a usable reference: payouts of the same amount and currency, sent within
    ``window`` of the booking date, scored up when the counterparty IBAN or name agrees."""

    name = "payout_suggest"
    order = 90
    target_type = PAYOUT
    window = timedelta(days=5)

    def propose(self, lines: Sequence[StatementLine]) -> list[Proposal]:
        wanted = [
            line
            for line in lines
            if not (line.is_credit or line.reversal or not line.amount_minor or not line.booking_date)
        ]
        if not wanted:
            return []
        # One query for the whole chunk (a large file must not cost a query per debit); each line
        # then keeps the first five of its amount, currency and date window.
        by_amount: dict[tuple[int, str], list[Payout]] = {}
        for payout in Payout.objects.filter(
            amount_minor__in={line.amount_minor for line in wanted},
            currency__in={line.currency for line in wanted},
            bank_debit_line_id__isnull=True,
            status__in=[PayoutStatus.SUBMITTED, PayoutStatus.SETTLED],
            submitted_at__date__gte=min(line.booking_date for line in wanted) - self.window,
            submitted_at__date__lte=max(line.booking_date for line in wanted) + timedelta(days=1),
        ).order_by("id"):
            by_amount.setdefault((payout.amount_minor, payout.currency), []).append(payout)
        proposals = []
        for line in wanted:
            earliest, latest = line.booking_date - self.window, line.booking_date + timedelta(days=1)
            candidates = [
                payout
                for payout in by_amount.get((line.amount_minor, line.currency), [])
                if earliest <= timezone.localdate(payout.submitted_at) <= latest
            ][:5]
            fingerprint = (
                crypto.iban_fingerprint(line.counterparty_iban.replace(" ", "").upper())
                if line.counterparty_iban
                else ""
            )
            for payout in candidates:
                score, reasons = 40, ["same amount and date window"]
                if fingerprint and fingerprint == payout.creditor_iban_fingerprint:
                    score, reasons = score + 40, [*reasons, "same IBAN"]
                if line.counterparty_name and line.counterparty_name.strip().lower() == payout.creditor_name.lower():
                    score, reasons = score + 15, [*reasons, "same name"]
                proposals.append(
                    Proposal(
                        line_id=line.pk,
                        target_type=PAYOUT,
                        target_id=str(payout.pk),
                        amount_minor=payout.amount_minor,
                        reason=", ".join(reasons),
                        score=score,
                        suggest=True,
                        data={"matcher": self.name},
                    )
                )
        return proposals

    def apply(self, proposals: Sequence[Proposal], *, lines: dict[int, StatementLine]) -> list[Applied]:
        return []

    def unapply(self, match: Match) -> None:
        EndToEndMatcher().unapply(match)

    # By hand staff look further back than the suggestions do: a statement imported late.
    manual_window = timedelta(days=31)

    def candidates(self, line: StatementLine) -> list[Candidate]:
        """Payouts a line could book, for the explain page's picker: the same currency and amount,
        sent within ``manual_window`` before the booking (a day after for time zones), still open
        for a debit (not yet seen leaving) or, for a credit, a return. Newest first, at most 20."""
        if line.reversal or not line.amount_minor or not line.booking_date:
            return []
        seen = "bank_return_line_id" if line.is_credit else "bank_debit_line_id"
        payouts = Payout.objects.filter(
            currency=line.currency,
            amount_minor=line.amount_minor,
            status__in=[PayoutStatus.SUBMITTED, PayoutStatus.SETTLED, PayoutStatus.RETURNED],
            submitted_at__date__gte=line.booking_date - self.manual_window,
            submitted_at__date__lte=line.booking_date + timedelta(days=1),
            **{f"{seen}__isnull": True},
        ).order_by("-submitted_at", "-id")[:20]
        return [
            Candidate(
                PAYOUT,
                str(p.pk),
                f"Payout {p.end_to_end_id}: {format_minor(p.amount_minor, p.currency)} to "
                f"{p.creditor_name or 'an erased person'}, sent {timezone.localdate(p.submitted_at):%Y-%m-%d} "
                f"({p.status})",
            )
            for p in payouts
        ]


MATCHERS = (EndToEndMatcher(), ReturnMatcher(), BatchMatcher(), SuggestionMatcher())
