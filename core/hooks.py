"""Domain hooks: one app announces what its transaction wrote; other apps react to it.

The app that writes the rows calls ``hook_fire(NAME, *values)`` in the transaction that writes
them. Every receiver registered for that name (``hook_register``, from the listening app's
``ready()``) runs once after the commit, with all the values fired under that name in that
transaction — a bulk call of a thousand rewards is one call, not a thousand. Nothing runs for a
transaction or savepoint that rolls back; outside a transaction a receiver runs at once. A
receiver's failure is logged, never raised into a caller whose data committed: each reaction
here has an every-minute sweep that does the same work, so a lost one only costs time.

A receiver registered ``in_transaction`` runs instead at each ``hook_fire``, inside the firing
transaction, with that call's values: its writes commit or roll back with the rows they are
about, and its failure is the transaction's. For receivers that only enqueue a task: the queue
is django-q2's ORM broker on the same database (``core.queue``), so the task becomes visible
exactly when its rows do, and no crash between a commit and an enqueue can lose it. A writer of
many rows fires once for them all where it can (ingestion: once per batch).

The hooks, by the app that fires them (names only: core imports no app):
"""

import logging
from collections import defaultdict
from collections.abc import Callable

from django.db import transaction

logger = logging.getLogger(__name__)

# campaigns: rewards created or changed status; values: the Reward instances, as saved.
REWARD_CHANGED = "reward_changed"
# recipients: a person's current bank account was set; values: the IBAN_SET PersonEvent.
BANK_ACCOUNT_CHANGED = "bank_account_changed"
# any app: rows a webhook is made of were written (reward, campaign and payout events, top-ups).
AUDIT_ROWS_WRITTEN = "audit_rows_written"

Receiver = Callable[[list], None]
_receivers: dict[str, list[Receiver]] = defaultdict(list)
_in_transaction: dict[str, list[Receiver]] = defaultdict(list)


def hook_register(name: str, receiver: Receiver, *, in_transaction: bool = False) -> None:
    """Have ``receiver(values)`` run after each commit that fired ``name`` — or, ``in_transaction``,
    at each fire, in the firing transaction. Idempotent."""
    receivers = _in_transaction if in_transaction else _receivers
    if receiver not in receivers[name]:
        receivers[name].append(receiver)


def hook_fire(name: str, *values) -> None:
    """Announce ``values`` under ``name``: to the in-transaction receivers now, to the others for
    the current transaction's commit. Raises what an in-transaction receiver raises."""
    for receiver in _in_transaction.get(name, ()):
        receiver(list(values))
    if not _receivers.get(name):
        return
    conn = transaction.get_connection()
    if not conn.in_atomic_block:
        _deliver({name: list(values)})
        return
    _pending(conn)[name].extend(values)


def _pending(conn) -> dict[str, list]:
    """This savepoint's values, delivered by one on-commit callback registered in it. Django
    builds a new callback list when a transaction ends or a savepoint rolls back, dropping that
    savepoint's callbacks: a batch is kept only while its list and savepoint are current."""
    key = tuple(conn.savepoint_ids)
    batches = getattr(conn, "_hook_batches", None)
    if batches is None or batches[0] is not conn.run_on_commit:
        batches = conn._hook_batches = (conn.run_on_commit, {})
    if key not in batches[1]:
        pending: dict[str, list] = defaultdict(list)
        transaction.on_commit(lambda: _deliver(pending), robust=True)
        # on_commit appended to the same list: the batch stays valid.
        batches[1][key] = pending
    return batches[1][key]


def _deliver(pending: dict[str, list]) -> None:
    for name, values in pending.items():
        for receiver in _receivers.get(name, ()):
            try:
                receiver(values)
            except Exception:  # one receiver's failure must not stop the others (the sweeps redo it)
                logger.exception("hook %s: receiver %s failed", name, getattr(receiver, "__qualname__", receiver))
