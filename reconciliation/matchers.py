"""Matchers that need no domain knowledge: a bank reversal (RvslInd) cancels an earlier line."""

from collections.abc import Sequence

from django.db.models import Q
from django.utils import timezone

from core.exceptions import InvalidInput
from reconciliation.matching import Applied, Proposal, matcher_by_name
from reconciliation.models import Match, MatchStatus, StatementLine, StatementLineStatus
from reconciliation.services.entries import ledger_entry_reverse


class ReversalMatcher:
    """A line flagged ``RvslInd`` undoes an earlier line of the same amount in the other direction
    on the same account (same end-to-end id or bank reference when the bank gives one). The earlier
    line's match is undone (its matcher reverts the domain change, its entry is reversed) or its
    suspense entry reversed; then the two lines explain each other and need no entry: their bank
    effects cancel."""

    name = "reversal"
    order = 5
    target_type = "statement_line"

    def _original(self, line: StatementLine) -> StatementLine | None:
        qs = StatementLine.objects.filter(
            bank_account_id=line.bank_account_id,
            amount=line.amount,
            reversal=False,
            status__in=[StatementLineStatus.MATCHED, StatementLineStatus.UNMATCHED, StatementLineStatus.SUGGESTED],
        ).exclude(credit_debit=line.credit_debit)
        qs = qs.exclude(matches__status=MatchStatus.ACTIVE, matches__matcher=self.name)
        if line.end_to_end_id:
            qs = qs.filter(end_to_end_id=line.end_to_end_id)
        elif line.entry_reference:
            qs = qs.filter(Q(entry_reference=line.entry_reference) | Q(remittance=line.remittance))
        else:
            qs = qs.filter(remittance=line.remittance, counterparty_iban=line.counterparty_iban)
        return qs.order_by("-pk").first()

    def propose(self, lines: Sequence[StatementLine]) -> list[Proposal]:
        proposals = []
        for line in lines:
            if not line.reversal:
                continue
            original = self._original(line)
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
            active = Match.objects.select_for_update().filter(line=original, status=MatchStatus.ACTIVE).first()
            undo_entry = None
            if active is not None:
                if active.matcher == self.name:
                    continue
                matcher = matcher_by_name(active.matcher)
                if matcher is not None:
                    matcher.unapply(active)
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
