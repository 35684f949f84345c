# Support reads the notices (what people were told) and the audit trail, Finance admin the audit
# trail: the role table changed (and lost payouts.view_notification, whose model moved into the
# notices outbox), so the groups are synced again.

from django.contrib.auth.management import create_permissions
from django.db import migrations

from core.roles import ops_roles_sync


def roles_sync(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ops_roles_sync(
        group_model=apps.get_model("auth", "Group"),
        permission_model=apps.get_model("auth", "Permission"),
        missing_ok=True,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0009_audit_trail_payout_batches"),
        ("recipients", "0010_notice_kind_payee_check"),
    ]
    operations = [migrations.RunPython(roles_sync, migrations.RunPython.noop)]
