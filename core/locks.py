"""The lock order of the whole engine, the one place that defines it; the apps take the locks
(each in its own module, named below) and never against this order.

A path takes a subsequence of these classes, top to bottom, and within a class rows in the order
given. No path holding a lock of one class asks for a lock of an earlier class, so no two
transactions can wait on each other in a cycle:

0. the statement import lock (advisory, ``STATEMENT_IMPORT_CLASS``, one key), first thing in an
   import's transaction (``reconciliation.services.statements``): imports take turns;
1. person root rows, ascending id, always through ``recipients.services.roots.person_roots_lock``
   — the person resolver (``recipients.services.people``), erasure
   (``recipients.services.privacy``), and ``person_root_lock`` for the claim pages and
   ``reward_expire``;
2. identifier values, through their unique index, inserted in ascending (kind, value) —
   the resolver;
3. IBAN fingerprints, advisory locks ascending (``IBAN_CLASS``) — ingestion
   (``campaigns.locks.lock_ibans_statement``): per-IBAN caps and signals;
4. campaign tallies in ascending campaign id, each with its budget account row in the same
   statement (``campaigns.locks``) — ingestion, allocation, closing: the budget and the
   campaign-wide caps;
5. reward rows — reward transitions (``campaigns.services.rewards``), each after its campaign's
   tally (4): a transition may post to the budget account, which class 4 locks with the tally;
   ``reward_expire`` also takes the person's root row (1) first, so an account given and a close
   that committed first are both seen;
6. bank statement lines — the matching engine, a chunk's lines before its matchers run
   (``reconciliation.services.matching``), and erasure;
7. a payout batch row, then payout rows in ascending id — payouts (``payouts.services.states``),
   pain.002, the batch matcher, and erasure through ``payouts.payment_files.payouts_lock``;
8. holds, then ledger account rows in ascending id — the ledger
   (``reconciliation.services.accounts``); postings are inserted sorted by account, since the
   posting trigger locks each account as its posting goes in;
9. rule counters — ingestion's upsert and a reward's release;
10. the campaign row — the automatic pause's conditional UPDATE.

Known exception: one matching chunk can lock a payout (end-to-end matcher) before a batch (batch
matcher) when a file books the same payouts both singly and as a batch.

Advisory lock classes (the first argument of ``pg_advisory_xact_lock(int, int)``) are listed
here too, so no two apps lock the same keys by accident.
"""

IBAN_CLASS = 7302  # key: a hash of the IBAN fingerprint (campaigns.locks)
WEBHOOK_EMIT_CLASS = 7304  # key: the brand id (campaigns.webhooks)
STATEMENT_IMPORT_CLASS = 7305  # one key (0): bank statement imports take turns (reconciliation.statements)
