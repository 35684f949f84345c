-- The ledger's invariants, enforced by PostgreSQL itself so that no code path and no raw SQL can
-- break them. Installed by migration 0002. Error codes are SQLSTATEs the services map to
-- ApplicationError codes (see reconciliation/db.py).

-- 1. A posting moves its account's materialised balance in the same statement, and records the
--    balance after it. The account's CHECK constraint account_no_overdraft refuses the UPDATE when a
--    no-overdraft account would go below its holds. Account rows are locked in the order the
--    postings are inserted; the services insert in account-id order (the one lock order).
CREATE OR REPLACE FUNCTION ledger_posting_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    acc_currency text;
    acc_active boolean;
BEGIN
    PERFORM 1 FROM reconciliation_journalentry WHERE id = NEW.entry_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'posting for unknown journal entry %', NEW.entry_id
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'posting_entry_exists';
    END IF;
    UPDATE reconciliation_account
       SET posted_minor = posted_minor
           + CASE WHEN kind IN ('asset', 'expense') THEN NEW.amount_minor ELSE -NEW.amount_minor END
     WHERE id = NEW.account_id
    RETURNING posted_minor, currency, is_active INTO NEW.balance_after_minor, acc_currency, acc_active;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'posting for unknown account %', NEW.account_id
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'posting_account_exists';
    END IF;
    IF acc_currency IS DISTINCT FROM NEW.currency THEN
        RAISE EXCEPTION 'posting currency % does not match account % currency %',
            NEW.currency, NEW.account_id, acc_currency
            USING ERRCODE = 'check_violation', CONSTRAINT = 'posting_currency_matches_account';
    END IF;
    IF NOT acc_active THEN
        RAISE EXCEPTION 'account % is inactive', NEW.account_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'posting_account_active';
    END IF;
    RETURN NEW;
END $$;

-- Every query in these functions is a point lookup by key. Their plans are cached per session, and
-- a plan made while a table was nearly empty would scan it whole for the rest of the session —
-- inside the lock window of a hot account, growing with its history. Index paths only.
ALTER FUNCTION ledger_posting_apply() SET enable_seqscan = off;

DROP TRIGGER IF EXISTS ledger_posting_apply ON reconciliation_posting;
CREATE TRIGGER ledger_posting_apply BEFORE INSERT ON reconciliation_posting
    FOR EACH ROW EXECUTE FUNCTION ledger_posting_apply();

-- 2. Every journal entry balances per currency, checked at commit (deferred) so the legs of an
--    entry can be inserted one by one inside the transaction.
CREATE OR REPLACE FUNCTION ledger_entry_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad_currency text;
BEGIN
    SELECT currency INTO bad_currency
      FROM reconciliation_posting
     WHERE entry_id = NEW.entry_id
     GROUP BY currency
    HAVING sum(amount_minor) <> 0
     LIMIT 1;
    IF bad_currency IS NOT NULL THEN
        RAISE EXCEPTION 'journal entry % does not balance in %', NEW.entry_id, bad_currency
            USING ERRCODE = 'check_violation', CONSTRAINT = 'entry_balanced_per_currency';
    END IF;
    RETURN NULL;
END $$;

ALTER FUNCTION ledger_entry_balanced() SET enable_seqscan = off;

DROP TRIGGER IF EXISTS ledger_entry_balanced ON reconciliation_posting;
CREATE CONSTRAINT TRIGGER ledger_entry_balanced AFTER INSERT ON reconciliation_posting
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION ledger_entry_balanced();

-- 3. Postings and journal entries are append-only: a correction is a reversing entry.
CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation', CONSTRAINT = 'ledger_append_only';
END $$;

