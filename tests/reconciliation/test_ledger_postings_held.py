"""Postings held to the end of a block (``ledger_postings_held``): what a matching chunk uses so
that hot accounts are locked only for its last insert and the commit."""

import pytest
from django.db import transaction

from core.exceptions import InsufficientFunds
from reconciliation.models import JournalEntry, Posting
from reconciliation.selectors import account_balance, ledger_verify_report
from reconciliation.services import EntrySpec, Leg, ledger_entries_post, ledger_entry_post
from reconciliation.services.ledger import ledger_postings_held

pytestmark = pytest.mark.django_db


def posted(account):
    return account_balance(account_id=account.pk).posted_minor


def pay(chart, key, amount_minor):
    return EntrySpec(
        idempotency_key=key,
        kind="reward_approved",
        legs=[Leg.debit(chart.budget, amount_minor), Leg.credit(chart.payable, amount_minor)],
    )


def test_postings_land_when_the_block_ends(chart, funded_budget):
    """Given a funded budget, when a batch is posted inside the block, its entries exist at once,
    the balances move when the block ends, and the books verify."""
    with transaction.atomic(), ledger_postings_held():
        result = ledger_entries_post(entries=[pay(chart, "a", 300), pay(chart, "b", 200)])
        assert len(result.posted) == 2 and JournalEntry.objects.filter(idempotency_key__in=["a", "b"]).count() == 2
        assert Posting.objects.filter(entry__in=result.posted).count() == 0 and posted(chart.payable) == 0
    assert Posting.objects.filter(entry__in=result.posted).count() == 4
    assert (posted(funded_budget), posted(chart.payable)) == (100_000 - 500, 500)
    assert ledger_verify_report().ok


def test_another_ledger_write_inside_the_block_goes_after_the_held_postings(chart, funded_budget):
    """A single entry posted inside the block first lets the held postings in, so the account
    locks of the transaction are still taken in ascending order and the balances it sees are whole."""
    with transaction.atomic(), ledger_postings_held():
        ledger_entries_post(entries=[pay(chart, "a", 300)])
        ledger_entry_post(idempotency_key="c", kind="reward_approved", legs=pay(chart, "c", 100).legs)
        assert posted(chart.payable) == 400
        ledger_entries_post(entries=[pay(chart, "d", 50)])
        assert posted(chart.payable) == 400
    assert posted(chart.payable) == 450 and ledger_verify_report().ok


def test_a_refusal_from_held_postings_loses_the_whole_block(chart, funded_budget):
    """An overdraft refused by the database when the held postings go in is raised at the block's
    end, and nothing of the block is kept: not the entries, not the postings."""
    before = (JournalEntry.objects.count(), Posting.objects.count(), posted(funded_budget))
    with pytest.raises(InsufficientFunds), transaction.atomic(), ledger_postings_held():
        ledger_entries_post(entries=[pay(chart, "a", 60_000), pay(chart, "b", 60_000)])
    assert (JournalEntry.objects.count(), Posting.objects.count(), posted(funded_budget)) == before


@pytest.mark.django_db(transaction=True)
def test_the_block_needs_a_transaction_and_does_not_nest():
    with pytest.raises(RuntimeError), ledger_postings_held():
        pass
    with transaction.atomic(), ledger_postings_held(), pytest.raises(RuntimeError), ledger_postings_held():
        pass


def test_an_error_caught_around_the_block_leaves_no_entry_without_its_postings(chart, funded_budget):
    with transaction.atomic():
        try:
            with ledger_postings_held():
                ledger_entries_post(entries=[pay(chart, "lost", 300)])
                raise RuntimeError("the chunk failed after posting")
        except RuntimeError:
            pass  # the caller carries on in the same transaction
        spec = pay(chart, "after", 100)
        ledger_entry_post(idempotency_key=spec.idempotency_key, kind=spec.kind, legs=spec.legs)
    assert not JournalEntry.objects.filter(idempotency_key="lost").exists()
    assert (posted(funded_budget), posted(chart.payable)) == (100_000 - 100, 100)
    assert ledger_verify_report().ok


def test_an_entry_posted_in_the_block_can_be_reversed_in_it(chart, funded_budget):
    from reconciliation.services import ledger_entry_reverse

    with transaction.atomic(), ledger_postings_held():
        (entry,) = ledger_entries_post(entries=[pay(chart, "undo-me", 300)]).posted
        ledger_entry_reverse(entry=entry, idempotency_key="undo-me:reversed")
    assert (posted(funded_budget), posted(chart.payable)) == (100_000, 0)
    assert ledger_verify_report().ok


def test_a_savepoint_rolled_back_inside_the_block_takes_only_its_own_entry(chart, funded_budget):
    # a caller inside the block tries something in a savepoint, gives it up and carries on
    with transaction.atomic(), ledger_postings_held():
        try:
            with transaction.atomic():
                ledger_entries_post(entries=[pay(chart, "inner", 300)])
                raise ValueError("give up this part")
        except ValueError:
            pass
        ledger_entries_post(entries=[pay(chart, "kept", 100)])
    assert not JournalEntry.objects.filter(idempotency_key="inner").exists()
    kept = JournalEntry.objects.get(idempotency_key="kept")
    assert Posting.objects.filter(entry=kept).count() == 2
    assert ledger_verify_report().ok


def test_a_write_in_a_nested_savepoint_after_held_entries_is_refused_not_left_without_postings(chart, funded_budget):
    """Held postings flushed inside a deeper savepoint would roll back with it while their entry
    stays (an entry without postings, which no trigger checks): such a write is refused."""
    with transaction.atomic(), ledger_postings_held():
        ledger_entries_post(entries=[pay(chart, "held-first", 100)])
        with pytest.raises(RuntimeError, match="nested savepoint"), transaction.atomic():
            ledger_entries_post(entries=[pay(chart, "nested-after", 300)])
    held = JournalEntry.objects.get(idempotency_key="held-first")
    assert Posting.objects.filter(entry=held).count() == 2
    assert not JournalEntry.objects.filter(idempotency_key="nested-after").exists()
    assert ledger_verify_report().ok
