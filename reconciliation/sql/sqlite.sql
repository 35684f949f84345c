-- SQLite (the embedded demo) keeps the materialised balances with row triggers; the other rules
-- (balanced entries, append-only, hold transitions) are enforced by the services and the models
-- there, because SQLite has neither deferred triggers nor a way to tell a flush from an edit.
CREATE TRIGGER IF NOT EXISTS ledger_posting_apply AFTER INSERT ON reconciliation_posting
BEGIN
    SELECT RAISE(ABORT, 'posting_entry_exists')
     WHERE NOT EXISTS (SELECT 1 FROM reconciliation_journalentry WHERE id = NEW.entry_id);
    SELECT RAISE(ABORT, 'posting_currency_matches_account')
     WHERE (SELECT currency FROM reconciliation_account WHERE id = NEW.account_id) IS NOT NEW.currency;
    UPDATE reconciliation_account
       SET posted_minor = posted_minor
           + CASE WHEN kind IN ('asset', 'expense') THEN NEW.amount_minor ELSE -NEW.amount_minor END
     WHERE id = NEW.account_id;
    UPDATE reconciliation_posting
       SET balance_after_minor = (SELECT posted_minor FROM reconciliation_account WHERE id = NEW.account_id)
     WHERE id = NEW.id;
END;

CREATE TRIGGER IF NOT EXISTS ledger_hold_insert AFTER INSERT ON reconciliation_hold
BEGIN
    SELECT RAISE(ABORT, 'posting_currency_matches_account')
     WHERE (SELECT currency FROM reconciliation_account WHERE id = NEW.account_id) IS NOT NEW.currency;
    UPDATE reconciliation_account SET held_minor = held_minor + NEW.amount_minor WHERE id = NEW.account_id;
END;

CREATE TRIGGER IF NOT EXISTS ledger_hold_transition BEFORE UPDATE ON reconciliation_hold
WHEN OLD.status <> 'pending'
BEGIN
    SELECT RAISE(ABORT, 'hold_transition');
END;

CREATE TRIGGER IF NOT EXISTS ledger_hold_release AFTER UPDATE OF status ON reconciliation_hold
WHEN OLD.status = 'pending' AND NEW.status <> 'pending'
BEGIN
    UPDATE reconciliation_account SET held_minor = held_minor - OLD.amount_minor WHERE id = OLD.account_id;
END;
