"""The audit trail's PostgreSQL side: append-only audit tables, hash-chained per stream.

The audit tables are the reward, payout, campaign and person event tables. Each row is chained to
the previous row of its *stream* — the events of one reward, one payout, one campaign, one
person — by a BEFORE INSERT trigger, so every writer is covered: the ORM, multi-row INSERT and
the COPY of bulk ingestion. Per object, not per table: a per-table chain head is one row every
writer in the system would lock until it commits, which serialises ingestion; an object's events
are already written one transaction at a time (its row is locked by the transition). Two writers
that raced on one object without that lock would fork its chain: ``audit_verify`` reports it as
a broken link (a unique index on (stream, prev_hash) would refuse it instead, at one more index
write per row, and made raw writers that hold no lock fail).

Erasure and the chain. Most audit columns are ids, states and times; the free-form ones (``reason``,
``data``/``detail``) may name a person (a Verification-of-Payee suggestion, a reason a person
typed). A row's hash is therefore taken over its fixed columns and a *digest* of its free-form
columns, salted with a random value of its own:

    personal_digest = sha256(personal_salt || reason || US || data::text)
    row_hash        = sha256(prev_hash || fixed columns joined by US || personal_digest)

The append-only trigger refuses every UPDATE and DELETE except one, the *erase*: it may only
remove keys from ``data`` (never add or change one) and blank ``reason``, must forget the salt
and set ``erased_at``, and may change nothing else. The stored digest then still verifies the
chain, and without the salt it no longer confirms a guessed name. An erased row's free-form
content can no longer be recomputed — by design; everything else still can.

Tails: a chain shows a row removed from the middle of a stream, not the last rows of a stream or
a whole stream. ``audit_verify --seal`` (daily) therefore appends an ``AuditSeal`` — per table
the highest id, the row count up to it and a digest of every row hash in id order, itself chained
to the previous seal — and each verification checks the rows under the last seal are all there.

Reconciliation actions (the bank side's staff actions: imports, matches by hand, undos,
suspense, duplicates, write-off requests and their four-eyes decisions) joined later
(reconciliation 0015): their stream is the statement line; an import names no line, so each
import row is a chain of its own, proven by its hash and by the seal's count and digest. A
write-off decision is a new row (``decides`` → the request), never an UPDATE of the request.

Payout batch events (the building, four-eyes approval, every download and the expiry of a pain.001
file) joined with payouts 0003, one stream per batch.

The audit-table registry. Each app declares its audit tables (``AuditTable``, next to its models:
``campaigns.audit``, ``payouts.audit``, ``recipients.audit``, ``reconciliation.audit``) with
``audit_table_register`` in its ``AppConfig.ready``; verification, seals (``core.audit``) and
erasure (``recipients.services.privacy``) iterate ``audited_tables()``, so core names no table of
an app above it. The migration that makes a table an audit table runs ``install_sql`` on the
app's spec.

Frozen: a later change to what is hashed is a new migration with a new version of this SQL. The
four tables 0004 installed are frozen as 0004 saw them in ``core/migrations/_audit_0004.py``.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

US = "chr(31)"  # the unit separator: it cannot occur in the ids, states and codes it separates


@dataclass(frozen=True)
class AuditTable:
    table: str
    stream: str  # the column that names the object the row is about
    label: str  # the object's kind in the cross-object view
    fixed: tuple[str, ...]  # hashed as they are; an erase may not touch them
    reason: str | None  # the free-form text column, if the table has one
    data: str  # the free-form JSON column
    # The chain trigger looks up the stream's last row by (stream, id); the other tables have
    # that index already. Without one the planner walks the primary key backwards for
    # "ORDER BY id DESC LIMIT 1", through the whole table on every insert (10.9 ms a row).
    add_stream_index: bool = False
    # Hashed as microseconds since the epoch: exact, and the same whatever the session's TimeZone.
    timestamps: tuple[str, ...] = ("created_at",)
    # Rows without a stream (NULL) are each a chain of their own.
    nullable_stream: bool = False
    # For erasure: the streams about the given people (their ids), whose free-form columns may
    # name them; None when the table's rows are never about one person.
    person_streams: Callable[[list[int]], list[int]] | None = field(default=None, compare=False)

    @property
    def partition(self) -> str:
        """The window partition of one stream's rows, for verification."""
        if self.nullable_stream:
            return f"{self.stream}, CASE WHEN {self.stream} IS NULL THEN id END"
        return self.stream


_REGISTRY: dict[str, AuditTable] = {}


def audit_table_register(spec: AuditTable) -> None:
    """Declare an audit table (its app's ``AppConfig.ready``): verification, seals and erasure
    cover it. The triggers themselves are installed by the owning app's migration
    (``install_sql``), once, like any schema change."""
    _REGISTRY[spec.table] = spec


def audited_tables() -> tuple[AuditTable, ...]:
    """Every audit table, in registration order."""
    return tuple(_REGISTRY.values())


def _text(spec: AuditTable, column: str, row: str) -> str:
    if column in spec.timestamps:
        micros = f"(extract(epoch from {row}.{column}) * 1000000)::bigint::text"
        # created_at is never NULL (and 0004's frozen SQL has it without coalesce).
        return micros if column == "created_at" else f"coalesce({micros}, '')"
    return f"coalesce({row}.{column}::text, '')"


def personal_digest_sql(spec: AuditTable, row: str) -> str:
    reason = f"coalesce({row}.{spec.reason}, '')" if spec.reason else "''"
    return f"sha256({row}.personal_salt || convert_to({reason} || {US} || {row}.{spec.data}::text, 'UTF8'))"


