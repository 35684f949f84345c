"""Domain hooks: one app announces what its transaction wrote; other apps react after the commit.

The app that writes the rows calls ``hook_fire(NAME, *values)`` in the transaction that writes
them. Every receiver registered for that name (``hook_register``, from the listening app's
``ready()``) runs once after the commit, with all the values fired under that name in that
transaction — a bulk call of a thousand rewards is one call, not a thousand. Nothing runs for a
transaction or savepoint that rolls back; outside a transaction a receiver runs at once. A
receiver's failure is logged, never raised into a caller whose data committed: each reaction
here has an every-minute sweep that does the same work, so a lost one only costs time.

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


def hook_register(name: str, receiver: Receiver) -> None:
    """Have ``receiver(values)`` run after each commit that fired ``name``. Idempotent."""
    if receiver not in _receivers[name]:
        _receivers[name].append(receiver)


def hook_fire(name: str, *values) -> None:
    """Announce ``values`` under ``name`` for the current transaction's commit."""
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
