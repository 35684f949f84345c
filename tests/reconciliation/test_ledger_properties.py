"""Random sequences of ledger operations against a small model of the books.

The model predicts every outcome (posted, replayed or refused, and why); after each step the
database must agree with the model and with itself: each materialised balance equals the sum of
its postings, held equals the pending holds, the trial balance is zero, no no-overdraft account is
below its holds, and a resolved hold never changes again. A refusal must leave the books untouched.
"""

import itertools
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, multiple, rule, run_state_machine_as_test

from core.exceptions import AlreadyReversed, HoldNotPending, IdempotencyConflict, InsufficientFunds
from reconciliation.models import Account, AccountKind, Hold, HoldStatus, JournalEntry, Posting
from reconciliation.selectors import ledger_verify_report
from reconciliation.services import (
    EntrySpec,
    HoldSpec,
    Leg,
    ledger_entries_post,
    ledger_entry_post,
    ledger_entry_reverse,
    ledger_hold_commit,
    ledger_hold_void,
    ledger_holds_create,
    ledger_holds_expire,
)
from tests.reconciliation.factories import ledger_snapshot

# name, kind, allow_overdraft. Two no-overdraft liabilities (campaign budgets) and one
# no-overdraft asset, so both normal sides of the overdraft rule get exercised.
CHART = [
    ("equity", AccountKind.EQUITY, True),
    ("bank", AccountKind.ASSET, True),
    ("float", AccountKind.ASSET, False),
    ("budget_a", AccountKind.LIABILITY, False),
    ("budget_b", AccountKind.LIABILITY, False),
    ("payable", AccountKind.LIABILITY, True),
    ("fees", AccountKind.INCOME, True),
]
NAMES = [name for name, _, _ in CHART]
HOLDABLE = ["float", "budget_a", "budget_b", "bank"]

amounts = st.integers(min_value=1, max_value=5_000)
transfers = st.tuples(st.sampled_from(NAMES), st.sampled_from(NAMES), amounts).filter(lambda t: t[0] != t[1])


@dataclass
class ModelHold:
    pk: int
    account: str
    amount: int
    expires_at: object
    status: str = HoldStatus.PENDING
    commit_key: str = ""
    commit_legs: list = field(default_factory=list)
    resolved_at: object = None  # recorded the first time the database shows the hold resolved


@dataclass
class ModelEntry:
    pk: int
    key: str
    kind: str
    legs: list  # (account name, signed amount)
    reversed_by_key: str = ""
    plain: bool = True  # posted by ledger_entry_post, so a replay can resend it as is


@dataclass
class Books:
    posted: dict = field(default_factory=lambda: dict.fromkeys(NAMES, 0))
    holds: dict = field(default_factory=dict)

    def held(self, name):
        return sum(h.amount for h in self.holds.values() if h.account == name and h.status == HoldStatus.PENDING)