def row_hash_sql(spec: AuditTable, row: str, prev: str) -> str:
    fixed = f" || {US} || ".join(_text(spec, c, row) for c in spec.fixed)
    return f"sha256(coalesce({prev}, ''::bytea) || convert_to({fixed}, 'UTF8') || {row}.personal_digest)"


def install_sql(spec: AuditTable) -> str:
    t, s = spec.table, spec.stream
    r = spec.reason
    reason_erase = f"(NEW.{r} IS NOT DISTINCT FROM OLD.{r} OR NEW.{r} = '')" if r else "true"
    stream_index = f"CREATE INDEX IF NOT EXISTS {t}_stream_idx ON {t} ({s}, id);" if spec.add_stream_index else ""
    fixed_same = " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in spec.fixed)
    new_chain = f"last_stream IS DISTINCT FROM r.stream{' OR r.stream IS NULL' if spec.nullable_stream else ''}"
    return f"""
ALTER TABLE {t}
    ADD COLUMN IF NOT EXISTS prev_hash bytea,
    ADD COLUMN IF NOT EXISTS row_hash bytea,
    ADD COLUMN IF NOT EXISTS personal_digest bytea,
    ADD COLUMN IF NOT EXISTS personal_salt bytea,
    ADD COLUMN IF NOT EXISTS erased_at timestamptz;

CREATE OR REPLACE FUNCTION {t}_chain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Rows of the same statement inserted before this one are visible here (VOLATILE), so a
    -- COPY of many events of one object chains them in order.
    SELECT row_hash INTO NEW.prev_hash FROM {t} WHERE {s} = NEW.{s} ORDER BY id DESC LIMIT 1;
    NEW.erased_at := NULL;
    NEW.personal_salt := uuid_send(gen_random_uuid());
    NEW.personal_digest := {personal_digest_sql(spec, "NEW")};
    NEW.row_hash := {row_hash_sql(spec, "NEW", "NEW.prev_hash")};
    RETURN NEW;
END $$;
-- A point look-up by the stream's index: never a plan made while the table was empty.
ALTER FUNCTION {t}_chain() SET enable_seqscan = off;

CREATE OR REPLACE FUNCTION {t}_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND {fixed_same}
       AND NEW.prev_hash IS NOT DISTINCT FROM OLD.prev_hash
       AND NEW.row_hash IS NOT DISTINCT FROM OLD.row_hash
       AND NEW.personal_digest IS NOT DISTINCT FROM OLD.personal_digest
       AND OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL AND NEW.personal_salt IS NULL
       AND OLD.{spec.data} @> NEW.{spec.data}
       AND {reason_erase} THEN
        RETURN NEW;  -- the one erase: free-form personal data removed, the chain untouched
    END IF;
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation', CONSTRAINT = 'audit_append_only';
END $$;

-- Existing rows join their stream's chain in id order before the guard exists.
DO $$
DECLARE
    r record;
    prev bytea;
    last_stream bigint;
BEGIN
    FOR r IN SELECT id, {s} AS stream FROM {t} WHERE row_hash IS NULL ORDER BY {s}, id LOOP
        IF {new_chain} THEN
            prev := NULL;
        END IF;
        UPDATE {t} AS x SET prev_hash = prev, personal_salt = uuid_send(gen_random_uuid()) WHERE x.id = r.id;
        UPDATE {t} AS x SET personal_digest = {personal_digest_sql(spec, "x")} WHERE x.id = r.id;
        UPDATE {t} AS x SET row_hash = {row_hash_sql(spec, "x", "x.prev_hash")} WHERE x.id = r.id
            RETURNING x.row_hash INTO prev;
        last_stream := r.stream;
    END LOOP;
END $$;

ALTER TABLE {t} ALTER COLUMN row_hash SET NOT NULL, ALTER COLUMN personal_digest SET NOT NULL;
{stream_index}

DROP TRIGGER IF EXISTS audit_chain ON {t};
CREATE TRIGGER audit_chain BEFORE INSERT ON {t} FOR EACH ROW EXECUTE FUNCTION {t}_chain();
DROP TRIGGER IF EXISTS audit_append_only ON {t};
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON {t} FOR EACH ROW EXECUTE FUNCTION {t}_guard();
"""


def uninstall_sql(spec: AuditTable) -> str:
    t = spec.table
    return f"""
DROP TRIGGER IF EXISTS audit_chain ON {t};
DROP TRIGGER IF EXISTS audit_append_only ON {t};
DROP FUNCTION IF EXISTS {t}_chain();
DROP FUNCTION IF EXISTS {t}_guard();
DROP INDEX IF EXISTS {t}_stream_idx;
ALTER TABLE {t} DROP COLUMN IF EXISTS prev_hash, DROP COLUMN IF EXISTS row_hash,
    DROP COLUMN IF EXISTS personal_digest, DROP COLUMN IF EXISTS personal_salt, DROP COLUMN IF EXISTS erased_at;
"""


SEAL_GUARD_SQL = """
CREATE OR REPLACE FUNCTION core_auditseal_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation', CONSTRAINT = 'audit_append_only';
END $$;
DROP TRIGGER IF EXISTS audit_append_only ON core_auditseal;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON core_auditseal
    FOR EACH ROW EXECUTE FUNCTION core_auditseal_guard();
"""

SEAL_UNGUARD_SQL = """
DROP TRIGGER IF EXISTS audit_append_only ON core_auditseal;
DROP FUNCTION IF EXISTS core_auditseal_guard();
"""
