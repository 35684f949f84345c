"""Matchers that need no domain knowledge: a bank reversal (RvslInd) cancels an earlier line."""

from collections.abc import Sequence

from django.db.models import Q
from django.utils import timezone

from core.exceptions import InvalidInput
from reconciliation.matching import Applied, Proposal, matcher_by_name
from reconciliation.models import Match, MatchStatus, StatementLine, StatementLineStatus
from reconciliation.services.entries import ledger_entry_reverse

STATEMENT_LINE = "statement_line"


class ReversalMatcher:
    """A line flagged ``RvslInd`` undoes an earlier line of the same amount in the other direction
    on the same account (same end-to-end id or bank reference when the bank gives one).

    It runs after the domain matchers (``order``), so an original booked in the same statement
    has been matched by then. When the original's match belongs to a matcher that can reopen it
    (``reverse``: a payout debit reversed is a payout returned), that matcher books the reversal
    line and the original's match stands: both bookings stay explained, the ledger follows the
    money back. Otherwise the original's match is undone (its matcher reverts the domain change,
    its entry is reversed), or its suspense entry reversed, or — an original still new in this
    chunk — it is simply taken; then the two lines explain each other and need no entry: their
    bank effects cancel. The reversal line's match always targets the original line, which is
    how an original is known to be reversed already."""

    name = "reversal"
    order = 80
    target_type = STATEMENT_LINE

    def _original(self, line: StatementLine, chunk: set[int]) -> StatementLine | None:
        qs = StatementLine.objects.filter(
            Q(status__in=[StatementLineStatus.MATCHED, StatementLineStatus.UNMATCHED, StatementLineStatus.SUGGESTED])
            | Q(status=StatementLineStatus.NEW, pk__in=chunk),
            bank_account_id=line.bank_account_id,
            amount=line.amount,
            reversal=False,
        ).exclude(credit_debit=line.credit_debit)
        qs = qs.exclude(matches__status=MatchStatus.ACTIVE, matches__matcher=self.name)
        if line.end_to_end_id:
            qs = qs.filter(end_to_end_id=line.end_to_end_id)
        elif line.entry_reference:
            qs = qs.filter(Q(entry_reference=line.entry_reference) | Q(remittance=line.remittance))
        else:
            qs = qs.filter(remittance=line.remittance, counterparty_iban=line.counterparty_iban)
        for original in qs.order_by("-pk")[:5]:
            if not self._reversed(original.pk):
                return original
        return None

    def _reversed(self, original_id: int) -> bool:
        return Match.objects.filter(
            matcher=self.name, target_type=STATEMENT_LINE, target_id=str(original_id), status=MatchStatus.ACTIVE
        ).exists()

    def propose(self, lines: Sequence[StatementLine]) -> list[Proposal]:
        chunk = {line.pk for line in lines}
        proposals = []
        for line in lines:
            if not line.reversal:
                continue
            original = self._original(line, chunk - {line.pk})
            if original is not None:
                proposals.append(
                    Proposal(
                        line_id=line.pk,
                        target_type=self.target_type,
                        target_id=str(original.pk),
                        amount_minor=line.amount_minor or 0,
                        reason=f"reverses line {original.pk}",
                    )
                )
        return proposals

    def apply(self, proposals: Sequence[Proposal], *, lines: dict[int, StatementLine]) -> list[Applied]:
        applied = []
        now = timezone.now()
        for proposal in proposals:
            original = StatementLine.objects.select_for_update(of=("self",)).get(pk=int(proposal.target_id))
            if self._reversed(original.pk) or any(a.target_id == proposal.target_id for a in applied):
                continue
            active = Match.objects.select_for_update().filter(line=original, status=MatchStatus.ACTIVE).first()
            if active is not None and active.matcher == self.name:
                continue
            matcher = matcher_by_name(active.matcher) if active is not None else None
            reopen = getattr(matcher, "reverse", None)
            reopened = reopen(active, lines[proposal.line_id]) if reopen is not None else None
            if reopened is not None:
                applied.append(
                    Applied(
                        line_id=proposal.line_id,
                        target_type=self.target_type,
                        target_id=proposal.target_id,
                        amount_minor=proposal.amount_minor,
                        entry=reopened.entry,
                    )
                )
                continue
            if active is not None:
                if matcher is not None:
                    matcher.unapply(active)
                undo_entry = None
                if active.entry_id:
                    undo_entry = ledger_entry_reverse(
                        entry=active.entry,
                        idempotency_key=f"match:{active.pk}:undo",
                        memo=f"Bank reversed line {original.pk}",
                    ).entry
                Match.objects.filter(pk=active.pk).update(
                    status=MatchStatus.UNDONE, undone_at=now, undo_entry=undo_entry, note="reversed by the bank"
                )
            elif original.suspense_entry_id:
                ledger_entry_reverse(
                    entry=original.suspense_entry,
                    idempotency_key=f"line:{original.pk}:unpark:{original.suspense_entry_id}",
                    memo=f"Bank reversed line {original.pk}",
                )
            Match.objects.create(
                line=original,
                matcher=self.name,
                target_type=self.target_type,
                target_id=str(proposal.line_id),
                amount_minor=proposal.amount_minor,
                note="reversed by the bank",
            )
            StatementLine.objects.filter(pk=original.pk).update(status=StatementLineStatus.MATCHED, suspense_entry=None)
            if original.pk in lines:  # booked in this chunk: the engine must not park it
                lines[original.pk].status = StatementLineStatus.MATCHED
            applied.append(
                Applied(
                    line_id=proposal.line_id,
                    target_type=self.target_type,
                    target_id=proposal.target_id,
                    amount_minor=proposal.amount_minor,
                    entry=None,
                )
            )
        return applied

    def unapply(self, match: Match) -> None:
        raise InvalidInput("A bank reversal cannot be undone by hand; ask the bank.", code="reversal_is_final")

    def propose_manual(self, line: StatementLine, target_id: str) -> Proposal:
        raise InvalidInput("Reversals are matched automatically.", code="reversal_is_automatic")