class LedgerMachine(RuleBasedStateMachine):
    holds = Bundle("holds")
    entries = Bundle("entries")

    def __init__(self):
        super().__init__()
        # One savepoint per example, rolled back in teardown: every example starts from the same
        # opening books and the pytest-django test transaction stays clean.
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        self.accounts = {
            name: Account.objects.create(
                code=f"prop:{name}:EUR", name=name, kind=kind, currency="EUR", allow_overdraft=overdraft
            )
            for name, kind, overdraft in CHART
        }
        self.books = Books()
        self.keys = itertools.count(1)
        self.now = timezone.now()
        # Opening balances, so that holds and spending succeed often enough to reach commits,
        # voids and expiries; the rules still drive accounts to the edge and past it.
        opening = [("bank", 12_000), ("float", 4_000), ("equity", -4_000), ("budget_a", -6_000), ("budget_b", -6_000)]
        ledger_entry_post(idempotency_key="opening", kind="opening", legs=self._legs(opening))
        self._apply(opening)

    def teardown(self):
        transaction.set_rollback(True)
        self._atomic.__exit__(None, None, None)

    # --- the model -------------------------------------------------------------------------------

    def _delta(self, name, signed_amount):
        """How a leg (positive = debit) moves an account's balance on its normal side."""
        return signed_amount if self.accounts[name].is_debit_normal else -signed_amount

    def _would_overdraw(self, legs_in_order, posted=None):
        """Apply legs one by one (the database checks each posting as it lands); True if any
        no-overdraft account would go below its pending holds."""
        posted = dict(posted or self.books.posted)
        for name, amount in legs_in_order:
            posted[name] += self._delta(name, amount)
            if not self.accounts[name].allow_overdraft and posted[name] < self.books.held(name):
                return True
        return False

    def _apply(self, legs):
        for name, amount in legs:
            self.books.posted[name] += self._delta(name, amount)

    def _legs(self, legs):
        return [Leg(account=self.accounts[name], amount_minor=amount, currency="EUR") for name, amount in legs]

    def _key(self, prefix):
        return f"{prefix}:{next(self.keys)}"

    def _expect_refusal(self, error, call):
        before = ledger_snapshot()
        try:
            call()
        except error:
            assert ledger_snapshot() == before
            return
        raise AssertionError(f"expected {error.__name__}")

    # --- rules -----------------------------------------------------------------------------------

    @rule(target=entries, transfer=transfers)
    def post(self, transfer):
        debit, credit, amount = transfer
        legs = [(debit, amount), (credit, -amount)]
        key = self._key("post")
        if self._would_overdraw(legs):
            self._expect_refusal(
                InsufficientFunds,
                lambda: ledger_entry_post(idempotency_key=key, kind="transfer", legs=self._legs(legs)),
            )
            return multiple()
        result = ledger_entry_post(idempotency_key=key, kind="transfer", legs=self._legs(legs))
        assert not result.replayed
        self._apply(legs)
        return ModelEntry(pk=result.entry.pk, key=key, kind="transfer", legs=legs)

    @rule(
        target=entries,
        name=st.sampled_from(["float", "budget_a", "budget_b"]),
        amount=st.integers(min_value=1, max_value=20_000),
    )
    def fund(self, name, amount):
        """Money into a no-overdraft account, so the rules that spend have something to spend."""
        source = "bank" if self.accounts[name].is_debit_normal else "equity"
        legs = [(name, amount), (source, -amount)] if name == "float" else [(source, amount), (name, -amount)]
        key = self._key("fund")
        result = ledger_entry_post(idempotency_key=key, kind="fund", legs=self._legs(legs))
        self._apply(legs)
        return ModelEntry(pk=result.entry.pk, key=key, kind="fund", legs=legs)

    @rule(entry=entries, change_amount=st.booleans())
    def replay(self, entry, change_amount):
        if not entry.plain:
            return
        before = ledger_snapshot()
        if change_amount:
            legs = [(name, amount * 2) for name, amount in entry.legs]
            self._expect_refusal(
                IdempotencyConflict,
                lambda: ledger_entry_post(idempotency_key=entry.key, kind=entry.kind, legs=self._legs(legs)),
            )
            return
        result = ledger_entry_post(idempotency_key=entry.key, kind=entry.kind, legs=self._legs(entry.legs))
        assert result.replayed and result.entry.pk == entry.pk
        assert ledger_snapshot() == before

    @rule(target=entries, batch=st.lists(transfers, min_size=1, max_size=4), all_or_nothing=st.booleans())
    def post_batch(self, batch, all_or_nothing):
        specs, legs_by_key = [], {}
        for debit, credit, amount in batch:
            key = self._key("batch")
            legs_by_key[key] = [(debit, amount), (credit, -amount)]
            specs.append(EntrySpec(idempotency_key=key, kind="transfer", legs=self._legs(legs_by_key[key])))
        call = lambda: ledger_entries_post(entries=specs, all_or_nothing=all_or_nothing)  # noqa: E731

        if all_or_nothing:
            # The batch inserts all postings sorted by (account, entry): each account sees its
            # legs in batch order, and any dip below its holds refuses the whole batch.
            ordered = sorted(
                ((name, amount, i) for i, legs in enumerate(legs_by_key.values()) for name, amount in legs),
                key=lambda leg: (self.accounts[leg[0]].pk, leg[2]),
            )
            if self._would_overdraw([(name, amount) for name, amount, _ in ordered]):
                self._expect_refusal(InsufficientFunds, call)
                return multiple()
            expected_posted, expected_refused = list(legs_by_key), []
        else:
            expected_posted, expected_refused, posted = [], [], dict(self.books.posted)
            for key, legs in legs_by_key.items():
                if self._would_overdraw(legs, posted):
                    expected_refused.append((key, "insufficient_funds"))
                    continue
                expected_posted.append(key)
                for name, amount in legs:
                    posted[name] += self._delta(name, amount)

        result = call()
        assert [e.idempotency_key for e in result.posted] == expected_posted
        assert [(r.idempotency_key, r.code) for r in result.refused] == expected_refused
        assert result.replayed == []
        new = []
        for entry in result.posted:
            self._apply(legs_by_key[entry.idempotency_key])
            new.append(
                ModelEntry(
                    pk=entry.pk, key=entry.idempotency_key, kind="transfer", legs=legs_by_key[entry.idempotency_key]
                )
            )
        return multiple(*new)

    @rule(
        target=holds,
        name=st.sampled_from(HOLDABLE),
        hold_amounts=st.lists(amounts, min_size=1, max_size=3),
        expires_in=st.none() | st.integers(min_value=0, max_value=60),
    )
    def holds_create(self, name, hold_amounts, expires_in):
        expires_at = None if expires_in is None else self.now + timedelta(minutes=expires_in)
        specs = [HoldSpec(self._key("hold"), amount, expires_at=expires_at) for amount in hold_amounts]

        def call():
            return ledger_holds_create(account=self.accounts[name], currency="EUR", holds=specs)

        account = self.accounts[name]
        if not account.allow_overdraft and self.books.posted[name] - self.books.held(name) < sum(hold_amounts):
            self._expect_refusal(InsufficientFunds, call)
            return multiple()
        created = call()
        assert not any(h.pk in self.books.holds for h in created)
        # A retry with the same keys holds nothing more.
        before = ledger_snapshot()
        assert [h.pk for h in call()] == [h.pk for h in created]
        assert ledger_snapshot() == before
        models = [
            ModelHold(pk=h.pk, account=name, amount=amount, expires_at=expires_at)
            for h, amount in zip(created, hold_amounts, strict=True)
        ]
        self.books.holds.update({model.pk: model for model in models})
        return multiple(*models)

    @rule(
        target=entries, hold=holds, share=st.just(100) | st.integers(min_value=1, max_value=99), with_fee=st.booleans()
    )
    def hold_commit(self, hold, share, with_fee):
        taken = max(1, hold.amount * share // 100)  # share == 100 commits in full
        fee = taken // 10 if with_fee else 0
        # Take ``taken`` out of the held account on its normal side; pay it to the recipient (and fees).
        out = -taken if self.accounts[hold.account].is_debit_normal else taken
        legs = [(hold.account, out), ("payable", -out + (fee if out > 0 else -fee))]
        if fee:
            legs.append(("fees", -fee if out > 0 else fee))
        key = self._key("commit")

        def call(key, legs):
            return ledger_hold_commit(
                hold=Hold.objects.get(pk=hold.pk), idempotency_key=key, kind="commit", legs=self._legs(legs)
            )

        if hold.status != HoldStatus.PENDING:
            self._expect_refusal(HoldNotPending, lambda: call(key, legs))
            if hold.commit_key:
                # A retried commit (same key, same legs) is answered with the first entry.
                before = ledger_snapshot()
                assert call(hold.commit_key, hold.commit_legs).replayed
                assert ledger_snapshot() == before
            return multiple()
        result = call(key, legs)
        assert not result.replayed
        hold.status, hold.commit_key, hold.commit_legs = HoldStatus.COMMITTED, key, legs
        self._apply(legs)
        return ModelEntry(pk=result.entry.pk, key=key, kind="commit", legs=legs, plain=False)

    @rule(hold=holds)
    def hold_void(self, hold):
        def call():
            return ledger_hold_void(hold=Hold.objects.get(pk=hold.pk))

        if hold.status == HoldStatus.PENDING:
            assert not call().replayed
            hold.status = HoldStatus.VOIDED
        elif hold.status == HoldStatus.VOIDED:
            before = ledger_snapshot()
            assert call().replayed
            assert ledger_snapshot() == before
        else:
            self._expect_refusal(HoldNotPending, call)

    @rule(minutes=st.integers(min_value=0, max_value=90))
    def expire(self, minutes):
        self.now += timedelta(minutes=minutes)
        due = [
            h
            for h in self.books.holds.values()
            if h.status == HoldStatus.PENDING and h.expires_at is not None and h.expires_at <= self.now
        ]
        assert ledger_holds_expire(now=self.now) == len(due)
        for h in due:
            h.status = HoldStatus.EXPIRED

    @rule(target=entries, entry=entries)
    def reverse(self, entry):
        legs = [(name, -amount) for name, amount in entry.legs]

        def call(key):
            return ledger_entry_reverse(entry=JournalEntry.objects.get(pk=entry.pk), idempotency_key=key)

        if entry.reversed_by_key:
            self._expect_refusal(AlreadyReversed, lambda: call(self._key("reverse")))
            before = ledger_snapshot()
            assert call(entry.reversed_by_key).replayed
            assert ledger_snapshot() == before
            return multiple()
        key = self._key("reverse")
        if self._would_overdraw(sorted(legs, key=lambda leg: self.accounts[leg[0]].pk)):
            self._expect_refusal(InsufficientFunds, lambda: call(key))
            return multiple()
        result = call(key)
        entry.reversed_by_key = key
        self._apply(legs)
        return ModelEntry(pk=result.entry.pk, key=key, kind="reversal", legs=legs, plain=False)

    # --- invariants ------------------------------------------------------------------------------

    @invariant()
    def books_agree_with_the_model_and_with_themselves(self):
        # The running balance stored on each account's latest posting is what statements show.
        last_balance = Posting.objects.filter(account=OuterRef("pk")).order_by("-pk").values("balance_after_minor")
        rows = {
            a.code.split(":")[1]: a
            for a in Account.objects.filter(code__startswith="prop:").annotate(last_balance=Subquery(last_balance[:1]))
        }
        for name in NAMES:
            assert rows[name].posted_minor == self.books.posted[name], name
            assert rows[name].held_minor == self.books.held(name), name
            assert rows[name].last_balance in (None, rows[name].posted_minor), name
            if not rows[name].allow_overdraft:
                assert rows[name].posted_minor >= rows[name].held_minor, name
        report = ledger_verify_report()
        assert report.ok, report
        assert all(row.difference_minor == 0 for row in report.trial_balance)

    @invariant()
    def holds_resolve_once(self):
        stored = {h.pk: h for h in Hold.objects.filter(pk__in=list(self.books.holds))}
        for pk, model in self.books.holds.items():
            assert stored[pk].status == model.status, pk
            if model.status == HoldStatus.PENDING:
                continue
            # The first resolution is final: its timestamp never moves afterwards.
            if model.resolved_at is None:
                model.resolved_at = stored[pk].resolved_at
            assert stored[pk].resolved_at == model.resolved_at, pk


def test_random_operations_keep_the_books_consistent(db):
    run_state_machine_as_test(
        LedgerMachine,
        settings=settings(
            max_examples=35,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