DROP TRIGGER IF EXISTS ledger_posting_append_only ON reconciliation_posting;
CREATE TRIGGER ledger_posting_append_only BEFORE UPDATE OR DELETE ON reconciliation_posting
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
DROP TRIGGER IF EXISTS ledger_entry_append_only ON reconciliation_journalentry;
CREATE TRIGGER ledger_entry_append_only BEFORE UPDATE OR DELETE ON reconciliation_journalentry
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- 4. Materialised balances change only through the posting and hold triggers; an account's
--    currency and kind never change once it exists; accounts are never deleted (postings point at them).
CREATE OR REPLACE FUNCTION ledger_account_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'ledger accounts cannot be deleted; deactivate them'
            USING ERRCODE = 'restrict_violation', CONSTRAINT = 'ledger_append_only';
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF NEW.posted_minor <> 0 OR NEW.held_minor <> 0 THEN
            RAISE EXCEPTION 'a new account starts at zero'
                USING ERRCODE = 'check_violation', CONSTRAINT = 'account_balance_from_postings';
        END IF;
        RETURN NEW;
    END IF;
    IF (NEW.posted_minor <> OLD.posted_minor OR NEW.held_minor <> OLD.held_minor)
       AND pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'account balances change only through postings and holds'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'account_balance_from_postings';
    END IF;
    IF NEW.id <> OLD.id OR NEW.currency <> OLD.currency OR NEW.kind <> OLD.kind THEN
        RAISE EXCEPTION 'an account''s id, currency and kind are fixed'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'account_identity_fixed';
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS ledger_account_guard ON reconciliation_account;
CREATE TRIGGER ledger_account_guard BEFORE INSERT OR UPDATE OR DELETE ON reconciliation_account
    FOR EACH ROW EXECUTE FUNCTION ledger_account_guard();

-- 5. Holds: created pending, leave pending exactly once, never change otherwise, never deleted.
--    The account's held_minor is kept equal to the sum of its pending holds, so the no-overdraft
--    CHECK counts reserved money as spent.
CREATE OR REPLACE FUNCTION ledger_hold_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    acc_currency text;
    acc_active boolean;
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'holds cannot be deleted'
            USING ERRCODE = 'restrict_violation', CONSTRAINT = 'ledger_append_only';
    ELSIF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' THEN
            RAISE EXCEPTION 'a hold is created pending'
                USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_transition';
        END IF;
        UPDATE reconciliation_account SET held_minor = held_minor + NEW.amount_minor
         WHERE id = NEW.account_id
        RETURNING currency, is_active INTO acc_currency, acc_active;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'hold on unknown account %', NEW.account_id
                USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'posting_account_exists';
        END IF;
        IF NOT acc_active THEN
            RAISE EXCEPTION 'account % is inactive', NEW.account_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'posting_account_active';
        END IF;
        IF acc_currency IS DISTINCT FROM NEW.currency THEN
            RAISE EXCEPTION 'hold currency % does not match account currency %', NEW.currency, acc_currency
                USING ERRCODE = 'check_violation', CONSTRAINT = 'posting_currency_matches_account';
        END IF;
        RETURN NEW;
    END IF;
    -- UPDATE
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'hold % is already %', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_transition';
    END IF;
    IF NEW.account_id <> OLD.account_id OR NEW.amount_minor <> OLD.amount_minor
       OR NEW.currency <> OLD.currency OR NEW.idempotency_key <> OLD.idempotency_key THEN
        RAISE EXCEPTION 'a hold''s account, amount and key are fixed'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hold_transition';
    END IF;
    IF NEW.status <> 'pending' THEN
        UPDATE reconciliation_account SET held_minor = held_minor - OLD.amount_minor
         WHERE id = OLD.account_id;
    END IF;
    RETURN NEW;
END $$;

ALTER FUNCTION ledger_hold_apply() SET enable_seqscan = off;

DROP TRIGGER IF EXISTS ledger_hold_apply ON reconciliation_hold;
CREATE TRIGGER ledger_hold_apply BEFORE INSERT OR UPDATE OR DELETE ON reconciliation_hold
    FOR EACH ROW EXECUTE FUNCTION ledger_hold_apply();

-- 6. Privileges are the deployment's job: run the application as a role that does not own these
--    tables, with INSERT/SELECT on the books and no TRUNCATE (README, "Scaling past one machine").
--    The triggers above hold even for the owner; only TRUNCATE and disabling triggers remain
--    owner-only escape hatches, which the test suite and benchmarks use to reset their databases.
