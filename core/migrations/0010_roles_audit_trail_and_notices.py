# Support reads the notices (what people were told) and the audit trail, Finance admin the audit
# trail: the role table changed (and lost payouts.view_notification, whose model moved into the
# notices outbox), so the groups are synced again.

from django.db import migrations

from core.migrations._roles import ops_roles_migrate


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0009_audit_trail_payout_batches"),
        ("recipients", "0010_notice_kind_payee_check"),
    ]
    operations = [migrations.RunPython(ops_roles_migrate, migrations.RunPython.noop)]
