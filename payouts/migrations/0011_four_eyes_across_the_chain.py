"""Four-eyes across the whole chain of one payment (DESIGN §5), in the database: a payout's or a
pain.001 file's approver is never who approved (``decided_by``) a reward it pays. A CHECK
constraint sees one row only, so triggers on the approval of a payout or a file (a payout's
items are written when it is created, before anyone can approve it, so the hot insert path
carries no trigger). ``payouts.services.four_eyes`` asks first, for a message. PostgreSQL only,
as the other triggers."""

from django.db import migrations

INSTALL = """
CREATE OR REPLACE FUNCTION payout_four_eyes_chain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM payouts_payoutitem i JOIN campaigns_reward r ON r.id = i.reward_id
        WHERE i.payout_id = NEW.id AND r.decided_by_id = NEW.approved_by_id
    ) THEN
        RAISE EXCEPTION 'four-eyes: user % approved a reward that payout % pays', NEW.approved_by_id, NEW.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER payout_four_eyes_chain BEFORE UPDATE OF approved_by_id ON payouts_payout
    FOR EACH ROW WHEN (NEW.approved_by_id IS DISTINCT FROM OLD.approved_by_id AND NEW.approved_by_id IS NOT NULL) EXECUTE FUNCTION payout_four_eyes_chain();

CREATE OR REPLACE FUNCTION payout_batch_four_eyes_chain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM payouts_payout p
        JOIN payouts_payoutitem i ON i.payout_id = p.id
        JOIN campaigns_reward r ON r.id = i.reward_id
        WHERE p.batch_id = NEW.id AND r.decided_by_id = NEW.approved_by_id
    ) THEN
        RAISE EXCEPTION 'four-eyes: user % approved a reward that batch % pays', NEW.approved_by_id, NEW.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER payout_batch_four_eyes_chain BEFORE UPDATE OF approved_by_id ON payouts_payoutbatch
    FOR EACH ROW WHEN (NEW.approved_by_id IS DISTINCT FROM OLD.approved_by_id AND NEW.approved_by_id IS NOT NULL) EXECUTE FUNCTION payout_batch_four_eyes_chain();
"""

UNINSTALL = """
DROP TRIGGER IF EXISTS payout_four_eyes_chain ON payouts_payout;
DROP TRIGGER IF EXISTS payout_batch_four_eyes_chain ON payouts_payoutbatch;
DROP FUNCTION IF EXISTS payout_four_eyes_chain();
DROP FUNCTION IF EXISTS payout_batch_four_eyes_chain();
"""


def _run(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        # No parameters: the SQL's '%' (RAISE formats) must reach PostgreSQL as written.
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("payouts", "0010_payout_batch_instant"),
        ("campaigns", "0017_campaign_vop_policy"),
    ]
    operations = [migrations.RunPython(_run(INSTALL), _run(UNINSTALL))]
