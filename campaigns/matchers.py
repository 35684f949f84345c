"""Reconciliation matchers owned by campaigns: a bank credit that carries a brand's funding
reference is that brand's top-up (bank → brand funds). Registered in CampaignsConfig.ready()."""

import re
from collections.abc import Sequence

from django.db import transaction

from campaigns.funding_reference import LENGTH, PREFIX, funding_reference_is_valid
from campaigns.models import Brand, BrandStatus
from campaigns.notifications import brand_topup_received
from campaigns.services.brands import brand_funds_account
from core.exceptions import InvalidInput
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from reconciliation.matching import Applied, Candidate, Proposal
from reconciliation.models import Match, StatementLine
from reconciliation.services import Leg, ledger_entry_post
from reconciliation.services.statements import ledger_minor

# Banks break and pad remittance text freely ("JB7F 3K9Q", "jb-7f3k9q"), so the text is searched
# with separators removed; the check character keeps a mistyped reference from matching anyone.
_CANDIDATE = re.compile(rf"{PREFIX}[2-9A-HJ-NP-Z]{{{LENGTH - len(PREFIX)}}}")


def funding_references_in(text: str) -> list[str]:
    squeezed = re.sub(r"[\s\-/.]", "", (text or "").upper())
    found = []
    for start in range(len(squeezed)):
        candidate = squeezed[start : start + LENGTH]
        if _CANDIDATE.fullmatch(candidate) and funding_reference_is_valid(candidate) and candidate not in found:
            found.append(candidate)
    return found


class BrandTopupMatcher:
    name = "brand_topup"
    order = 30
    target_type = "brand_topup"

    def propose(self, lines: Sequence[StatementLine]) -> list[Proposal]:
        wanted: dict[int, str] = {}
        for line in lines:
            if not line.is_credit or line.reversal or line.return_reason_code:
                continue
            refs = funding_references_in(f"{line.remittance} {line.status_note}")
            if len(refs) == 1:  # two brands' references in one payment: staff decide
                wanted[line.pk] = refs[0]
        brands = {
            b.funding_reference: b
            # A test tenant's reference names no brand: real money never lands in test mode.
            for b in Brand.objects.filter(funding_reference__in=set(wanted.values()), livemode=True).only(
                "pk", "funding_reference"
            )
        }
        return [
            Proposal(
                line_id=line_id,
                target_type=self.target_type,
                target_id=str(brands[ref].pk),
                amount_minor=0,
                reason=f"funding reference {ref}",
            )
            for line_id, ref in wanted.items()
            if ref in brands
        ]

    def apply(self, proposals: Sequence[Proposal], *, lines: dict[int, StatementLine]) -> list[Applied]:
        brands = Brand.objects.in_bulk([int(p.target_id) for p in proposals])
        applied = []
        for proposal in proposals:
            line = lines[proposal.line_id]
            brand = brands[int(proposal.target_id)]
            amount = ledger_minor(line)
            funds = brand_funds_account(brand=brand, currency=line.currency)
            entry = ledger_entry_post(
                idempotency_key=f"line:{line.pk}:topup",
                kind="brand_topup",
                legs=[Leg.debit(line.bank_account.ledger_account, amount), Leg.credit(funds, amount)],
                memo=f"Top-up from {line.counterparty_name or 'bank'}: {line.remittance}"[:500],
                effective_date=line.booking_date,
                reference_type="brand",
                reference_id=str(brand.pk),
            ).entry
            applied.append(
                Applied(
                    line_id=line.pk,
                    target_type=self.target_type,
                    target_id=str(brand.pk),
                    amount_minor=amount,
                    entry=entry,
                )
            )
            transaction.on_commit(lambda b=brand, a=amount, c=line.currency, lid=line.pk: _notify(b, a, c, lid))
        if applied:
            hook_fire(AUDIT_ROWS_WRITTEN)  # top-up entries are topup.received webhooks' source
        return applied

    def unapply(self, match: Match) -> None:
        # The engine reverses the top-up entry; if the brand has already allocated the money the
        # brand's no-overdraft funds account refuses it, and the undo fails with that reason.
        return None

    def candidates(self, line: StatementLine) -> list[Candidate]:
        """Brands a credit could be the top-up of, for the explain page's picker: the ones whose
        funding reference the remittance carries (several, so no match ran), else every live,
        active brand by name (at most 50)."""
        if not line.is_credit or line.reversal or line.return_reason_code:
            return []
        brands = Brand.objects.filter(livemode=True)
        named = brands.filter(funding_reference__in=funding_references_in(f"{line.remittance} {line.status_note}"))
        chosen = named if named.exists() else brands.filter(status=BrandStatus.ACTIVE).order_by("name")[:50]
        return [
            Candidate(self.target_type, str(b.pk), f"Top-up of {b.name} (reference {b.funding_reference})")
            for b in chosen
        ]

    def propose_manual(self, line: StatementLine, target_id: str) -> Proposal:
        if not line.is_credit:
            raise InvalidInput("Only money coming in can be a brand's top-up.", code="not_a_credit")
        brand = (
            Brand.objects.filter(pk=int(target_id)).first()
            if target_id.isdigit()
            else Brand.objects.filter(funding_reference=target_id.strip().upper()).first()
        )
        if brand is None:
            raise InvalidInput(f"No brand {target_id!r} (give its id or funding reference).", code="unknown_brand")
        return Proposal(line_id=line.pk, target_type=self.target_type, target_id=str(brand.pk), amount_minor=0)


def _notify(brand: Brand, amount_minor: int, currency: str, line_id: int) -> None:
    brand_topup_received(brand=brand, amount_minor=amount_minor, currency=currency, statement_line_id=line_id)
