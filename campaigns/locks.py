"""The reward engine's locks (their place in the engine's order: ``core.locks``).

What must serialise for the caps to be exact:

* per-person caps and "new people only": two events of the same person (any linked identity)
  must not both read "0 rewards so far" → the person's root row, which
  ``recipients.services.people_resolve`` locks for every person it returns (a brand-new person is
  invisible to others until commit; a concurrent resolver of the same identifiers waits on the
  identifier's unique index);
* per-IBAN caps and the IBAN fraud signals: two people sharing an IBAN → an advisory lock on the
  IBAN fingerprint (``lock_ibans_statement``);
* campaign-wide caps, the budget-alert crossing and the campaign status re-check → the campaign's
  ``CampaignTally`` row and, in the same statement, its budget account row
  (``lock_campaign_tally``). Taken as late as possible, because it serialises every reservation
  of the campaign; holding the account row makes the available balance read there exact until
  commit. The no-overdraft CHECK on the account is the backstop: the database, not this code,
  guarantees the budget is never overspent.

Ingestion (``campaigns.services.ingest_batch``; a single event is a batch of one) takes them for
a whole batch: its people's roots, all its IBANs ascending, the tallies ascending, then the rule
counters, then the brand's month of usage (``BrandUsage``: read locked only when its plan has a
monthly allowance, always upserted last among the writes). A batch in which some identity needs
writes (a merge, a new identifier, a switched account) is refused before anything is locked or
written (``ComplexBatch``) and its events go one per transaction, so no transaction takes a
person's lock after a tally.

Advisory locks and FOR UPDATE are PostgreSQL-only; on SQLite every write transaction is already
exclusive (``transaction_mode=IMMEDIATE``), so they are no-ops there.
"""

import hashlib
from dataclasses import dataclass

from django.db import connection

from campaigns.models import Campaign, CampaignTally
from core.locks import IBAN_CLASS
from reconciliation.models import Account


def _key32(text: str) -> int:
    """A stable signed 32-bit key (pg_advisory_xact_lock(int, int) takes two int4). A collision
    only ever makes two unrelated IBANs wait for each other."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big", signed=True)


def lock_ibans_statement(*, fingerprints: list[str]) -> tuple[str, list] | None:
    """Transaction-scoped advisory locks on IBAN fingerprints, ascending, as one statement for
    callers sending it with their next reads; None when there is nothing to lock (or not on
    PostgreSQL)."""
    keys = sorted({_key32(fp) for fp in fingerprints if fp})
    if connection.vendor != "postgresql" or not keys:
        return None
    # One statement of the same text for any count (its prepared plan is reused; a call per key
    # made a new statement of up to 2,000 parameters for every batch). unnest yields the sorted
    # array in order and the aggregate calls the lock function row by row as they come: the
    # locks are taken ascending (tests/campaigns/test_locks.py watches one wait half-way).
    return "SELECT count(pg_advisory_xact_lock(%s, k)) FROM unnest(%s::int4[]) AS k", [IBAN_CLASS, keys]


@dataclass(frozen=True)
class TallyLock:
    funded_minor: int
    status: str
    budget_available_minor: int


def lock_campaign_tally(*, campaign_id: int) -> TallyLock:
    """Lock the campaign's tally row and its budget account row (tally first, then the account:
    the documented order) in one statement. Returns the money allocated so far, the campaign's
    current status and the budget's available balance, all read after the lock, so a pause or
    close that committed first is seen and the budget cannot move until this transaction ends
    (voids and maturing take the account row lock too)."""
    with connection.cursor() as cursor:
        cursor.execute(*tally_lock_statement(campaign_id=campaign_id))
        return tally_lock_parse(cursor.fetchall())


def tally_lock_statement(*, campaign_id: int) -> tuple[str, list]:
    """``lock_campaign_tally`` as a statement (read its rows with ``tally_lock_parse``)."""
    sql = (
        f"SELECT t.funded_minor, c.status, a.posted_minor - a.held_minor FROM {CampaignTally._meta.db_table} t "
        f"JOIN {Campaign._meta.db_table} c ON c.id = t.campaign_id "
        f"JOIN {Account._meta.db_table} a ON a.id = c.budget_account_id "
        "WHERE t.campaign_id = %s"
    )
    if connection.vendor == "postgresql":
        sql += " FOR UPDATE OF t, a"
    return sql, [campaign_id]


def tally_lock_parse(rows: list[tuple]) -> TallyLock:
    ((funded, status, available),) = rows
    return TallyLock(funded_minor=int(funded), status=status, budget_available_minor=int(available))
