"""The ledger's services, one behaviour per test, on whichever database DATABASE_URL names.

Every refusal is checked twice: the error (type and stable code) and that nothing was written.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.exceptions import (
    AlreadyReversed,
    CurrencyMismatch,
    HoldNotPending,
    IdempotencyConflict,
    InactiveAccount,
    InsufficientFunds,
    InvalidInput,
    NotFound,
    UnbalancedEntry,
)
from reconciliation.models import Account, AccountKind, Hold, HoldStatus, JournalEntry, Posting
from reconciliation.selectors import (
    account_balance,
    account_balance_by_code,
    account_statement,
    hold_pending_total,
    ledger_verify_report,
    trial_balance,
)
from reconciliation.services import (
    EntrySpec,
    HoldCommit,
    HoldSpec,
    Leg,
    account_get_or_create,
    account_set_active,
    ledger_entries_post,
    ledger_entry_post,
    ledger_entry_reverse,
    ledger_hold_commit,
    ledger_hold_void,
    ledger_holds_commit,
    ledger_holds_create,
    ledger_holds_expire,
)
from tests.reconciliation.factories import (
    AccountFactory,
    BankAccountFactory,
    BudgetAccountFactory,
    fund,
    ledger_snapshot,
)


def pay(chart, amount_minor):
    """Budget → recipient payable: the legs of an approved reward."""
    return [Leg.debit(chart.budget, amount_minor), Leg.credit(chart.payable, amount_minor)]


def posted(account):
    return account_balance(account_id=account.pk).posted_minor


# --- accounts ------------------------------------------------------------------------------------


def test_account_get_or_create_is_idempotent(db):
    first = account_get_or_create(code="platform:fees:EUR", name="Fees", kind=AccountKind.INCOME, currency="eur")
    again = account_get_or_create(code="platform:fees:EUR", name="Other name", kind="income", currency="EUR")

    assert again.pk == first.pk
    assert first.currency == "EUR"
    assert Account.objects.filter(code="platform:fees:EUR").count() == 1


@pytest.mark.parametrize(("kind", "currency"), [(AccountKind.LIABILITY, "EUR"), (AccountKind.INCOME, "GBP")])
def test_account_get_or_create_refuses_another_kind_or_currency_for_an_existing_code(db, kind, currency):
    account_get_or_create(code="platform:fees:EUR", name="Fees", kind=AccountKind.INCOME, currency="EUR")

    with pytest.raises(InvalidInput) as exc:
        account_get_or_create(code="platform:fees:EUR", name="Fees", kind=kind, currency=currency)

    assert exc.value.code == "account_conflict"
    assert Account.objects.count() == 1


def test_account_get_or_create_refuses_an_unsupported_currency(db):
    with pytest.raises(InvalidInput) as exc:
        account_get_or_create(code="x:XYZ", name="X", kind=AccountKind.ASSET, currency="XYZ")

    assert exc.value.code == "unknown_currency"
    assert not Account.objects.exists()


def test_account_get_or_create_refuses_an_unknown_kind(db):
    with pytest.raises(InvalidInput):
        account_get_or_create(code="x:EUR", name="X", kind="cash", currency="EUR")

    assert not Account.objects.exists()


# --- posting one entry ---------------------------------------------------------------------------


def test_post_balanced_entry_moves_both_balances(chart, funded_budget):
    result = ledger_entry_post(
        idempotency_key="reward:1:approve",
        kind="reward_approve",
        legs=pay(chart, 2_500),
        memo="reward 1",
        reference_type="reward",
        reference_id=1,
    )

    assert result.replayed is False
    entry = JournalEntry.objects.get(pk=result.entry.pk)
    assert (entry.kind, entry.reference_type, entry.reference_id) == ("reward_approve", "reward", "1")
    assert sorted(entry.postings.values_list("amount_minor", flat=True)) == [-2_500, 2_500]
    assert posted(chart.budget) == 97_500
    assert posted(chart.payable) == 2_500
    assert ledger_verify_report().ok


def test_post_with_debit_normal_accounts_moves_them_on_the_debit_side(chart):
    bank = BankAccountFactory()

    ledger_entry_post(
        idempotency_key="topup:1", kind="topup", legs=[Leg.debit(bank, 10_000), Leg.credit(chart.brand_funds, 10_000)]
    )

    assert posted(bank) == 10_000
    assert posted(chart.brand_funds) == 10_000
    assert all(row.difference_minor == 0 for row in trial_balance())


def test_post_replay_with_the_same_content_returns_the_same_entry_and_posts_nothing(chart, funded_budget):
    first = ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 2_500))
    before = ledger_snapshot()

    # A retried request, the legs listed in another order and another memo: still the same entry.
    again = ledger_entry_post(
        idempotency_key="reward:1:approve", kind="reward_approve", legs=list(reversed(pay(chart, 2_500))), memo="retry"
    )

    assert again.replayed is True
    assert again.entry.pk == first.entry.pk
    assert ledger_snapshot() == before


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"legs_amount": 2_501}, id="other amount"),
        pytest.param({"kind": "reward_void"}, id="other kind"),
        pytest.param({"reference_id": "2"}, id="other reference"),
    ],
)
def test_post_same_key_other_content_is_an_idempotency_conflict_and_posts_nothing(chart, funded_budget, change):
    first = ledger_entry_post(
        idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 2_500), reference_id="1"
    )
    before = ledger_snapshot()

    with pytest.raises(IdempotencyConflict) as exc:
        ledger_entry_post(
            idempotency_key="reward:1:approve",
            kind=change.get("kind", "reward_approve"),
            legs=pay(chart, change.get("legs_amount", 2_500)),
            reference_id=change.get("reference_id", "1"),
        )

    assert exc.value.code == "idempotency_conflict"
    assert exc.value.details["entry_id"] == first.entry.pk
    assert ledger_snapshot() == before


@pytest.mark.parametrize(
    ("make_legs", "error", "code"),
    [
        pytest.param(
            lambda c: [Leg.debit(c.budget, 100), Leg.credit(c.payable, 99)],
            UnbalancedEntry,
            "unbalanced_entry",
            id="unbalanced",
        ),
        pytest.param(lambda c: [Leg.debit(c.budget, 100)], UnbalancedEntry, "unbalanced_entry", id="single leg"),
        pytest.param(lambda c: [], UnbalancedEntry, "unbalanced_entry", id="no legs"),
        pytest.param(
            lambda c: [Leg(c.budget, 100, "USD"), Leg(c.payable, -100, "USD")],
            CurrencyMismatch,
            "currency_mismatch",
            id="currency mismatch",
        ),
        pytest.param(
            lambda c: [Leg.debit(c.budget, 0), Leg.credit(c.payable, 0)], InvalidInput, "invalid_amount", id="zero"
        ),
        pytest.param(
            lambda c: [Leg.debit(c.budget, 1.5), Leg.credit(c.payable, 1.5)],
            InvalidInput,
            "invalid_amount",
            id="float",
        ),
        pytest.param(
            lambda c: [Leg.debit(c.budget, True), Leg.credit(c.payable, True)],
            InvalidInput,
            "invalid_amount",
            id="bool",
        ),
        pytest.param(
            lambda c: [Leg.debit(c.budget, 100), Leg.credit(c.budget, 100)],
            InvalidInput,
            "invalid_entry",
            id="duplicate account",
        ),
        pytest.param(
            lambda c: [Leg.debit(c.budget, 100), Leg.credit(c.payable, 60), Leg.credit(c.budget, 40)],
            InvalidInput,
            "invalid_entry",
            id="account twice among three legs",
        ),
        pytest.param(
            lambda c: [Leg.debit(c.budget, 200_000), Leg.credit(c.payable, 200_000)],
            InsufficientFunds,
            "insufficient_funds",
            id="no-overdraft account would go negative",
        ),
    ],
)
def test_post_refusals_write_nothing(chart, funded_budget, make_legs, error, code):
    before = ledger_snapshot()

    with pytest.raises(error) as exc:
        ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=make_legs(chart))

    assert exc.value.code == code
    assert ledger_snapshot() == before
    assert not JournalEntry.objects.filter(idempotency_key="reward:1:approve").exists()


def test_post_refused_for_insufficient_funds_leaves_the_key_free_for_a_corrected_request(chart, funded_budget):
    with pytest.raises(InsufficientFunds):
        ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100_001))

    result = ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100_000))

    assert result.replayed is False
    assert posted(chart.budget) == 0


def test_post_counts_pending_holds_as_spent_on_a_no_overdraft_account(chart, funded_budget):
    hold(chart, 60_000)
    before = ledger_snapshot()

    with pytest.raises(InsufficientFunds):
        ledger_entry_post(idempotency_key="reward:2:approve", kind="reward_approve", legs=pay(chart, 40_001))

    assert ledger_snapshot() == before


def test_post_to_an_inactive_account_is_refused(chart, funded_budget):
    account_set_active(account=chart.payable, is_active=False)
    before = ledger_snapshot()

    with pytest.raises(InactiveAccount) as exc:
        ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100))

    assert exc.value.code == "inactive_account"
    assert ledger_snapshot() == before


def test_post_refuses_an_amount_beyond_the_bigint_range(chart, funded_budget):
    before = ledger_snapshot()

    with pytest.raises(InvalidInput):
        ledger_entry_post(
            idempotency_key="huge",
            kind="suspense",
            legs=[Leg.debit(chart.payable, 2**63), Leg.credit(chart.fees, 2**63)],
        )

    assert ledger_snapshot() == before


@pytest.mark.parametrize(("key", "kind"), [("", "reward_approve"), ("k" * 201, "reward_approve"), ("key", "")])
def test_post_needs_a_key_and_a_kind(chart, funded_budget, key, kind):
    before = ledger_snapshot()

    with pytest.raises(InvalidInput):
        ledger_entry_post(idempotency_key=key, kind=kind, legs=pay(chart, 100))

    assert ledger_snapshot() == before


def test_a_no_overdraft_account_may_reach_exactly_zero(chart, funded_budget):
    ledger_entry_post(idempotency_key="drain", kind="reward_approve", legs=pay(chart, 100_000))

    assert account_balance(account_id=chart.budget.pk).available_minor == 0


def test_an_overdraft_account_may_go_negative(chart):
    ledger_entry_post(
        idempotency_key="suspense:1",
        kind="suspense",
        legs=[Leg.debit(chart.payable, 500), Leg.credit(chart.fees, 500)],
    )

    assert posted(chart.payable) == -500
    assert ledger_verify_report().ok


# --- batches -------------------------------------------------------------------------------------


def spec(chart, n, amount_minor=1_000):
    return EntrySpec(idempotency_key=f"reward:{n}:approve", kind="reward_approve", legs=pay(chart, amount_minor))


def test_batch_all_or_nothing_posts_every_entry(chart, funded_budget):
    result = ledger_entries_post(entries=[spec(chart, n) for n in range(5)])

    assert [e.idempotency_key for e in result.posted] == [f"reward:{n}:approve" for n in range(5)]
    assert result.replayed == [] and result.refused == []
    assert posted(chart.budget) == 95_000
    assert posted(chart.payable) == 5_000
    # The running balance is stored in posting order, one entry after the other.
    assert list(
        Posting.objects.filter(account=chart.payable).order_by("pk").values_list("balance_after_minor", flat=True)
    ) == [1_000, 2_000, 3_000, 4_000, 5_000]
    assert ledger_verify_report().ok


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        pytest.param(lambda c: spec(c, 99, amount_minor=100_000), InsufficientFunds, id="overdraws with the others"),
        pytest.param(
            lambda c: EntrySpec("reward:99:approve", "approve", [Leg.debit(c.budget, 1), Leg.credit(c.payable, 3)]),
            UnbalancedEntry,
            id="unbalanced",
        ),
        pytest.param(lambda c: spec(c, 0, amount_minor=7), IdempotencyConflict, id="repeats a key with other content"),
    ],
)
def test_batch_all_or_nothing_one_bad_entry_refuses_the_whole_batch(chart, funded_budget, bad, error):
    ledger_entry_post(idempotency_key="reward:0:approve", kind="reward_approve", legs=pay(chart, 1_000))
    before = ledger_snapshot()

    with pytest.raises(error):
        ledger_entries_post(entries=[spec(chart, n) for n in range(1, 5)] + [bad(chart)])

    assert ledger_snapshot() == before


@pytest.mark.parametrize("all_or_nothing", [True, False])
def test_an_empty_batch_posts_nothing(chart, funded_budget, all_or_nothing):
    before = ledger_snapshot()

    result = ledger_entries_post(entries=[], all_or_nothing=all_or_nothing)

    assert (result.posted, result.replayed, result.refused) == ([], [], [])
    assert ledger_snapshot() == before


def test_batch_all_or_nothing_refuses_a_repeated_key_inside_the_batch(chart, funded_budget):
    before = ledger_snapshot()

    with pytest.raises(InvalidInput) as exc:
        ledger_entries_post(entries=[spec(chart, 1), spec(chart, 1)])

    assert exc.value.code == "duplicate_idempotency_key"
    assert ledger_snapshot() == before


def test_batch_all_or_nothing_replayed_in_full_posts_nothing_and_reports_replays(chart, funded_budget):
    first = ledger_entries_post(entries=[spec(chart, n) for n in range(3)])
    before = ledger_snapshot()

    again = ledger_entries_post(entries=[spec(chart, n) for n in range(3)])

    assert again.posted == []
    assert sorted(e.pk for e in again.replayed) == sorted(e.pk for e in first.posted)
    assert ledger_snapshot() == before


def test_batch_all_or_nothing_partly_replayed_posts_only_the_new_entries(chart, funded_budget):
    ledger_entries_post(entries=[spec(chart, n) for n in range(2)])

    result = ledger_entries_post(entries=[spec(chart, n) for n in range(4)])

    assert [e.idempotency_key for e in result.posted] == ["reward:2:approve", "reward:3:approve"]
    assert sorted(e.idempotency_key for e in result.replayed) == ["reward:0:approve", "reward:1:approve"]
    assert posted(chart.payable) == 4_000


def test_batch_best_effort_reports_each_refusal_with_its_code_and_posts_the_rest(chart, funded_budget):
    ledger_entry_post(idempotency_key="reward:0:approve", kind="reward_approve", legs=pay(chart, 1_000))

    result = ledger_entries_post(
        all_or_nothing=False,
        entries=[
            spec(chart, 0),  # replay
            spec(chart, 1),
            spec(chart, 2, amount_minor=1_000_000),  # more than the budget
            EntrySpec("reward:3:approve", "reward_approve", [Leg.debit(chart.budget, 5)]),
            spec(chart, 0, amount_minor=3),  # same key, other content
            spec(chart, 4),
        ],
    )

    assert [e.idempotency_key for e in result.posted] == ["reward:1:approve", "reward:4:approve"]
    assert [e.idempotency_key for e in result.replayed] == ["reward:0:approve"]
    assert [(r.idempotency_key, r.code) for r in result.refused] == [
        ("reward:2:approve", "insufficient_funds"),
        ("reward:3:approve", "unbalanced_entry"),
        ("reward:0:approve", "idempotency_conflict"),
    ]
    assert posted(chart.payable) == 3_000
    assert not JournalEntry.objects.filter(idempotency_key__in=["reward:2:approve", "reward:3:approve"]).exists()
    assert ledger_verify_report().ok


# --- holds ---------------------------------------------------------------------------------------


def hold(chart, amount_minor=10_000, key="hold:1", **kwargs):
    (created,) = ledger_holds_create(
        account=chart.budget, currency="EUR", holds=[HoldSpec(idempotency_key=key, amount_minor=amount_minor, **kwargs)]
    )
    return created


def test_hold_reduces_available_but_not_posted(chart, funded_budget):
    (created,) = ledger_holds_create(
        account=chart.budget,
        currency="EUR",
        holds=[HoldSpec(idempotency_key="hold:1", amount_minor=10_000, reference_type="reward", reference_id=7)],
    )

    stored = Hold.objects.get(pk=created.pk)
    assert (stored.status, stored.amount_minor, stored.reference_id) == (HoldStatus.PENDING, 10_000, "7")
    balance = account_balance(account_id=chart.budget.pk)
    assert (balance.posted_minor, balance.held_minor, balance.available_minor) == (100_000, 10_000, 90_000)
    assert hold_pending_total(account=chart.budget) == 10_000


def test_hold_beyond_available_is_insufficient_funds_and_writes_nothing(chart, funded_budget):
    hold(chart, 60_000, key="hold:1")
    before = ledger_snapshot()

    with pytest.raises(InsufficientFunds):
        hold(chart, 40_001, key="hold:2")

    assert ledger_snapshot() == before
    assert not Hold.objects.filter(idempotency_key="hold:2").exists()


def test_hold_replay_returns_the_same_hold_and_holds_nothing_more(chart, funded_budget):
    first = hold(chart)
    before = ledger_snapshot()

    again = hold(chart)

    assert again.pk == first.pk
    assert ledger_snapshot() == before


@pytest.mark.parametrize("other", ["amount", "account"])
def test_hold_same_key_other_content_is_an_idempotency_conflict(chart, funded_budget, other):
    hold(chart)
    other_budget = fund(BudgetAccountFactory(), 50_000, source=chart.equity)
    before = ledger_snapshot()

    with pytest.raises(IdempotencyConflict):
        ledger_holds_create(
            account=other_budget if other == "account" else chart.budget,
            currency="EUR",
            holds=[HoldSpec(idempotency_key="hold:1", amount_minor=10_000 if other == "account" else 10_001)],
        )

    assert ledger_snapshot() == before


@pytest.mark.parametrize(
    ("key", "amount", "currency", "error"),
    [
        ("hold:1", 0, "EUR", InvalidInput),
        ("hold:1", -5, "EUR", InvalidInput),
        ("hold:1", 10.0, "EUR", InvalidInput),
        ("hold:1", True, "EUR", InvalidInput),
        ("hold:1", 2**63, "EUR", InvalidInput),
        ("hold:1", 100, "USD", CurrencyMismatch),
        ("", 100, "EUR", InvalidInput),
        ("k" * 201, 100, "EUR", InvalidInput),
    ],
)
def test_hold_refuses_bad_amounts_keys_and_currencies(chart, funded_budget, key, amount, currency, error):
    before = ledger_snapshot()

    with pytest.raises(error):
        ledger_holds_create(
            account=chart.budget, currency=currency, holds=[HoldSpec(idempotency_key=key, amount_minor=amount)]
        )

    assert ledger_snapshot() == before


def test_hold_on_an_inactive_account_is_refused(chart, funded_budget):
    account_set_active(account=chart.budget, is_active=False)
    before = ledger_snapshot()

    with pytest.raises(InactiveAccount):
        hold(chart)

    assert ledger_snapshot() == before


def test_hold_commit_in_full(chart, funded_budget):
    held = hold(chart, 10_000, reference_type="reward", reference_id="7")

    result = ledger_hold_commit(
        hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 10_000)
    )

    assert result.replayed is False
    held.refresh_from_db()
    assert (held.status, held.committed_amount_minor, held.commit_entry_id) == (
        HoldStatus.COMMITTED,
        10_000,
        result.entry.pk,
    )
    budget = account_balance(account_id=chart.budget.pk)
    assert (budget.posted_minor, budget.held_minor) == (90_000, 0)
    assert posted(chart.payable) == 10_000
    # The entry carries the hold's reference, so the reward's money trail is one query.
    assert (result.entry.reference_type, result.entry.reference_id) == ("reward", "7")
    assert ledger_verify_report().ok


def test_hold_commit_partial_releases_the_rest(chart, funded_budget):
    held = hold(chart, 10_000)

    ledger_hold_commit(
        hold=held,
        idempotency_key="reward:1:approve",
        kind="reward_approve",
        legs=[Leg.debit(chart.budget, 7_000), Leg.credit(chart.payable, 6_500), Leg.credit(chart.fees, 500)],
    )

    held.refresh_from_db()
    assert held.committed_amount_minor == 7_000
    budget = account_balance(account_id=chart.budget.pk)
    assert (budget.posted_minor, budget.held_minor, budget.available_minor) == (93_000, 0, 93_000)
    assert (posted(chart.payable), posted(chart.fees)) == (6_500, 500)


def test_hold_commit_may_use_the_whole_available_balance_of_the_account(chart):
    # A budget holding exactly the held amount: the release and the debit land together, so the
    # account never looks overdrawn in between.
    fund(chart.budget, 10_000, source=chart.equity)
    held = hold(chart, 10_000)

    ledger_hold_commit(hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 10_000))

    assert account_balance(account_id=chart.budget.pk).posted_minor == 0


@pytest.mark.parametrize(
    "make_legs",
    [
        pytest.param(lambda c: pay(c, 10_001), id="more than held"),
        pytest.param(lambda c: [Leg.debit(c.payable, 100), Leg.credit(c.fees, 100)], id="not from the held account"),
        pytest.param(lambda c: [Leg.credit(c.budget, 100), Leg.debit(c.payable, 100)], id="into the held account"),
    ],
)
def test_hold_commit_must_take_between_one_and_the_held_amount_from_the_held_account(chart, funded_budget, make_legs):
    held = hold(chart, 10_000)
    before = ledger_snapshot()

    with pytest.raises(InvalidInput) as exc:
        ledger_hold_commit(hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=make_legs(chart))

    assert exc.value.code == "invalid_hold_commit"
    assert ledger_snapshot() == before


def test_hold_commit_twice_with_the_same_key_is_a_replay(chart, funded_budget):
    held = hold(chart, 10_000)
    first = ledger_hold_commit(
        hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 8_000)
    )
    before = ledger_snapshot()

    again = ledger_hold_commit(
        hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 8_000)
    )

    assert again.replayed is True
    assert again.entry.pk == first.entry.pk
    assert ledger_snapshot() == before


def test_hold_commit_twice_with_another_key_is_refused(chart, funded_budget):
    held = hold(chart, 10_000)
    ledger_hold_commit(hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 8_000))
    before = ledger_snapshot()

    with pytest.raises(HoldNotPending):
        ledger_hold_commit(hold=held, idempotency_key="reward:1:again", kind="reward_approve", legs=pay(chart, 8_000))

    assert ledger_snapshot() == before
    assert not JournalEntry.objects.filter(idempotency_key="reward:1:again").exists()


def test_hold_commit_with_a_key_used_by_another_entry_is_refused(chart, funded_budget):
    held = hold(chart, 10_000)
    ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100))
    before = ledger_snapshot()

    with pytest.raises(HoldNotPending):
        ledger_hold_commit(hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100))

    assert ledger_snapshot() == before


def commit(held, n, amount_minor, chart):
    return HoldCommit(
        hold=held, idempotency_key=f"reward:{n}:commit", kind="reward_payable", legs=pay(chart, amount_minor)
    )


def test_holds_commit_in_one_call_commits_each_hold_once_with_its_own_entry(chart, funded_budget):
    # given three pending holds on the budget
    holds = [hold(chart, 1_000 * n, key=f"hold:{n}") for n in (1, 2, 3)]
    # when they are committed together (the last one partly)
    results = ledger_holds_commit(
        commits=[
            commit(holds[0], 1, 1_000, chart),
            commit(holds[1], 2, 2_000, chart),
            commit(holds[2], 3, 2_500, chart),
        ]
    )
    # then each hold has its own entry, in the order given, and the rest of the third is released
    assert [r.replayed for r in results] == [False, False, False]
    assert [r.entry.idempotency_key for r in results] == ["reward:1:commit", "reward:2:commit", "reward:3:commit"]
    for held, result, amount in zip(holds, results, (1_000, 2_000, 2_500), strict=True):
        held.refresh_from_db()
        assert (held.status, held.committed_amount_minor, held.commit_entry_id) == (
            HoldStatus.COMMITTED,
            amount,
            result.entry.pk,
        )
    budget = account_balance(account_id=chart.budget.pk)
    assert (budget.posted_minor, budget.held_minor) == (100_000 - 5_500, 0)
    assert posted(chart.payable) == 5_500
    assert ledger_verify_report().ok
    # and the same call again is a replay that writes nothing
    before = ledger_snapshot()
    again = ledger_holds_commit(
        commits=[
            commit(holds[0], 1, 1_000, chart),
            commit(holds[1], 2, 2_000, chart),
            commit(holds[2], 3, 2_500, chart),
        ]
    )
    assert [r.replayed for r in again] == [True, True, True]
    assert [r.entry.pk for r in again] == [r.entry.pk for r in results]
    assert ledger_snapshot() == before


def test_holds_commit_with_one_hold_already_settled_writes_nothing(chart, funded_budget):
    first, second = hold(chart, 1_000, key="hold:1"), hold(chart, 1_000, key="hold:2")
    ledger_hold_commit(hold=second, idempotency_key="reward:2:other", kind="reward_payable", legs=pay(chart, 1_000))
    before = ledger_snapshot()

    with pytest.raises(HoldNotPending):
        ledger_holds_commit(commits=[commit(first, 1, 1_000, chart), commit(second, 2, 1_000, chart)])

    assert ledger_snapshot() == before
    first.refresh_from_db()
    assert first.status == HoldStatus.PENDING
    assert not JournalEntry.objects.filter(idempotency_key__in=["reward:1:commit", "reward:2:commit"]).exists()


def test_holds_commit_with_a_wrong_replay_takes_the_new_entries_back(chart, funded_budget):
    # the second commit's key was used by an entry that did not settle its hold
    first, second = hold(chart, 1_000, key="hold:1"), hold(chart, 1_000, key="hold:2")
    ledger_entry_post(idempotency_key="reward:2:commit", kind="reward_payable", legs=pay(chart, 1_000))
    before = ledger_snapshot()

    with pytest.raises(HoldNotPending):
        ledger_holds_commit(commits=[commit(first, 1, 1_000, chart), commit(second, 2, 1_000, chart)])

    assert ledger_snapshot() == before
    assert not JournalEntry.objects.filter(idempotency_key="reward:1:commit").exists()


@pytest.mark.parametrize("resolve", ["void", "expire"])
def test_hold_commit_after_void_or_expiry_is_refused(chart, funded_budget, resolve):
    held = hold(chart, 10_000, expires_at=timezone.now() + timedelta(hours=1))
    if resolve == "void":
        ledger_hold_void(hold=held)
    else:
        ledger_holds_expire(now=timezone.now() + timedelta(hours=2))
    before = ledger_snapshot()

    with pytest.raises(HoldNotPending):
        ledger_hold_commit(hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100))

    assert ledger_snapshot() == before
    assert not JournalEntry.objects.filter(idempotency_key="reward:1:approve").exists()


def test_hold_void_releases_the_hold_and_a_second_void_is_a_replay(chart, funded_budget):
    held = hold(chart, 10_000)

    first = ledger_hold_void(hold=held)
    after_first = ledger_snapshot()
    again = ledger_hold_void(hold=held)

    assert (first.replayed, again.replayed) == (False, True)
    assert again.hold.status == HoldStatus.VOIDED
    assert account_balance(account_id=chart.budget.pk).held_minor == 0
    assert ledger_snapshot() == after_first


@pytest.mark.parametrize("resolve", ["commit", "expire"])
def test_hold_void_after_commit_or_expiry_is_refused(chart, funded_budget, resolve):
    held = hold(chart, 10_000, expires_at=timezone.now() + timedelta(hours=1))
    if resolve == "commit":
        ledger_hold_commit(hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100))
    else:
        ledger_holds_expire(now=timezone.now() + timedelta(hours=2))
    before = ledger_snapshot()

    with pytest.raises(HoldNotPending) as exc:
        ledger_hold_void(hold=held)

    assert exc.value.details["status"] == ("committed" if resolve == "commit" else "expired")
    assert ledger_snapshot() == before


def test_holds_expire_only_due_pending_holds_and_only_once(chart, funded_budget):
    now = timezone.now()
    due = hold(chart, 1_000, key="hold:due", expires_at=now - timedelta(minutes=1))
    due_exactly = hold(chart, 2_000, key="hold:due-now", expires_at=now)
    later = hold(chart, 3_000, key="hold:later", expires_at=now + timedelta(minutes=1))
    forever = hold(chart, 4_000, key="hold:forever")
    voided = hold(chart, 5_000, key="hold:voided", expires_at=now - timedelta(minutes=1))
    ledger_hold_void(hold=voided)

    expired = ledger_holds_expire(now=now, batch_size=1)  # several batches
    expired_again = ledger_holds_expire(now=now)

    assert (expired, expired_again) == (2, 0)
    statuses = dict(Hold.objects.values_list("idempotency_key", "status"))
    assert statuses == {
        due.idempotency_key: HoldStatus.EXPIRED,
        due_exactly.idempotency_key: HoldStatus.EXPIRED,
        later.idempotency_key: HoldStatus.PENDING,
        forever.idempotency_key: HoldStatus.PENDING,
        voided.idempotency_key: HoldStatus.VOIDED,
    }
    assert account_balance(account_id=chart.budget.pk).held_minor == 7_000
    assert ledger_verify_report().ok


def test_a_run_out_of_time_expires_one_batch_and_the_next_run_the_rest(chart, funded_budget):
    now = timezone.now()
    for n in range(3):
        hold(chart, 1_000, key=f"hold:due-{n}", expires_at=now - timedelta(minutes=1))

    runs = [ledger_holds_expire(now=now, batch_size=2, budget_seconds=0) for _ in range(3)]

    assert runs == [2, 1, 0]
    assert set(Hold.objects.values_list("status", flat=True)) == {HoldStatus.EXPIRED}
    assert ledger_verify_report().ok


# --- reversals -----------------------------------------------------------------------------------


def test_reverse_restores_every_balance(chart, funded_budget):
    before = account_balance(account_id=chart.budget.pk), account_balance(account_id=chart.payable.pk)
    original = ledger_entry_post(
        idempotency_key="reward:1:approve",
        kind="reward_approve",
        legs=[Leg.debit(chart.budget, 3_000), Leg.credit(chart.payable, 2_700), Leg.credit(chart.fees, 300)],
    ).entry

    reversal = ledger_entry_reverse(entry=original, idempotency_key="reward:1:void")

    assert reversal.replayed is False
    assert reversal.entry.reverses_id == original.pk
    assert reversal.entry.kind == "reversal:reward_approve"
    assert (account_balance(account_id=chart.budget.pk), account_balance(account_id=chart.payable.pk)) == before
    assert posted(chart.fees) == 0
    assert sorted(reversal.entry.postings.values_list("amount_minor", flat=True)) == [-3_000, 300, 2_700]
    assert ledger_verify_report().ok


def test_reverse_twice_is_already_reversed(chart, funded_budget):
    original = ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100)).entry
    ledger_entry_reverse(entry=original, idempotency_key="reward:1:void")
    before = ledger_snapshot()

    with pytest.raises(AlreadyReversed) as exc:
        ledger_entry_reverse(entry=original, idempotency_key="reward:1:void-again")

    assert exc.value.code == "already_reversed"
    assert ledger_snapshot() == before


def test_reverse_replay_by_key_returns_the_reversal(chart, funded_budget):
    original = ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100)).entry
    first = ledger_entry_reverse(entry=original, idempotency_key="reward:1:void")
    before = ledger_snapshot()

    again = ledger_entry_reverse(entry=original, idempotency_key="reward:1:void")

    assert again.replayed is True
    assert again.entry.pk == first.entry.pk
    assert ledger_snapshot() == before


def test_reverse_with_a_key_used_by_another_entry_is_a_conflict(chart, funded_budget):
    original = ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100)).entry
    before = ledger_snapshot()

    with pytest.raises(IdempotencyConflict):
        ledger_entry_reverse(entry=original, idempotency_key="reward:1:approve")

    assert ledger_snapshot() == before


def test_reverse_is_refused_when_the_money_has_moved_on_from_a_no_overdraft_account(chart):
    # Money came into the budget and was spent: taking it back out would overdraw the budget.
    fund(chart.budget, 1_000, source=chart.equity)
    topup = JournalEntry.objects.get(kind="test_funding")
    ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 600))
    before = ledger_snapshot()

    with pytest.raises(InsufficientFunds):
        ledger_entry_reverse(entry=topup, idempotency_key="topup:1:reverse")

    assert ledger_snapshot() == before


# --- selectors -----------------------------------------------------------------------------------


def test_account_statement_pages_by_keyset_with_the_running_balance(chart, funded_budget):
    for n in range(1, 6):
        ledger_entry_post(idempotency_key=f"reward:{n}:approve", kind="reward_approve", legs=pay(chart, n * 100))

    first = account_statement(account=chart.budget, limit=4)
    second = account_statement(account=chart.budget, after_posting_id=first.next_cursor, limit=4)

    lines = first.lines + second.lines
    assert second.next_cursor is None
    assert [line.balance_after_minor for line in lines] == [100_000, 99_900, 99_700, 99_400, 99_000, 98_500]
    assert [line.credit_minor for line in lines] == [100_000, 0, 0, 0, 0, 0]
    assert [line.debit_minor for line in lines] == [0, 100, 200, 300, 400, 500]
    assert [line.idempotency_key for line in lines[1:]] == [f"reward:{n}:approve" for n in range(1, 6)]
    assert len({line.posting_id for line in lines}) == 6


def test_account_statement_of_an_empty_account(chart):
    page = account_statement(account=chart.payable)

    assert (page.lines, page.next_cursor) == ([], None)


def test_account_statement_on_the_last_full_page_has_no_cursor(chart, funded_budget):
    ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100))

    page = account_statement(account=chart.budget, limit=2)

    assert len(page.lines) == 2
    assert page.next_cursor is None


def test_trial_balance_is_zero_per_currency(chart, funded_budget):
    usd_bank = BankAccountFactory(code="platform:bank:X:USD", currency="USD")
    usd_funds = AccountFactory(code="brand:1:funds:USD", currency="USD")
    ledger_entry_post(
        idempotency_key="topup:usd", kind="topup", legs=[Leg.debit(usd_bank, 777), Leg.credit(usd_funds, 777)]
    )
    ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100))

    rows = {row.currency: row for row in trial_balance()}

    assert set(rows) == {"EUR", "USD"}
    assert all(row.difference_minor == 0 for row in rows.values())
    assert (rows["USD"].debit_balances_minor, rows["USD"].credit_balances_minor) == (777, 777)


def test_ledger_verify_report_is_ok_for_books_kept_by_the_services(chart, funded_budget):
    held = hold(chart, 5_000)
    ledger_hold_commit(hold=held, idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 4_000))
    hold(chart, 1_000, key="hold:2")

    report = ledger_verify_report()

    assert report.ok
    assert (report.accounts_checked, report.entries_checked, report.postings_checked) == (5, 2, 4)


def test_account_balance_of_an_unknown_account_is_not_found(db):
    with pytest.raises(NotFound):
        account_balance(account_id=404)
    with pytest.raises(NotFound):
        account_balance_by_code(code="nope")


# --- outside any transaction (PostgreSQL posts each entry as one self-committing statement) -------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_autocommit_post_replay_and_conflict(chart, funded_budget):
    first = ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 2_500))
    again = ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 2_500))
    before = ledger_snapshot()

    with pytest.raises(IdempotencyConflict):
        ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 2_600))

    assert (first.replayed, again.replayed, again.entry.pk) == (False, True, first.entry.pk)
    assert JournalEntry.objects.get(pk=first.entry.pk).postings.count() == 2
    assert posted(chart.payable) == 2_500
    assert ledger_snapshot() == before


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("make_legs", "error"),
    [
        pytest.param(lambda c: pay(c, 100_001), InsufficientFunds, id="insufficient funds"),
        pytest.param(
            lambda c: [Leg(c.budget, 100, "USD"), Leg(c.payable, -100, "USD")], CurrencyMismatch, id="currency mismatch"
        ),
    ],
)
def test_autocommit_refusals_write_nothing(chart, funded_budget, make_legs, error):
    before = ledger_snapshot()

    with pytest.raises(error):
        ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=make_legs(chart))

    assert ledger_snapshot() == before


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_autocommit_post_to_an_account_deactivated_meanwhile_is_refused_by_the_database(chart, funded_budget):
    # The caller's Account object still says active; the database knows better.
    Account.objects.filter(pk=chart.payable.pk).update(is_active=False)
    before = ledger_snapshot()

    with pytest.raises(InactiveAccount):
        ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100))

    assert ledger_snapshot() == before


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_autocommit_reverse_twice_is_already_reversed(chart, funded_budget):
    original = ledger_entry_post(idempotency_key="reward:1:approve", kind="reward_approve", legs=pay(chart, 100)).entry
    ledger_entry_reverse(entry=original, idempotency_key="reward:1:void")
    before = ledger_snapshot()

    with pytest.raises(AlreadyReversed):
        ledger_entry_reverse(entry=original, idempotency_key="reward:1:void-again")

    assert ledger_snapshot() == before
    assert posted(chart.payable) == 0
    assert ledger_verify_report().ok


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_entry_posted_alone_writes_the_same_rows_as_the_same_entry_in_a_list(chart, funded_budget):
    # Alone and outside a transaction, PostgreSQL takes the one-statement path; a list takes the
    # common one. The two must agree (STYLE 14), so both run on the same input here.
    legs = [Leg.debit(chart.budget, 700), Leg.credit(chart.payable, 650), Leg.credit(chart.fees, 50)]
    content = {"kind": "reward_approve", "legs": legs, "memo": "m", "reference_type": "reward", "reference_id": "9"}

    ledger_entry_post(idempotency_key="alone", **content)
    ledger_entries_post(entries=[EntrySpec(idempotency_key="listed", **content)])

    def written(key):
        entry = JournalEntry.objects.get(idempotency_key=key)
        fields = ("kind", "memo", "effective_date", "reference_type", "reference_id", "reverses_id", "content_hash")
        postings = entry.postings.order_by("pk").values_list("account_id", "amount_minor", "currency")
        return [getattr(entry, name) for name in fields], list(postings)

    assert written("alone") == written("listed")
    assert ledger_verify_report().ok
